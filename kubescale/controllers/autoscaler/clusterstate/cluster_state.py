"""The cluster state registry: node group sizes, readiness, upcoming nodes, health, backoff.

A port of ``ClusterStateRegistry`` (``pkg/clusterstate/clusterstate.go``, reference §1 step 10
and §2.6). :meth:`ClusterStateRegistry.update` takes the nodes, the provider's snapshot and the
time, and — in upstream's order — records the unregistered instances (first-seen time kept),
the nodes whose instance is being deleted, per-group readiness, the acceptable ranges, the
scale-up requests (a request is done when no node is upcoming; it times out at
``time + max-node-provision-time``: the group backs off and the unfulfilled increase is
returned, as ``DecreaseTargetSize(-increase)``), new instance-creation errors of a group
scaling up (backoff, request reduced), the acceptable ranges again, and the groups whose size
is incorrect. The I/O the update asks for comes back as :class:`StateEffect` values; the loop
carries them out.

Definitions (upstream's):

* readiness of a registered node: ``Deleted`` (instance being deleted), ``Suspended``
  (condition ``Suspended=True``), ``Ready``, ``NotStarted`` (unready and created less than
  ``max-node-startup-time`` ago), else ``Unready``; an unregistered instance is
  ``LongUnregistered`` once ``max-node-provision-time`` has passed since it was first seen;
* acceptable range: ``[target − longUnregistered − Σ pending increases, target + pending
  deletions]``, current target = the provider's target size;
* upcoming nodes: ``target − (ready + unready + suspended + longUnregistered)``, for every
  group (``GetUpcomingNodes`` loops over ``NodeGroups()``): they come from the provider's
  target size against the registered nodes, so any process sees them — a new leader, or a
  restarted process, that never made the scale-up in flight does not make it again. (The
  scale-up requests only this process remembers decide whether a group "is scaling up", for
  timeouts and instance-creation errors, not how many nodes are coming.)
* cluster healthy unless unready > ``--ok-total-unready-count`` **and** unready >
  ``--max-total-unready-percentage`` % of all nodes; a group is unhealthy when its
  "unjustified unready" (``minNodes − ready − suspended``) is above both limits too;
* incorrect size: registered > target or registered < target − unregistered, with the time
  the same mismatch was first observed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from kubescale.base.go_time import go_duration_string
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    NodeGroup,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import BackoffEntry, ExponentialBackoff
from kubescale.controllers.autoscaler.model.node_facts import NodeReadiness, node_name, provider_id
from kubescale.controllers.autoscaler.model.pod_facts import creation_time
from kubescale.objects.node import Node
from kubescale.objects.views import status_of

__all__ = [
    "AcceptableRange",
    "ClusterStateRegistry",
    "HealthConfig",
    "IncorrectSize",
    "InstanceCreationFailed",
    "Readiness",
    "ScaleUpRequest",
    "ScaleUpSafety",
    "ScaleUpTimedOut",
    "StateEffect",
    "UnregisteredNode",
]


@dataclass(frozen=True, kw_only=True)
class HealthConfig:
    ok_total_unready_count: int = 3
    max_total_unready_percentage: float = 45.0


@dataclass(frozen=True)
class ScaleUpRequest:
    group_id: str
    increase: int
    time: datetime
    expected_add_time: datetime


@dataclass(frozen=True)
class ScaleDownRequest:
    group_id: str
    node: str
    time: datetime
    expected_delete_time: datetime


@dataclass(frozen=True)
class UnregisteredNode:
    instance_id: str
    group_id: str
    since: datetime


@dataclass(frozen=True)
class AcceptableRange:
    min_nodes: int
    max_nodes: int
    current_target: int


@dataclass(frozen=True)
class IncorrectSize:
    expected: int
    current: int
    first_observed: datetime


@dataclass
class Readiness:
    """Node names by state (upstream's ``Readiness``)."""

    ready: list[str] = field(default_factory=list)
    unready: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)
    suspended: list[str] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)
    long_unregistered: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    resource_unready: list[str] = field(default_factory=list)
    time: datetime | None = None


@dataclass(frozen=True)
class ScaleUpSafety:
    safe: bool
    healthy: bool
    backoff: BackoffEntry | None


@dataclass(frozen=True)
class ScaleUpTimedOut:
    """Nodes requested for ``group`` did not register in time: event ``ScaleUpTimedOut``, and
    the unfulfilled ``increase`` is taken back (``DecreaseTargetSize(-increase)``)."""

    group: NodeGroup
    increase: int
    waited: timedelta


@dataclass(frozen=True)
class InstanceCreationFailed:
    """Event ``ScaleUpFailed``: ``count`` new instances of ``group`` failed with ``error``."""

    group: NodeGroup
    count: int
    error: InstanceErrorInfo


StateEffect = ScaleUpTimedOut | InstanceCreationFailed


def _suspended(node: Node) -> bool:
    for condition in status_of(node).get("conditions") or ():
        if condition.get("type") == "Suspended":
            return bool(condition.get("status") == "True")
    return False


class ClusterStateRegistry:
    """Cluster state across loops (module docstring)."""

    def __init__(self, *, health: HealthConfig, backoff: ExponentialBackoff) -> None:
        self.health = health
        self.backoff = backoff
        self.scale_up_requests: dict[str, ScaleUpRequest] = {}
        self.scale_down_requests: list[ScaleDownRequest] = []
        self.unregistered: dict[str, UnregisteredNode] = {}
        self.deleted_nodes: set[str] = set()
        self.per_group: dict[str, Readiness] = {}
        self.total = Readiness()
        self.ranges: dict[str, AcceptableRange] = {}
        self.incorrect_sizes: dict[str, IncorrectSize] = {}
        self.snapshot = ProviderSnapshot(groups={}, group_by_instance={})
        self.node_count = 0
        self._previous_instances: dict[str, tuple[Instance, ...]] = {}
        self.candidates_for_scale_down: dict[str, list[str]] = {}
        self.last_scale_down_update: datetime | None = None

    # ---------------------------------------------------------------------- registration

    def register_scale_up(self, group: NodeGroup, delta: int, now: datetime) -> None:
        """``registerOrUpdateScaleUpNoLock``."""
        provision = group.options.max_node_provision_time
        request = self.scale_up_requests.get(group.id)
        if request is None:
            if delta > 0:
                self.scale_up_requests[group.id] = ScaleUpRequest(
                    group_id=group.id, increase=delta, time=now, expected_add_time=now + provision
                )
            return
        if request.increase + delta <= 0:
            del self.scale_up_requests[group.id]
            return
        if delta > 0:
            request = ScaleUpRequest(
                group_id=group.id,
                increase=request.increase + delta,
                time=now,
                expected_add_time=now + provision,
            )
        else:
            request = replace(request, increase=request.increase + delta)
        self.scale_up_requests[group.id] = request

    def register_scale_down(
        self, group_id: str, node: str, now: datetime, expected_delete_time: datetime
    ) -> None:
        self.scale_down_requests.append(
            ScaleDownRequest(
                group_id=group_id, node=node, time=now, expected_delete_time=expected_delete_time
            )
        )

    def register_failed_scale_up(
        self, group: NodeGroup, error: InstanceErrorInfo, now: datetime
    ) -> None:
        self.backoff.backoff(group.id, error, now)

    # ---------------------------------------------------------------------------- update

    def update(
        self,
        *,
        nodes: Sequence[Node],
        snapshot: ProviderSnapshot,
        readiness: Callable[[Node], NodeReadiness],
        now: datetime,
    ) -> list[StateEffect]:
        """``UpdateNodes`` (module docstring); the I/O the loop must do."""
        self.snapshot = snapshot
        self.node_count = len(nodes)
        registered_ids = {provider_id(n) for n in nodes}
        fresh: list[UnregisteredNode] = []
        for group in snapshot.groups.values():
            for instance in group.instances:
                if instance.id in registered_ids or not _expected_to_register(instance):
                    continue
                fresh.append(
                    UnregisteredNode(instance_id=instance.id, group_id=group.id, since=now)
                )
        self.unregistered = {u.instance_id: self.unregistered.get(u.instance_id, u) for u in fresh}
        self.deleted_nodes = {node_name(n) for n in nodes if not snapshot.has_instance(n)}
        self._update_readiness(nodes, readiness, now)
        self._update_ranges()
        effects: list[StateEffect] = self._update_scale_requests(now)
        effects.extend(self._instance_creation_errors(now))
        self._update_ranges()
        self._update_incorrect_sizes(now)
        self._previous_instances = {g.id: g.instances for g in snapshot.groups.values()}
        return effects

    def recalculate(self, snapshot: ProviderSnapshot) -> None:
        """``Recalculate``: acceptable ranges after scale-ups or deletions were registered."""
        self.snapshot = snapshot
        self._update_ranges()

    def _update_readiness(
        self,
        nodes: Sequence[Node],
        readiness: Callable[[Node], NodeReadiness],
        now: datetime,
    ) -> None:
        per_group: dict[str, Readiness] = {}
        total = Readiness(time=now)
        for node in nodes:
            group = self.snapshot.group_for_node(node)
            state = readiness(node)
            startup = group.options.max_node_startup_time if group else timedelta(minutes=15)
            deleted = node_name(node) in self.deleted_nodes
            if group is not None:
                entry = per_group.setdefault(group.id, Readiness())
                _classify(entry, node, state, deleted=deleted, max_startup=startup, now=now)
            _classify(total, node, state, deleted=deleted, max_startup=startup, now=now)
        for unregistered in self.unregistered.values():
            group = self.snapshot.groups.get(unregistered.group_id)
            if group is None:
                continue
            entry = per_group.setdefault(group.id, Readiness())
            if unregistered.since + group.options.max_node_provision_time < now:
                entry.long_unregistered.append(unregistered.instance_id)
                total.long_unregistered.append(unregistered.instance_id)
            else:
                entry.unregistered.append(unregistered.instance_id)
                total.unregistered.append(unregistered.instance_id)
        for entry in per_group.values():
            entry.time = now
        self.per_group = per_group
        self.total = total

    def _update_ranges(self) -> None:
        ranges: dict[str, AcceptableRange] = {}
        for group in self.snapshot.groups.values():
            long_unregistered = len(self.per_group.get(group.id, Readiness()).long_unregistered)
            ranges[group.id] = AcceptableRange(
                min_nodes=group.target_size - long_unregistered,
                max_nodes=group.target_size,
                current_target=group.target_size,
            )
        for request in self.scale_up_requests.values():
            current = ranges.get(request.group_id, AcceptableRange(0, 0, 0))
            ranges[request.group_id] = replace(
                current, min_nodes=current.min_nodes - request.increase
            )
        for deletion in self.scale_down_requests:
            current = ranges.get(deletion.group_id, AcceptableRange(0, 0, 0))
            ranges[deletion.group_id] = replace(current, max_nodes=current.max_nodes + 1)
        self.ranges = ranges

    def _update_scale_requests(self, now: datetime) -> list[StateEffect]:
        self.backoff.remove_stale(now)
        effects: list[StateEffect] = []
        for group_id, request in sorted(self.scale_up_requests.items()):
            if not self._has_upcoming(group_id):
                del self.scale_up_requests[group_id]  # fulfilled
                continue
            if request.expected_add_time < now:
                group = self.snapshot.groups.get(group_id)
                waited = now - request.time
                if group is not None:
                    self.backoff.backoff(
                        group_id,
                        InstanceErrorInfo(
                            error_class=ErrorClass.OTHER,
                            code="timeout",
                            message=(
                                f"Scale-up timed out for node group {group_id} after "
                                f"{go_duration_string(waited.total_seconds())}"
                            ),
                        ),
                        now,
                    )
                    if request.increase > 0:
                        effects.append(
                            ScaleUpTimedOut(group=group, increase=request.increase, waited=waited)
                        )
                del self.scale_up_requests[group_id]
        self.scale_down_requests = [
            r for r in self.scale_down_requests if r.expected_delete_time > now
        ]
        return effects

    def _instance_creation_errors(self, now: datetime) -> list[StateEffect]:
        effects: list[StateEffect] = []
        for group in self.snapshot.groups.values():
            previous = {i.id for i in self._previous_instances.get(group.id, ()) if i.error}
            by_code: dict[tuple[ErrorClass, str], list[Instance]] = {}
            for instance in group.instances:
                if instance.state is InstanceState.CREATING and instance.error is not None:
                    key = (instance.error.error_class, instance.error.code)
                    by_code.setdefault(key, []).append(instance)
            for (error_class, code), instances in sorted(by_code.items()):
                unseen = [i for i in instances if i.id not in previous]
                if not unseen or not self.is_scaling_up(group.id):
                    continue
                messages = sorted({i.error.message for i in instances if i.error is not None})
                message = ", ".join(messages[:3]) + (", ..." if len(messages) > 3 else "")
                error = InstanceErrorInfo(error_class=error_class, code=code, message=message)
                self.register_scale_up(group, -len(unseen), now)
                self.backoff.backoff(group.id, error, now)
                effects.append(InstanceCreationFailed(group=group, count=len(unseen), error=error))
        return effects

    def _update_incorrect_sizes(self, now: datetime) -> None:
        result: dict[str, IncorrectSize] = {}
        for group in self.snapshot.groups.values():
            acceptable = self.ranges.get(group.id)
            readiness = self.per_group.get(group.id)
            if acceptable is None or readiness is None:
                continue
            unregistered = len(readiness.unregistered) + len(readiness.long_unregistered)
            registered = len(readiness.registered)
            target = acceptable.current_target
            if registered > target or registered < target - unregistered:
                incorrect = IncorrectSize(expected=target, current=registered, first_observed=now)
                existing = self.incorrect_sizes.get(group.id)
                if existing is not None and (existing.current, existing.expected) == (
                    incorrect.current,
                    incorrect.expected,
                ):
                    incorrect = existing
                result[group.id] = incorrect
        self.incorrect_sizes = result

    # --------------------------------------------------------------------------- queries

    def is_cluster_healthy(self) -> bool:
        unready = len(self.total.unready)
        return not (
            unready > self.health.ok_total_unready_count
            and unready > self.health.max_total_unready_percentage / 100.0 * self.node_count
        )

    def is_node_group_healthy(self, group_id: str) -> bool:
        acceptable = self.ranges.get(group_id)
        if acceptable is None:
            return False
        readiness = self.per_group.get(group_id)
        if readiness is None:
            return acceptable.current_target == 0 or (
                acceptable.min_nodes == 0 and acceptable.current_target > 0
            )
        unjustified = max(0, acceptable.min_nodes - len(readiness.ready) - len(readiness.suspended))
        all_nodes = (
            len(readiness.ready)
            + len(readiness.unready)
            + len(readiness.not_started)
            + len(readiness.suspended)
        )
        return not (
            unjustified > self.health.ok_total_unready_count
            and unjustified > self.health.max_total_unready_percentage / 100.0 * all_nodes
        )

    def scale_up_safety(self, group_id: str, now: datetime) -> ScaleUpSafety:
        healthy = self.is_node_group_healthy(group_id)
        backoff = self.backoff.status(group_id, now)
        return ScaleUpSafety(safe=healthy and backoff is None, healthy=healthy, backoff=backoff)

    def _upcoming_in_group(self, group_id: str) -> int | None:
        acceptable = self.ranges.get(group_id)
        if acceptable is None:
            return None
        readiness = self.per_group.get(group_id)
        if readiness is None:
            return acceptable.current_target
        return _upcoming(readiness, acceptable)

    def _has_upcoming(self, group_id: str) -> bool:
        upcoming = self._upcoming_in_group(group_id)
        return upcoming is not None and upcoming > 0

    def is_scaling_up(self, group_id: str) -> bool:
        return self._has_upcoming(group_id) and group_id in self.scale_up_requests

    def upcoming_nodes(self) -> tuple[dict[str, int], dict[str, list[str]]]:
        """``GetUpcomingNodes``: per group, how many nodes are coming, and the registered
        not-started nodes among them.

        Upstream (``clusterstate.go``, ``GetUpcomingNodes``) counts every node group whose
        target is above its ready + unready (+ suspended) + long-unregistered nodes, whoever
        raised the target and whether or not the group is backed off; it does not look at the
        scale-up requests."""
        counts: dict[str, int] = {}
        registered: dict[str, list[str]] = {}
        for group_id in self.snapshot.groups:
            readiness = self.per_group.get(group_id, Readiness())
            acceptable = self.ranges.get(group_id, AcceptableRange(0, 0, 0))
            coming = _upcoming(readiness, acceptable)
            if coming <= 0:
                continue  # "negative value is unlikely but theoretically possible"
            counts[group_id] = coming
            registered[group_id] = list(readiness.not_started)
        return counts, registered

    def long_unregistered(self) -> list[UnregisteredNode]:
        """Unregistered instances past their group's provision time, oldest first."""
        result = []
        for unregistered in self.unregistered.values():
            group = self.snapshot.groups.get(unregistered.group_id)
            if (
                group is not None
                and unregistered.instance_id
                in self.per_group.get(group.id, Readiness()).long_unregistered
            ):
                result.append(unregistered)
        return sorted(result, key=lambda u: (u.since, u.instance_id))

    def update_scale_down_candidates(
        self, candidates: Mapping[str, Iterable[str]], now: datetime
    ) -> None:
        self.candidates_for_scale_down = {g: sorted(names) for g, names in candidates.items()}
        self.last_scale_down_update = now

    def autoscaled_counts(self) -> tuple[int, int]:
        """(current, target) nodes of autoscaled groups (``GetAutoscaledNodesCount``)."""
        target = sum(r.current_target for r in self.ranges.values())
        current = sum(len(r.registered) - len(r.not_started) for r in self.per_group.values())
        return current, target


def _classify(
    readiness: Readiness,
    node: Node,
    state: NodeReadiness,
    *,
    deleted: bool,
    max_startup: timedelta,
    now: datetime,
) -> None:
    name = node_name(node)
    readiness.registered.append(name)
    if deleted:
        readiness.deleted.append(name)
    elif _suspended(node):
        readiness.suspended.append(name)
    elif state.ready:
        readiness.ready.append(name)
    elif creation_time(node) + max_startup > now:
        readiness.not_started.append(name)
    else:
        readiness.unready.append(name)


def _upcoming(readiness: Readiness, acceptable: AcceptableRange) -> int:
    """``calculateUpcomingNodesInNodeGroup``."""
    return acceptable.current_target - (
        len(readiness.ready)
        + len(readiness.unready)
        + len(readiness.suspended)
        + len(readiness.long_unregistered)
    )


def _expected_to_register(instance: Instance) -> bool:
    return instance.state is not InstanceState.DELETING and instance.error is None
