"""Arguments of the eight strategies besides the two node-utilization ones.

Fields, defaults and validation as upstream's ``plugins/<plugin>/types.go``, ``defaults.go`` and
``validation.go`` (reference §1a):

* RemoveDuplicates: ``namespaces``, ``excludeOwnerKinds``;
* RemovePodsViolatingInterPodAntiAffinity: ``namespaces``, ``labelSelector``;
* RemovePodsViolatingNodeAffinity: ``nodeAffinityType`` (required;
  ``requiredDuringSchedulingIgnoredDuringExecution`` or
  ``preferredDuringSchedulingIgnoredDuringExecution`` — upstream logs and skips another value,
  here it is an error), ``namespaces``, ``labelSelector``;
* RemovePodsViolatingNodeTaints: ``includePreferNoSchedule``, ``excludedTaints`` or
  ``includedTaints`` (not both), ``namespaces``, ``labelSelector``;
* RemovePodsHavingTooManyRestarts: ``podRestartThreshold`` (>= 1), ``includingInitContainers``,
  ``states`` (``Running``, ``CrashLoopBackOff``), ``namespaces``, ``labelSelector``;
* PodLifeTime: at least one of ``maxPodLifeTimeSeconds``, ``states``, ``conditions``,
  ``exitCodes``; ``states`` from the allowed phases and reasons; ``ownerKinds`` include or
  exclude; ``includingInitContainers``, ``includingEphemeralContainers``;
* RemoveFailedPods: ``minPodLifetimeSeconds`` (default 3600), ``excludeOwnerKinds``,
  ``reasons``, ``exitCodes``, ``includingInitContainers``;
* RemovePodsViolatingTopologySpreadConstraint: ``constraints`` (default ``[DoNotSchedule]``;
  the deprecated ``includeSoftConstraints`` adds ``ScheduleAnyway``),
  ``topologyBalanceNodeFit`` (default true), ``namespaces``, ``labelSelector``.

Every plugin with ``namespaces`` refuses include and exclude together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kubescale.objects.selectors import LabelSelector

from .common_args import ALL_NAMESPACES, Namespaces, read_namespaces
from .fields import Fields, fail

__all__ = [
    "NODE_AFFINITY_PREFERRED",
    "NODE_AFFINITY_REQUIRED",
    "PodConditionFilter",
    "PodLifeTimeArgs",
    "RemoveDuplicatesArgs",
    "RemoveFailedPodsArgs",
    "RemovePodsHavingTooManyRestartsArgs",
    "RemovePodsViolatingInterPodAntiAffinityArgs",
    "RemovePodsViolatingNodeAffinityArgs",
    "RemovePodsViolatingNodeTaintsArgs",
    "RemovePodsViolatingTopologySpreadConstraintArgs",
    "read_failed_pods_args",
    "read_inter_pod_anti_affinity_args",
    "read_node_affinity_args",
    "read_node_taints_args",
    "read_pod_lifetime_args",
    "read_remove_duplicates_args",
    "read_too_many_restarts_args",
    "read_topology_spread_args",
]

NODE_AFFINITY_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
NODE_AFFINITY_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
TOO_MANY_RESTARTS_STATES: Final = ("Running", "CrashLoopBackOff")
POD_LIFETIME_STATES: Final = frozenset(
    {
        # phases
        "Running",
        "Pending",
        "Succeeded",
        "Failed",
        "Unknown",
        # pod status reasons
        "NodeAffinity",
        "NodeLost",
        "Shutdown",
        "UnexpectedAdmissionError",
        # container waiting reasons
        "PodInitializing",
        "ContainerCreating",
        "ImagePullBackOff",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "ErrImagePull",
        "CreateContainerError",
        "InvalidImageName",
        # container terminated reasons
        "OOMKilled",
        "Error",
        "Completed",
        "DeadlineExceeded",
        "Evicted",
        "ContainerCannotRun",
        "StartError",
    }
)
DEFAULT_MIN_FAILED_POD_LIFETIME: Final = 3600
_SCOPED: Final = ("namespaces", "labelSelector")


@dataclass(frozen=True, kw_only=True)
class RemoveDuplicatesArgs:
    namespaces: Namespaces = ALL_NAMESPACES
    exclude_owner_kinds: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RemovePodsViolatingInterPodAntiAffinityArgs:
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, kw_only=True)
class RemovePodsViolatingNodeAffinityArgs:
    node_affinity_type: tuple[str, ...]
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, kw_only=True)
class RemovePodsViolatingNodeTaintsArgs:
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None
    include_prefer_no_schedule: bool = False
    excluded_taints: tuple[str, ...] = ()
    included_taints: tuple[str, ...] | None = None
    """``None``: every taint is included (upstream's nil list)."""


@dataclass(frozen=True, kw_only=True)
class RemovePodsHavingTooManyRestartsArgs:
    pod_restart_threshold: int
    including_init_containers: bool = False
    states: tuple[str, ...] = ()
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, kw_only=True)
class PodConditionFilter:
    type: str = ""
    status: str = ""
    reason: str = ""
    min_time_since_last_transition_seconds: int | None = None


@dataclass(frozen=True, kw_only=True)
class PodLifeTimeArgs:
    max_pod_life_time_seconds: int | None = None
    states: tuple[str, ...] = ()
    conditions: tuple[PodConditionFilter, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False
    owner_kinds: Namespaces = ALL_NAMESPACES
    """``ownerKinds`` has the shape of ``namespaces`` (include or exclude)."""
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, kw_only=True)
class RemoveFailedPodsArgs:
    min_pod_lifetime_seconds: int = DEFAULT_MIN_FAILED_POD_LIFETIME
    exclude_owner_kinds: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = False
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


@dataclass(frozen=True, kw_only=True)
class RemovePodsViolatingTopologySpreadConstraintArgs:
    constraints: tuple[str, ...] = (DO_NOT_SCHEDULE,)
    topology_balance_node_fit: bool = True
    namespaces: Namespaces = ALL_NAMESPACES
    label_selector: LabelSelector | None = None


def read_remove_duplicates_args(raw: object, path: str) -> RemoveDuplicatesArgs:
    fields = Fields(raw, path, ("namespaces", "excludeOwnerKinds"))
    return RemoveDuplicatesArgs(
        namespaces=read_namespaces(fields),
        exclude_owner_kinds=fields.strings("excludeOwnerKinds") or (),
    )


def read_inter_pod_anti_affinity_args(
    raw: object, path: str
) -> RemovePodsViolatingInterPodAntiAffinityArgs:
    fields = Fields(raw, path, _SCOPED)
    return RemovePodsViolatingInterPodAntiAffinityArgs(
        namespaces=read_namespaces(fields), label_selector=fields.label_selector("labelSelector")
    )


def read_node_affinity_args(raw: object, path: str) -> RemovePodsViolatingNodeAffinityArgs:
    fields = Fields(raw, path, (*_SCOPED, "nodeAffinityType"))
    types = fields.strings("nodeAffinityType") or ()
    if not types:
        fail(fields.at("nodeAffinityType"), "needs to be set")
    for index, value in enumerate(types):
        if value not in (NODE_AFFINITY_REQUIRED, NODE_AFFINITY_PREFERRED):
            fail(
                f"{fields.at('nodeAffinityType')}[{index}]",
                f"{value!r} is not {NODE_AFFINITY_REQUIRED} or {NODE_AFFINITY_PREFERRED}",
            )
    return RemovePodsViolatingNodeAffinityArgs(
        node_affinity_type=types,
        namespaces=read_namespaces(fields),
        label_selector=fields.label_selector("labelSelector"),
    )


def read_node_taints_args(raw: object, path: str) -> RemovePodsViolatingNodeTaintsArgs:
    fields = Fields(
        raw, path, (*_SCOPED, "includePreferNoSchedule", "excludedTaints", "includedTaints")
    )
    excluded = fields.strings("excludedTaints")
    included = fields.strings("includedTaints")
    if excluded and included:
        fail(fields.at("includedTaints"), "cannot be set together with excludedTaints")
    return RemovePodsViolatingNodeTaintsArgs(
        namespaces=read_namespaces(fields),
        label_selector=fields.label_selector("labelSelector"),
        include_prefer_no_schedule=fields.flag("includePreferNoSchedule"),
        excluded_taints=excluded or (),
        included_taints=included,
    )


def read_too_many_restarts_args(raw: object, path: str) -> RemovePodsHavingTooManyRestartsArgs:
    fields = Fields(
        raw, path, (*_SCOPED, "podRestartThreshold", "includingInitContainers", "states")
    )
    threshold = fields.optional_integer("podRestartThreshold")
    if threshold is None or threshold < 1:
        fail(fields.at("podRestartThreshold"), "must be greater than 0")
    states = fields.strings("states") or ()
    for index, state in enumerate(states):
        if state not in TOO_MANY_RESTARTS_STATES:
            fail(
                f"{fields.at('states')}[{index}]",
                f"{state!r} is not one of {', '.join(TOO_MANY_RESTARTS_STATES)}",
            )
    return RemovePodsHavingTooManyRestartsArgs(
        pod_restart_threshold=threshold,
        including_init_containers=fields.flag("includingInitContainers"),
        states=states,
        namespaces=read_namespaces(fields),
        label_selector=fields.label_selector("labelSelector"),
    )


def _conditions(fields: Fields) -> tuple[PodConditionFilter, ...]:
    found: list[PodConditionFilter] = []
    for index, entry in enumerate(fields.items("conditions") or ()):
        item = Fields(
            entry,
            f"{fields.at('conditions')}[{index}]",
            ("type", "status", "reason", "minTimeSinceLastTransitionSeconds"),
        )
        found.append(
            PodConditionFilter(
                type=item.text("type"),
                status=item.text("status"),
                reason=item.text("reason"),
                min_time_since_last_transition_seconds=item.optional_integer(
                    "minTimeSinceLastTransitionSeconds", minimum=0
                ),
            )
        )
    return tuple(found)


def read_pod_lifetime_args(raw: object, path: str) -> PodLifeTimeArgs:
    fields = Fields(
        raw,
        path,
        (
            *_SCOPED,
            "maxPodLifeTimeSeconds",
            "states",
            "conditions",
            "exitCodes",
            "includingInitContainers",
            "includingEphemeralContainers",
            "ownerKinds",
        ),
    )
    max_age = fields.optional_integer("maxPodLifeTimeSeconds", minimum=0)
    states = fields.strings("states") or ()
    for index, state in enumerate(states):
        if state not in POD_LIFETIME_STATES:
            fail(
                f"{fields.at('states')}[{index}]",
                f"{state!r} is not an allowed state (allowed: "
                f"{', '.join(sorted(POD_LIFETIME_STATES))})",
            )
    conditions = _conditions(fields)
    exit_codes = fields.ints("exitCodes") or ()
    if max_age is None and not states and not conditions and not exit_codes:
        fail(
            path,
            "at least one of maxPodLifeTimeSeconds, states, conditions or exitCodes must be set",
        )
    return PodLifeTimeArgs(
        max_pod_life_time_seconds=max_age,
        states=states,
        conditions=conditions,
        exit_codes=exit_codes,
        including_init_containers=fields.flag("includingInitContainers"),
        including_ephemeral_containers=fields.flag("includingEphemeralContainers"),
        owner_kinds=read_namespaces(fields, "ownerKinds"),
        namespaces=read_namespaces(fields),
        label_selector=fields.label_selector("labelSelector"),
    )


def read_failed_pods_args(raw: object, path: str) -> RemoveFailedPodsArgs:
    fields = Fields(
        raw,
        path,
        (
            *_SCOPED,
            "minPodLifetimeSeconds",
            "excludeOwnerKinds",
            "reasons",
            "exitCodes",
            "includingInitContainers",
        ),
    )
    return RemoveFailedPodsArgs(
        min_pod_lifetime_seconds=fields.integer(
            "minPodLifetimeSeconds", DEFAULT_MIN_FAILED_POD_LIFETIME, minimum=0
        ),
        exclude_owner_kinds=fields.strings("excludeOwnerKinds") or (),
        reasons=fields.strings("reasons") or (),
        exit_codes=fields.ints("exitCodes") or (),
        including_init_containers=fields.flag("includingInitContainers"),
        namespaces=read_namespaces(fields),
        label_selector=fields.label_selector("labelSelector"),
    )


def read_topology_spread_args(
    raw: object, path: str
) -> RemovePodsViolatingTopologySpreadConstraintArgs:
    fields = Fields(
        raw, path, (*_SCOPED, "constraints", "topologyBalanceNodeFit", "includeSoftConstraints")
    )
    constraints = list(fields.strings("constraints") or ())
    for index, value in enumerate(constraints):
        if value not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            fail(
                f"{fields.at('constraints')}[{index}]",
                f"{value!r} is not {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}",
            )
    if not constraints:
        constraints = [DO_NOT_SCHEDULE]
    if fields.flag("includeSoftConstraints") and SCHEDULE_ANYWAY not in constraints:
        constraints.append(SCHEDULE_ANYWAY)
    return RemovePodsViolatingTopologySpreadConstraintArgs(
        constraints=tuple(constraints),
        topology_balance_node_fit=fields.flag("topologyBalanceNodeFit", True),
        namespaces=read_namespaces(fields),
        label_selector=fields.label_selector("labelSelector"),
    )
