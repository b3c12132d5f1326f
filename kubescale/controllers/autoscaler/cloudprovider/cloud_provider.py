"""The cloud provider interface: what the autoscaler needs of a cloud, kept small.

Upstream's ``CloudProvider``/``NodeGroup`` (reference §4) reduced to one read and three writes,
so that another cloud is one module:

* :meth:`CloudProvider.refresh` — upstream's ``Refresh`` followed by everything the loop reads
  (``NodeGroups``, ``MinSize``/``MaxSize``/``TargetSize``, ``Nodes``, ``TemplateNodeInfo``,
  ``GetOptions``, ``NodeGroupForNode``, ``Pricing``) as one immutable :class:`ProviderSnapshot`.
  The decisions work on the snapshot only. It also reports node groups the provider had to skip
  (malformed configuration) so the loop can say so, and goes on with the others;
* :meth:`CloudProvider.increase_size` (``IncreaseSize``),
  :meth:`~CloudProvider.decrease_target_size` (``DecreaseTargetSize``: only unfulfilled
  requests, never existing nodes) and
  :meth:`~CloudProvider.delete_nodes` (``DeleteNodes``: the named nodes, target decremented).
  A failure raises :class:`ProviderError` with a one-line message; a write that was sent but
  not answered raises :class:`WriteOutcomeUnknown` (it may have happened: callers count it as
  done until the provider's objects show otherwise), and one that could not be sent in time
  :class:`NothingWritten`.

Instance ids are the nodes' ``spec.providerID``; an instance with no node yet is
"unregistered" (upstream's ``Instance{Id, Status{State, ErrorInfo}}``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kubescale.controllers.autoscaler.config.autoscaler_settings import NodeGroupDefaults
from kubescale.coordination.disruption_ledger import WriteOutcome
from kubescale.objects.machine_set import ScalableResource
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of
from kubescale.plans.node_groups import NodeGroupWriteError

__all__ = [
    "CloudProvider",
    "ErrorClass",
    "Instance",
    "InstanceErrorInfo",
    "InstanceState",
    "NodeGroup",
    "NothingWritten",
    "ProviderError",
    "ProviderProblem",
    "ProviderSnapshot",
    "WriteOutcomeUnknown",
]


class InstanceState(enum.Enum):
    RUNNING = "Running"
    CREATING = "Creating"
    DELETING = "Deleting"


class ErrorClass(enum.IntEnum):
    """``cloudprovider.InstanceErrorClass``."""

    OUT_OF_RESOURCES = 1
    OTHER = 99


@dataclass(frozen=True)
class InstanceErrorInfo:
    error_class: ErrorClass
    code: str
    message: str


@dataclass(frozen=True)
class Instance:
    id: str
    state: InstanceState | None = None
    error: InstanceErrorInfo | None = None


@dataclass(frozen=True, kw_only=True)
class NodeGroup:
    """One node group as the provider reports it at refresh time."""

    id: str
    min_size: int
    max_size: int
    target_size: int
    instances: tuple[Instance, ...] = ()
    template: Node | None = None
    """A Node as a new machine of this group would register it (scale-from-zero), or
    ``None`` when the provider cannot tell."""
    template_pods: tuple[Pod, ...] = ()
    """Pods every new node starts with (kube-proxy, ...)."""
    options: NodeGroupDefaults = field(default_factory=NodeGroupDefaults)
    """``GetOptions(defaults)``: the flag defaults with this group's overrides."""
    price_per_hour: float | None = None
    source: ScalableResource | None = None
    """The object events about this group are recorded on (a MachineDeployment, ...)."""
    rolling_out: bool = False
    """A rollout is under way (Cluster API: an older MachineSet of the MachineDeployment still
    has replicas): none of the group's nodes is a scale-down candidate."""

    @property
    def debug(self) -> str:
        """``NodeGroup.Debug``: ``<id> (min: <m>, max: <M>, replicas: <n>)``."""
        return (
            f"{self.id} (min: {self.min_size}, max: {self.max_size}, replicas: {self.target_size})"
        )


@dataclass(frozen=True)
class ProviderProblem:
    """A node group the provider skipped, and why (shown as a Warning event)."""

    message: str
    source: ScalableResource | None = None


@dataclass(frozen=True, kw_only=True)
class ProviderSnapshot:
    """Everything a loop reads from the provider, at one moment."""

    groups: Mapping[str, NodeGroup]
    """By id, in id order."""
    group_by_instance: Mapping[str, str]
    """Instance id (a node's providerID) → node group id."""
    problems: tuple[ProviderProblem, ...] = ()

    def group_for_node(self, node: Node) -> NodeGroup | None:
        """``NodeGroupForNode``: ``None`` for nodes no autoscaled group owns."""
        provider_id = str(spec_of(node).get("providerID") or "")
        group_id = self.group_by_instance.get(provider_id)
        return self.groups.get(group_id) if group_id is not None else None

    def has_instance(self, node: Node) -> bool:
        """``HasInstance``: the node's instance is known and not being deleted."""
        group = self.group_for_node(node)
        if group is None:
            return True  # not autoscaled: the provider cannot tell, assume it exists
        provider_id = str(spec_of(node).get("providerID") or "")
        for instance in group.instances:
            if instance.id == provider_id:
                return instance.state is not InstanceState.DELETING
        return False


class ProviderError(NodeGroupWriteError):
    """A provider call that failed; the message is one line for events and logs. As a node
    group write's error (:mod:`kubescale.plans.node_groups`) it is a refusal."""


class WriteOutcomeUnknown(ProviderError):
    """A write was sent and no answer came in time: it may or may not have happened. It counts
    as done until the provider's objects prove otherwise; it is not sent again blindly."""

    outcome = WriteOutcome.UNKNOWN


class NothingWritten(ProviderError):
    """No write was sent: the iteration's deadline for provider calls passed first (a read
    before it did not answer, or the time was used up). Not the node group's fault."""


class CloudProvider(Protocol):
    name: str

    async def prepare(self) -> bool:
        """Before a loop's first refresh (and every loop until it holds): what the provider
        must learn from the cluster first (Cluster API: the served version, its caches
        synced). ``False``: not ready yet, the iteration does nothing; a configuration the
        cluster cannot serve raises :class:`ProviderError`."""
        ...

    def refresh(self) -> ProviderSnapshot:
        """Everything the loop reads (module docstring), from the provider's caches."""
        ...

    async def increase_size(self, group: NodeGroup, delta: int) -> None: ...

    async def decrease_target_size(self, group: NodeGroup, delta: int) -> None: ...

    async def delete_nodes(self, group: NodeGroup, nodes: Sequence[Node]) -> None: ...
