"""The intents a plan is made of: frozen, typed, each naming its object and its actor.

An intent says *what* a system wants done to one object, not how: the
:class:`~kubescale.plans.executor.PlanExecutor` turns it into the request. The object is
an :class:`ObjectRef` (resource type, namespace, name), whose request path is built by the one
URL builder (:func:`kubescale.kube.api_paths.api_path`, through ``ResourceType.object_path``),
and ``actor`` is the system that decided it (``vpa-updater``, ``descheduler`` ...: the
disruption ledger's actor name and the ``actor`` label of ``kubescale_plan_intents_total``).

:func:`describe` is the one-line text of an intent (``--dry-run`` prints it): stable — the
actor, the verb, the resource and ``namespace/name``, then the change as compact JSON with
sorted keys — so a dry run's output can be compared between runs and versions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from kubescale.kube.api_paths import ApiPath
from kubescale.kube.resources import CONFIG_MAPS, NODES, PODS, ResourceType
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import meta, status_of

__all__ = [
    "DeleteNodes",
    "DeleteObject",
    "Event",
    "Evict",
    "Intent",
    "ObjectRef",
    "PatchObject",
    "PatchOrCreate",
    "Plan",
    "Resize",
    "ResizeNodeGroup",
    "Scale",
    "Taint",
    "Untaint",
    "WriteConfigMap",
    "WriteStatus",
    "describe",
    "object_ref",
    "pod_ref",
    "reason_of",
]

EVENT_TYPES: Final = ("Normal", "Warning")


@dataclass(frozen=True)
class ObjectRef:
    """One object: its resource type, namespace (``None`` for a cluster-scoped one) and name."""

    resource: ResourceType
    namespace: str | None
    name: str

    def path(self, subresource: str = "") -> ApiPath:
        """The object's request path (validated by the one URL builder, as the client sends
        it)."""
        return self.resource.object_path(self.name, self.namespace, subresource)

    @property
    def text(self) -> str:
        """``<plural> <namespace>/<name>`` (``<plural> <name>`` when cluster-scoped)."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.resource.plural} {where}"


def pod_ref(pod: Pod) -> ObjectRef:
    view = meta(pod)
    return ObjectRef(PODS, view.namespace, view.name)


def object_ref(obj: Mapping[str, Any], resource: ResourceType) -> ObjectRef:
    view = meta(obj)
    return ObjectRef(resource, view.namespace or None, view.name)


@dataclass(frozen=True, kw_only=True)
class Evict:
    """``POST pods/<name>/eviction`` (uid precondition), recorded on the disruption ledger."""

    actor: str
    pod: Pod = field(compare=False)
    """The pod as the decision saw it (its uid, node and controller go to the ledger)."""
    grace_period_seconds: int | None = None
    annotations: Mapping[str, str] | None = None
    reason: str = ""
    """Why the decision evicts the pod, one line (the VPA updater's: below the lower bound,
    above the upper bound, a quick OOM, drift after the lifetime threshold; the descheduler's:
    its strategy); not part of :func:`describe` (the write itself)."""

    @property
    def target(self) -> ObjectRef:
        return pod_ref(self.pod)


@dataclass(frozen=True, kw_only=True)
class Resize:
    """JSON-patch ``pods/<name>/resize`` (in-place), recorded on the disruption ledger."""

    actor: str
    pod: Pod = field(compare=False)
    patches: Sequence[Mapping[str, Any]]
    reason: str = ""
    """Why the decision resizes the pod, one line (as :attr:`Evict.reason`)."""

    @property
    def target(self) -> ObjectRef:
        return pod_ref(self.pod)


@dataclass(frozen=True, kw_only=True)
class PatchObject:
    """``PATCH`` of one object (or a subresource of it) with ``patch_type``."""

    actor: str
    target: ObjectRef
    patch: Any
    patch_type: Literal["merge", "json", "strategic"] = "merge"
    subresource: str = ""


@dataclass(frozen=True, kw_only=True)
class PatchOrCreate:
    """``PATCH`` the object ``body`` names with ``patch`` (``patch_type``); when it is not there
    (404), ``POST`` ``body`` instead (upstream VPA's ``CreateOrUpdateVpaCheckpoint``)."""

    actor: str
    resource: ResourceType
    body: Mapping[str, Any] = field(compare=False)
    patch: Any
    patch_type: Literal["merge", "json", "strategic"] = "json"

    @property
    def target(self) -> ObjectRef:
        return object_ref(self.body, self.resource)


@dataclass(frozen=True, kw_only=True)
class DeleteObject:
    """``DELETE`` one object (a 404 is :attr:`~kubescale.coordination.disruption_ledger.
    WriteOutcome.GONE`: someone else removed it)."""

    actor: str
    target: ObjectRef


@dataclass(frozen=True, kw_only=True)
class Scale:
    """Set ``spec.replicas`` of ``target`` through its ``scale`` subresource (merge patch)."""

    actor: str
    target: ObjectRef
    replicas: int


@dataclass(frozen=True, kw_only=True)
class Taint:
    """Add the taint ``key=value:effect`` to node ``node`` unless one with ``key`` is there,
    and with ``cordon`` set ``spec.unschedulable`` (a GET and a conditional PUT, retried on a
    conflict: upstream cluster autoscaler's ``addTaintToSpec`` loop)."""

    actor: str
    node: str
    key: str
    value: str
    effect: str
    cordon: bool = False

    @property
    def target(self) -> ObjectRef:
        return ObjectRef(NODES, None, self.node)


@dataclass(frozen=True, kw_only=True)
class Untaint:
    """Remove the taint ``key`` from node ``node`` and with ``uncordon`` clear
    ``spec.unschedulable`` -- only when the taint is there (``CleanToBeDeleted``)."""

    actor: str
    node: str
    key: str
    uncordon: bool = False

    @property
    def target(self) -> ObjectRef:
        return ObjectRef(NODES, None, self.node)


@dataclass(frozen=True, kw_only=True)
class WriteStatus:
    """``PUT <object>/status`` with ``body`` (its ``resourceVersion``: a conflict is refused)."""

    actor: str
    body: Mapping[str, Any] = field(compare=False)
    resource: ResourceType

    @property
    def target(self) -> ObjectRef:
        return object_ref(self.body, self.resource)


@dataclass(frozen=True, kw_only=True)
class WriteConfigMap:
    """Write the ConfigMap ``namespace/name``: GET it, then update it with ``data`` and
    ``annotations`` merged over its own (keys not named are kept), or create it with just
    those (upstream cluster autoscaler's ``WriteStatusConfigMap``)."""

    actor: str
    namespace: str
    name: str
    data: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def target(self) -> ObjectRef:
        return ObjectRef(CONFIG_MAPS, self.namespace, self.name)


@dataclass(frozen=True, kw_only=True)
class ResizeNodeGroup:
    """Change the target size of the cloud provider's node group ``group`` by ``delta``:
    upstream cluster autoscaler's ``NodeGroup.IncreaseSize`` (``delta > 0``) or
    ``DecreaseTargetSize`` (``delta < 0``: unfulfilled requests only). Cluster API: the
    MachineDeployment's or MachineSet's ``/scale`` read, then patched, within [min, max]. The
    executor applies it through the system's node group port
    (:class:`~kubescale.plans.node_groups.NodeGroupWrites`)."""

    actor: str
    group: str
    """The node group's id (Cluster API: ``<Kind>/<namespace>/<name>``)."""
    delta: int

    def __post_init__(self) -> None:
        if self.delta == 0:
            raise ValueError(f"node group {self.group}: a resize by 0 is not a write")


@dataclass(frozen=True, kw_only=True)
class DeleteNodes:
    """``NodeGroup.DeleteNodes``: remove ``nodes``' instances from node group ``group``, its
    target size going down by one for each. Cluster API: each node's Machine is annotated
    ``cluster.x-k8s.io/delete-machine``, then the MachineDeployment/MachineSet scaled down by
    one (through the node group port, as :class:`ResizeNodeGroup`)."""

    actor: str
    group: str
    nodes: Sequence[Node] = field(compare=False)
    """The nodes (an unregistered instance: a stand-in with its name and ``spec.providerID``)."""

    @property
    def names(self) -> list[str]:
        return [meta(node).name for node in self.nodes]


@dataclass(frozen=True, kw_only=True)
class Event:
    """A core/v1 Event about ``involved``, queued on the actor's event recorder."""

    actor: str
    involved: Mapping[str, Any] = field(compare=False)
    type: str
    reason: str
    message: str

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"event type {self.type!r} is not one of {', '.join(EVENT_TYPES)}")

    @property
    def subject(self) -> str:
        """``<Kind> <namespace>/<name>`` of the involved object."""
        view = meta(self.involved)
        kind = str(self.involved.get("kind") or "Object")
        return f"{kind} {view.namespace}/{view.name}" if view.namespace else f"{kind} {view.name}"


Intent = (
    Evict
    | Resize
    | PatchObject
    | PatchOrCreate
    | DeleteObject
    | Scale
    | Taint
    | Untaint
    | WriteStatus
    | WriteConfigMap
    | ResizeNodeGroup
    | DeleteNodes
    | Event
)
Plan = list[Intent]
"""An ordered list of intents, applied in order."""


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def reason_of(intent: Intent) -> str:
    """Why the decision made ``intent``, when it says (an eviction's or a resize's
    :attr:`Evict.reason`); ``""`` otherwise (an event's reason is in :func:`describe`)."""
    return intent.reason if isinstance(intent, Evict | Resize) else ""


def describe(intent: Intent) -> str:
    """The intent as one stable line (module docstring)."""
    match intent:
        case Evict():
            extra = ""
            if intent.grace_period_seconds is not None:
                extra += f" grace={intent.grace_period_seconds}"
            if intent.annotations:
                extra += f" annotations={_json(dict(intent.annotations))}"
            return f"{intent.actor}: evict {intent.target.text}{extra}"
        case Resize():
            return f"{intent.actor}: resize {intent.target.text} {_json(list(intent.patches))}"
        case PatchObject():
            sub = f"/{intent.subresource}" if intent.subresource else ""
            return (
                f"{intent.actor}: patch {intent.target.text}{sub} {intent.patch_type} "
                f"{_json(intent.patch)}"
            )
        case PatchOrCreate():
            return (
                f"{intent.actor}: patch-or-create {intent.target.text} {intent.patch_type} "
                f"{_json(intent.patch)}"
            )
        case DeleteObject():
            return f"{intent.actor}: delete {intent.target.text}"
        case Scale():
            return f"{intent.actor}: scale {intent.target.text} replicas={intent.replicas}"
        case Taint():
            cordon = " cordon" if intent.cordon else ""
            return (
                f"{intent.actor}: taint {intent.target.text} "
                f"{intent.key}={intent.value}:{intent.effect}{cordon}"
            )
        case Untaint():
            uncordon = " uncordon" if intent.uncordon else ""
            return f"{intent.actor}: untaint {intent.target.text} {intent.key}{uncordon}"
        case WriteStatus():
            return (
                f"{intent.actor}: write-status {intent.target.text} {_json(status_of(intent.body))}"
            )
        case WriteConfigMap():
            extra = f" annotations={_json(dict(intent.annotations))}" if intent.annotations else ""
            return (
                f"{intent.actor}: write-configmap {intent.target.text} "
                f"{_json(dict(intent.data))}{extra}"
            )
        case ResizeNodeGroup():
            verb = "increase-size" if intent.delta > 0 else "decrease-target-size"
            return f"{intent.actor}: {verb} node-group {intent.group} delta={intent.delta:+d}"
        case DeleteNodes():
            return f"{intent.actor}: delete-nodes node-group {intent.group} {_json(intent.names)}"
        case Event():
            return (
                f"{intent.actor}: event {intent.subject} {intent.type} {intent.reason} "
                f"{_json(intent.message)}"
            )
