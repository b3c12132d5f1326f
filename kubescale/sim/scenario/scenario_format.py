"""The scenario: what a simulated run is made of, as typed, validated, immutable values.

A scenario file is YAML (the format, field by field, is documented in
``sim/scenario/examples/README.md``): a name and seed, how long to simulate and at what step,
the cluster (static nodes, Cluster API node groups, namespaces), the workloads with their
containers' requests/limits and usage models, raw Kubernetes objects applied at start, which
kubescale components run, timed events, and scheduler extenders.

:func:`.scenario_validation.load_scenario` reads a file and
:func:`.scenario_validation.parse_scenario` a parsed document; both validate everything at once
and raise :class:`ScenarioError` carrying every problem as ``"<field path>: <message>"``.
Amounts are kept as canonical Kubernetes quantity strings where they become object fields
(requests, allocatable) and as floats (cores, bytes, seconds) where they feed usage models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from kubescale.base.coordination import DEFAULT_COORDINATION, Coordination

__all__ = [
    "DEFAULT_START",
    "WORKLOAD_KINDS",
    "Amount",
    "ApplyEvent",
    "ContainerSpec",
    "DeleteEvent",
    "FaultEvent",
    "NodeGroupSpec",
    "ResourceList",
    "Scenario",
    "ScenarioError",
    "ScenarioEvent",
    "SetLoadEvent",
    "StaticNodeSpec",
    "UsageSpec",
    "WorkloadSpec",
]

DEFAULT_START: Final = datetime(2026, 1, 1, tzinfo=UTC)
WORKLOAD_KINDS: Final = ("Deployment", "StatefulSet", "DaemonSet", "Job")


class ScenarioError(ValueError):
    """A scenario that cannot run; ``problems`` lists every reason, one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True, kw_only=True)
class ResourceList:
    """A Kubernetes ResourceList subset, as canonical quantity strings (absent: ``None``)."""

    cpu: str | None = None
    memory: str | None = None
    pods: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The ResourceList as an API object holds it (absent resources left out)."""
        pairs = (("cpu", self.cpu), ("memory", self.memory), ("pods", self.pods))
        return {name: value for name, value in pairs if value is not None}


@dataclass(frozen=True, kw_only=True)
class Amount:
    """A CPU and memory amount for a usage model: cores and bytes."""

    cpu_cores: float = 0.0
    memory_bytes: float = 0.0


@dataclass(frozen=True, kw_only=True)
class UsageSpec:
    """A usage model as written: its type, whether replicas share one total, its parameters.

    ``params`` holds parsed values: :class:`Amount` for resource amounts, floats for seconds,
    probabilities and factors, strings, booleans, and for ``step`` a tuple of ``(t, Amount)``.
    """

    type: str
    shared: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    name: str
    image: str
    requests: ResourceList
    limits: ResourceList
    usage: UsageSpec


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """One Deployment, StatefulSet, DaemonSet or Job of the scenario."""

    kind: str
    name: str
    namespace: str
    replicas: int
    """Deployment/StatefulSet replicas; a Job's parallelism; ignored for a DaemonSet."""
    containers: tuple[ContainerSpec, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    pod_spec: Mapping[str, Any] = field(default_factory=dict)
    """Extra PodSpec fields (nodeSelector, tolerations, affinity, priorityClassName, ...)."""
    completions: int | None = None
    backoff_limit: int | None = None
    run_duration: float | None = None
    """A Job pod's running time until it succeeds (``duration`` in the file), in seconds."""


@dataclass(frozen=True, kw_only=True)
class StaticNodeSpec:
    """``count`` nodes that exist for the whole run, named ``<name>-0`` … ``<name>-<count-1>``."""

    name: str
    allocatable: ResourceList
    count: int = 1
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    price_per_hour: float = 0.0
    instance_type: str | None = None
    zones: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NodeGroupSpec:
    """A Cluster API MachineDeployment whose Machines become Nodes."""

    name: str
    min_size: int
    max_size: int
    replicas: int
    allocatable: ResourceList
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    price_per_hour: float = 0.0
    provisioning_delay: float = 0.0
    deprovisioning_delay: float = 0.0
    instance_type: str | None = None
    """``node.kubernetes.io/instance-type`` of its nodes (default: the group's name)."""
    zones: tuple[str, ...] = ()
    """``topology.kubernetes.io/zone`` values its nodes are spread over (default: one zone)."""


@dataclass(frozen=True, kw_only=True)
class ApplyEvent:
    """Create the object, or replace it when it exists (``kubectl apply`` as a whole object)."""

    at: float
    object: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class DeleteEvent:
    at: float
    api_version: str
    kind: str
    name: str
    namespace: str | None


@dataclass(frozen=True, kw_only=True)
class SetLoadEvent:
    """Replace the usage model of one container of a workload from this time on."""

    at: float
    workload: str
    container: str
    usage: UsageSpec


@dataclass(frozen=True, kw_only=True)
class SetMetricEvent:
    """Set a custom or external metric the in-process metrics APIs serve from this time on.

    ``External``: the series of ``name`` in ``namespace`` with ``labels`` has ``value``.
    ``Pods``: the Running pods of ``namespace`` whose labels match ``selector`` share ``value``
    equally (each reports ``value / n`` for ``name``), however many there are at each read.
    """

    at: float
    type: str
    namespace: str
    name: str
    value: str
    selector: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class FaultEvent:
    """A fault of the API server (:class:`kubescale.sim.apiserver.faults.FaultInjector`).

    ``apiError``: the next ``count`` requests matching ``verb``/``resource`` fail with
    ``status`` (``count`` ``None``: until a ``clear``); ``dropWatches``; ``expireHistory``;
    ``clear``.
    """

    at: float
    fault: str
    verb: str | None = None
    resource: str | None = None
    status: int = 500
    count: int | None = 1
    retry_after: float | None = None
    delay: float = 0.0


ScenarioEvent = ApplyEvent | DeleteEvent | SetLoadEvent | SetMetricEvent | FaultEvent


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    seed: int
    duration: float
    step: float
    start: datetime = DEFAULT_START
    nodes: tuple[StaticNodeSpec, ...] = ()
    node_groups: tuple[NodeGroupSpec, ...] = ()
    namespaces: tuple[str, ...] = ()
    workloads: tuple[WorkloadSpec, ...] = ()
    objects: tuple[Mapping[str, Any], ...] = ()
    kubescale: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    events: tuple[ScenarioEvent, ...] = ()
    extenders: tuple[Mapping[str, Any], ...] = ()
    compare: bool = False
    """Run it three times on the same seed — no autoscaling, the upstream suite as separate
    programs, kubescale's one brain — and lead the report with the comparison
    (:mod:`.comparison`)."""
    base_dir: Path = Path()
    """Where relative paths in the scenario (replay files) are resolved."""
    coordination: Coordination = DEFAULT_COORDINATION
    """How kubescale's systems coordinate in this run (``coordination: one-brain|separate``,
    as ``serve --coordination``)."""

    @property
    def steps(self) -> int:
        """How many steps a run takes: one at each ``t = k·step`` with ``t < duration``."""
        whole, rest = divmod(self.duration, self.step)
        return int(whole) + (1 if rest > 1e-9 else 0)

    def with_overrides(
        self,
        *,
        seed: int | None = None,
        duration: float | None = None,
        step: float | None = None,
        coordination: Coordination | None = None,
    ) -> Scenario:
        """The scenario with command-line overrides applied (``None`` keeps the file's)."""
        changed = replace(
            self,
            coordination=self.coordination if coordination is None else coordination,
            seed=self.seed if seed is None else seed,
            duration=self.duration if duration is None else duration,
            step=self.step if step is None else step,
        )
        if changed.step > changed.duration:
            raise ScenarioError(
                [f"step: {changed.step:g}s is longer than the duration ({changed.duration:g}s)"]
            )
        return changed
