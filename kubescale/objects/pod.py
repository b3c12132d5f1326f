"""``core/v1.Pod``: the fields kubescale reads (scheduling, eviction, the VPA's resources and
in-place resize, the HPA's readiness)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.containers import Container, ResourceRequirements
from kubescale.objects.meta import (
    Condition,
    LabelSelectorObject,
    LabelSelectorRequirement,
    ObjectMeta,
    ResourceList,
)

__all__ = [
    "Affinity",
    "ContainerState",
    "ContainerStateRunning",
    "ContainerStateTerminated",
    "ContainerStateWaiting",
    "ContainerStatus",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorTerm",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodAntiAffinity",
    "PodResourceClaim",
    "PodSpec",
    "PodStatus",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
]


class NodeSelectorTerm(TypedDict, total=False):
    """``core/v1.NodeSelectorTerm``."""

    matchExpressions: list[LabelSelectorRequirement]
    matchFields: list[LabelSelectorRequirement]


class NodeSelector(TypedDict, total=False):
    """``core/v1.NodeSelector``."""

    nodeSelectorTerms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(TypedDict, total=False):
    """``core/v1.PreferredSchedulingTerm``."""

    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(TypedDict, total=False):
    """``core/v1.NodeAffinity``."""

    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector
    preferredDuringSchedulingIgnoredDuringExecution: list[PreferredSchedulingTerm]


class PodAffinityTerm(TypedDict, total=False):
    """``core/v1.PodAffinityTerm``."""

    labelSelector: LabelSelectorObject
    namespaces: list[str]
    namespaceSelector: LabelSelectorObject
    topologyKey: str
    matchLabelKeys: list[str]
    mismatchLabelKeys: list[str]


class WeightedPodAffinityTerm(TypedDict, total=False):
    """``core/v1.WeightedPodAffinityTerm``."""

    weight: int
    podAffinityTerm: PodAffinityTerm


class PodAffinity(TypedDict, total=False):
    """``core/v1.PodAffinity``."""

    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]


class PodAntiAffinity(TypedDict, total=False):
    """``core/v1.PodAntiAffinity``."""

    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]


class Affinity(TypedDict, total=False):
    """``core/v1.Affinity``."""

    nodeAffinity: NodeAffinity
    podAffinity: PodAffinity
    podAntiAffinity: PodAntiAffinity


class Toleration(TypedDict, total=False):
    """``core/v1.Toleration``."""

    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class TopologySpreadConstraint(TypedDict, total=False):
    """``core/v1.TopologySpreadConstraint``."""

    maxSkew: int
    topologyKey: str
    whenUnsatisfiable: str
    labelSelector: LabelSelectorObject
    minDomains: int
    nodeAffinityPolicy: str
    nodeTaintsPolicy: str
    matchLabelKeys: list[str]


class Volume(TypedDict, total=False):
    """``core/v1.Volume``: the sources the autoscaler and descheduler look at (local storage,
    claims)."""

    name: str
    emptyDir: dict[str, str]
    hostPath: dict[str, str]
    persistentVolumeClaim: dict[str, str]


class PodResourceClaim(TypedDict, total=False):
    """``core/v1.PodResourceClaim`` (``spec.resourceClaims[]``, dynamic resource allocation)."""

    name: str
    resourceClaimName: str
    resourceClaimTemplateName: str


class PodSpec(TypedDict, total=False):
    """``core/v1.PodSpec``."""

    containers: list[Container]
    initContainers: list[Container]
    nodeName: str
    nodeSelector: dict[str, str]
    affinity: Affinity
    tolerations: list[Toleration]
    topologySpreadConstraints: list[TopologySpreadConstraint]
    priority: int
    priorityClassName: str
    schedulerName: str
    restartPolicy: str
    overhead: ResourceList
    resources: ResourceRequirements
    """Pod-level resources (``PodLevelResources``): the HPA's ``calculatePodRequests`` reads
    ``requests`` here first."""
    volumes: list[Volume]
    terminationGracePeriodSeconds: int
    hostNetwork: bool
    resourceClaims: list[PodResourceClaim]
    """The descheduler's ``PodsWithResourceClaims`` protection reads it."""


class ContainerStateWaiting(TypedDict, total=False):
    """``core/v1.ContainerStateWaiting``."""

    reason: str
    message: str


class ContainerStateRunning(TypedDict, total=False):
    """``core/v1.ContainerStateRunning``."""

    startedAt: str


class ContainerStateTerminated(TypedDict, total=False):
    """``core/v1.ContainerStateTerminated`` (OOM kills are read from it)."""

    exitCode: int
    reason: str
    message: str
    startedAt: str
    finishedAt: str


class ContainerState(TypedDict, total=False):
    """``core/v1.ContainerState``."""

    waiting: ContainerStateWaiting
    running: ContainerStateRunning
    terminated: ContainerStateTerminated


class ContainerStatus(TypedDict, total=False):
    """``core/v1.ContainerStatus`` (with the in-place resize fields)."""

    name: str
    ready: bool
    started: bool
    restartCount: int
    state: ContainerState
    lastState: ContainerState
    allocatedResources: ResourceList
    resources: dict[str, ResourceList]


class PodStatus(TypedDict, total=False):
    """``core/v1.PodStatus``."""

    phase: str
    reason: str
    message: str
    conditions: list[Condition]
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]
    ephemeralContainerStatuses: list[ContainerStatus]
    qosClass: str
    startTime: str
    resize: str
    nominatedNodeName: str
    hostIP: str
    podIP: str


class Pod(TypedDict, total=False):
    """``core/v1.Pod``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class PodTemplateSpec(TypedDict, total=False):
    """``core/v1.PodTemplateSpec`` (a workload's ``spec.template``)."""

    metadata: ObjectMeta
    spec: PodSpec
