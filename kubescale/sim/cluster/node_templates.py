"""The simulated cloud's instance types and node groups, as Nodes and as CA capacity hints.

A :class:`NodeTemplate` is an instance type: capacity, allocatable, labels, taints, the zones
its nodes are spread over and a price per hour. :func:`build_node` makes the Node object a
kubelet registers for it — labels from the template plus the well-known ones
(``kubernetes.io/hostname``, ``node.kubernetes.io/instance-type``,
``topology.kubernetes.io/zone``, ``kubernetes.io/os``, ``kubernetes.io/arch``), the template's
taints, ``spec.providerID``, ``status.capacity``/``allocatable``, addresses and a Ready
condition. :func:`capacity_annotations` renders the template as the cluster-autoscaler
scale-from-zero annotations of a Cluster API node group
(``capacity.cluster-autoscaler.kubernetes.io/{cpu,memory,maxPods,labels,taints}``).

The groups of a scenario: :class:`StaticNodeGroup` (fixed nodes) and
:class:`MachineDeploymentGroup` (a Cluster API group the cluster autoscaler resizes, see
:mod:`.machine_controllers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kubescale.objects.quantities import Quantity

__all__ = [
    "CAPACITY_ANNOTATION_PREFIX",
    "KUBELET_VERSION",
    "MachineDeploymentGroup",
    "NodeTemplate",
    "StaticNodeGroup",
    "build_node",
    "capacity_annotations",
]

CAPACITY_ANNOTATION_PREFIX: Final = "capacity.cluster-autoscaler.kubernetes.io/"
KUBELET_VERSION: Final = "v1.33.0"


@dataclass(frozen=True, kw_only=True)
class NodeTemplate:
    """An instance type of the simulated cloud."""

    instance_type: str
    cpu: str
    """Capacity, a quantity (``"4"``, ``"3500m"``)."""
    memory: str
    """Capacity, a quantity (``"16Gi"``)."""
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    """Node taints: ``{"key": ..., "value": ..., "effect": "NoSchedule"}``."""
    zones: tuple[str, ...] = ("zone-a",)
    price_per_hour: float = 0.0
    allocatable_cpu: str | None = None
    """What the scheduler may use (default: the capacity)."""
    allocatable_memory: str | None = None

    def __post_init__(self) -> None:
        for value in (self.cpu, self.memory, self.allocatable_cpu, self.allocatable_memory):
            if value is not None:
                Quantity.parse(value)  # raises QuantityError for a malformed quantity
        if not self.zones:
            raise ValueError("a node template needs at least one zone")
        if self.pods <= 0:
            raise ValueError("pods must be positive")

    def zone(self, index: int) -> str:
        """The zone of the ``index``-th node of a group (round robin)."""
        return self.zones[index % len(self.zones)]


def _canonical(text: str) -> str:
    return str(Quantity.parse(text))


def build_node(
    *,
    name: str,
    template: NodeTemplate,
    zone: str,
    provider_id: str,
    address: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    ready_since: str,
) -> dict[str, Any]:
    """The Node a kubelet registers for a machine of ``template`` (Ready since ``ready_since``)."""
    capacity = {
        "cpu": _canonical(template.cpu),
        "memory": _canonical(template.memory),
        "pods": str(template.pods),
    }
    allocatable = {
        "cpu": _canonical(template.allocatable_cpu or template.cpu),
        "memory": _canonical(template.allocatable_memory or template.memory),
        "pods": str(template.pods),
    }
    node_labels = {
        **template.labels,
        **(labels or {}),
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": template.instance_type,
        "topology.kubernetes.io/zone": zone,
    }
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": ready_since,
            "lastTransitionTime": ready_since,
        }
        for kind, reason, message in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": ready_since,
            "lastTransitionTime": ready_since,
        }
    )
    spec: dict[str, Any] = {"providerID": provider_id}
    if template.taints:
        spec["taints"] = [dict(t) for t in template.taints]
    metadata: dict[str, Any] = {"name": name, "labels": node_labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "containerRuntimeVersion": "sim://1.0",
                "osImage": "kubescale simulated node",
                "kernelVersion": "6.1.0",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        },
    }


def capacity_annotations(template: NodeTemplate) -> dict[str, str]:
    """cluster-autoscaler's scale-from-zero hints for a node group of ``template``.

    ``labels`` is ``k=v,k2=v2`` and ``taints`` ``k=v:Effect,...`` (the clusterapi provider's
    parsing); the labels include the well-known instance-type label so a template node built
    from the annotations alone looks like the real ones.
    """
    labels = {**template.labels, "node.kubernetes.io/instance-type": template.instance_type}
    if len(template.zones) == 1:
        labels["topology.kubernetes.io/zone"] = template.zones[0]
    annotations = {
        CAPACITY_ANNOTATION_PREFIX + "cpu": _canonical(template.allocatable_cpu or template.cpu),
        CAPACITY_ANNOTATION_PREFIX + "memory": _canonical(
            template.allocatable_memory or template.memory
        ),
        CAPACITY_ANNOTATION_PREFIX + "maxPods": str(template.pods),
        CAPACITY_ANNOTATION_PREFIX + "labels": ",".join(
            f"{k}={v}" for k, v in sorted(labels.items())
        ),
    }
    if template.taints:
        annotations[CAPACITY_ANNOTATION_PREFIX + "taints"] = ",".join(
            f"{t.get('key', '')}={t.get('value', '')}:{t.get('effect', '')}"
            for t in template.taints
        )
    return annotations


@dataclass(frozen=True, kw_only=True)
class StaticNodeGroup:
    """Nodes that exist for the whole run (no autoscaling): ``<name>-0`` .. ``<name>-<count-1>``."""

    name: str
    count: int
    template: NodeTemplate

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"node group {self.name}: count must be >= 0")


@dataclass(frozen=True, kw_only=True)
class MachineDeploymentGroup:
    """A Cluster API node group the cluster autoscaler may resize."""

    name: str
    template: NodeTemplate
    min_size: int
    max_size: int
    replicas: int
    """Initial ``spec.replicas``; these first machines are up from the start."""
    namespace: str = "default"
    cluster_name: str = "sim"
    provisioning_delay: float = 120.0
    deprovisioning_delay: float = 30.0
    stock: int | None = None
    """How many machines the simulated cloud can run for this group at once (``None``: no
    limit). A machine beyond it is not provisioned: it waits (``out_of_stock="wait"``), so a
    cluster autoscaler sees its scale-up time out, or fails at once (``"fail"``:
    ``status.failureReason`` / ``failureMessage`` as an infrastructure provider sets them)."""
    out_of_stock: str = "wait"

    def __post_init__(self) -> None:
        if not 0 <= self.min_size <= self.max_size:
            raise ValueError(f"node group {self.name}: need 0 <= min_size <= max_size")
        if self.replicas < 0:
            raise ValueError(f"node group {self.name}: replicas must be >= 0")
        if self.stock is not None and self.stock < 0:
            raise ValueError(f"node group {self.name}: stock must be >= 0")
        if self.out_of_stock not in ("wait", "fail"):
            raise ValueError(f"node group {self.name}: out_of_stock is wait or fail")
