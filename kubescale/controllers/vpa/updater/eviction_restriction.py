"""The updater's disruption budget: which of a VPA's pods one loop may evict or resize in place.

Upstream (``pkg/updater/restriction/pods_restriction_factory.go``, ``pods_eviction_restriction.go``,
``pods_inplace_restriction.go``) builds, once per VPA per loop, a map from each live pod to the
controller that owns it and a ``singleGroupStats`` per controller. This module is that, as pure
decisions over raw API dicts:

- :meth:`EvictionRestriction.build` groups pods by their controller ``ownerReference``, skips groups
  with fewer live pods than ``minReplicas`` (``--min-replicas``, default 2; the VPA's
  ``spec.updatePolicy.minReplicas`` overrides) and groups whose configured replica count is unknown
  (RC/RS/StatefulSet ``spec.replicas`` nil or 0, DaemonSet ``status.numberReady`` 0, controller
  missing), each with a :class:`SkippedGroup` reason; pods whose eviction or resize an earlier
  loop made (or may have made: outcome unknown) and the informer does not show yet are counted
  as evicted or resized (:class:`~kubescale.coordination.disruption_ledger.DisruptionLedger`);
- :func:`configured_replicas` sizes a group by the larger of the controller's declared count
  and its pods, those being deleted included (deliberate difference, see there);
- :meth:`EvictionRestriction.can_evict` / :meth:`EvictionRestriction.record_eviction` answer and
  spend the budget, so one loop never evicts more than ``isPodDisruptable`` allows;
- :meth:`EvictionRestriction.in_place_decision` / :meth:`EvictionRestriction.record_in_place_update`
  do the same for in-place resizes (``CanInPlaceUpdate``, ``CanEvictInPlacingPod``).

The object is stateful only within one loop; nothing here does I/O or reads a clock: ``now`` and
the time of the last in-place attempt for a pod are passed in by the caller, which owns that map
across loops (upstream's ``lastInPlaceAttemptTimeMap``).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

from kubescale.base.logs import component_logger
from kubescale.coordination.disruption_ledger import DisruptionKind
from kubescale.objects.daemon_set import DaemonSet
from kubescale.objects.meta import Condition
from kubescale.objects.pod import Pod
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.scale import ReplicaCountedController
from kubescale.objects.views import meta, spec_of, status_of
from kubescale.objects.vpa import VerticalPodAutoscaler

_log = component_logger("vpa-updater")

DEFAULT_MIN_REPLICAS = 2
DEFAULT_EVICTION_TOLERANCE = 0.5
# pods_inplace_restriction.go: DeferredResizeUpdateTimeout / InProgressResizeUpdateTimeout.
DEFERRED_RESIZE_TIMEOUT = timedelta(minutes=5)
IN_PROGRESS_RESIZE_TIMEOUT = timedelta(hours=1)

_REPLICA_SPEC_KINDS = frozenset({"ReplicationController", "ReplicaSet", "StatefulSet"})


@dataclass(frozen=True, order=True)
class ControllerKey:
    """Upstream's ``podReplicaCreator``: the controller owning a pod, in the pod's namespace."""

    namespace: str
    kind: str
    name: str


@dataclass(frozen=True)
class SkippedGroup:
    """A controller group the budget left out this loop: none of its pods may be disrupted."""

    controller: ControllerKey
    live: int
    reason: str


@dataclass
class GroupStats:
    """``singleGroupStats``: one controller's counts; ``evicted``/``in_place_initiated`` grow."""

    configured: int
    pending: int
    running: int
    eviction_tolerance: int
    below_min_replicas: bool = False
    evicted: int = 0
    in_place_initiated: int = 0

    def is_pod_disruptable(self) -> bool:
        """``isPodDisruptable``: one more running pod may go without breaking the budget."""
        should_be_alive = self.configured - self.eviction_tolerance
        alive = self.running - (self.evicted + self.in_place_initiated)
        # The second clause lets a small group (tolerance rounds to 0) lose one pod when all of
        # its configured pods are running and nothing was disrupted yet this loop.
        return alive > should_be_alive or (
            self.configured == self.running
            and self.eviction_tolerance == 0
            and self.evicted == 0
            and self.in_place_initiated == 0
        )


class InPlaceDecision(enum.Enum):
    """``utils.InPlaceDecision``."""

    APPROVED = "Approved"
    DEFERRED = "Deferred"
    EVICT = "Evict"


def pod_id(pod: Pod) -> str:
    """``getPodID``: ``namespace/name``."""
    view = meta(pod)
    return f"{view.namespace}/{view.name}"


def controller_of(pod: Pod) -> ControllerKey | None:
    """The owner reference with ``controller: true`` (``managingControllerRef``), if any."""
    view = meta(pod)
    ref = view.controller
    if ref is None:
        return None
    return ControllerKey(namespace=view.namespace, kind=ref.kind, name=ref.name)


def _is_pending(pod: Pod) -> bool:
    return status_of(pod).get("phase") == "Pending"


def _condition(pod: Pod, kind: str) -> Condition | None:
    for cond in status_of(pod).get("conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def is_in_place_updating(pod: Pod) -> bool:
    """A resize is outstanding: condition ``PodResizePending`` or ``PodResizeInProgress`` True."""
    return (
        _condition(pod, "PodResizePending") is not None
        or _condition(pod, "PodResizeInProgress") is not None
    )


def is_non_disruptive_resize(pod: Pod) -> bool:
    """``IsNonDisruptiveResize``: no container asks ``RestartContainer`` for any resource."""
    for container in spec_of(pod).get("containers") or ():
        for policy in container.get("resizePolicy") or ():
            if policy.get("restartPolicy") == "RestartContainer":
                return False
    return True


def configured_replicas(
    *, key: ControllerKey, controller: ReplicaCountedController | None, live: int
) -> int | str:
    """``getReplicaCount``: the configured size of a group, or the reason it is unknown.

    Upstream reads RC/RS/StatefulSet ``spec.replicas``, DaemonSet ``status.numberReady``, a Job's
    live pods, and 0 for any other kind. Deliberate differences, each letting fewer pods go:

    * any other kind (a custom resource with ``/scale``) is sized by its ``/scale``
      ``spec.replicas`` (``controller`` is the Scale object), and skipped while that is not
      known — upstream's 0 made the budget ``alive > 0``: every pod could go;
    * a DaemonSet counts ``max(numberReady, desiredNumberScheduled)``: ``numberReady`` lags
      (pods just started, or just replaced, are not ready yet);
    * the group is never smaller than its pods (``live``: the live ones and those being
      deleted, which are not alive but still the group's): a declared count lags its pods too
      (a scale-down in progress, a status not yet written), and a group sized by its live pods
      alone (a Job; a DaemonSet whose status lags) would shrink with every eviction and give a
      fresh budget each loop. ``configured − int(configured × tolerance)`` never decreases as
      ``configured`` grows, so the larger count is the safer.
    """
    if key.kind == "Job":
        # A Job has no replica count: upstream uses the number of live pods.
        return live
    where = f"{key.kind} {key.namespace}/{key.name}"
    if controller is None:
        if key.kind in _REPLICA_SPEC_KINDS or key.kind == "DaemonSet":
            return f"{where} does not exist"
        return f"{where} has no scale subresource known"
    if key.kind == "DaemonSet":
        status = status_of(cast(DaemonSet, controller))  # its kind says which object it is
        ready = int(status.get("numberReady") or 0)
        if ready <= 0:
            return f"{where} has no number ready pods"
        declared = max(ready, int(status.get("desiredNumberScheduled") or 0))
    else:
        # RC, ReplicaSet, StatefulSet or a Scale: each has ``spec.replicas`` (as ReplicaSet's)
        replicas = spec_of(cast(ReplicaSet, controller)).get("replicas")
        if replicas is None or int(replicas) == 0:
            return f"{where} has no replicas config"
        declared = int(replicas)
    return max(declared, live)


def required_replicas(*, vpa: VerticalPodAutoscaler, min_replicas: int) -> int:
    """``--min-replicas`` unless the VPA sets ``spec.updatePolicy.minReplicas``."""
    policy = spec_of(vpa).get("updatePolicy") or {}
    per_vpa = policy.get("minReplicas")
    return int(per_vpa) if per_vpa is not None else min_replicas


@dataclass
class EvictionRestriction:
    """One loop's budget for one VPA: built from its live pods and their controllers."""

    groups: dict[ControllerKey, GroupStats]
    pod_groups: dict[str, ControllerKey]
    skipped: tuple[SkippedGroup, ...] = ()
    in_place_skip_disruption_budget: bool = False
    _touched: set[str] = field(default_factory=set)

    @classmethod
    def build(
        cls,
        *,
        pods: Iterable[Pod],
        controllers: Mapping[ControllerKey, ReplicaCountedController],
        vpa: VerticalPodAutoscaler,
        min_replicas: int = DEFAULT_MIN_REPLICAS,
        eviction_tolerance: float = DEFAULT_EVICTION_TOLERANCE,
        in_place_skip_disruption_budget: bool = False,
        in_place_mode: bool = False,
        in_flight: Mapping[str, DisruptionKind] | None = None,
        terminating: Mapping[ControllerKey, int] | None = None,
        boosted: Collection[str] = (),
    ) -> EvictionRestriction:
        """``GetCreatorMaps``: group ``pods`` (already filtered to this VPA's live pods).

        ``terminating`` counts each controller's pods being deleted (not in ``pods``): they
        are not alive, but they size the group (:func:`configured_replicas`).

        ``in_flight`` (pod ``namespace/name`` → kind) are the pods an earlier eviction or resize
        has not visibly reached yet: each counts in its group as evicted (a pending pod's
        eviction is not counted, as upstream) or resized, and is not touched again.

        ``boosted`` (pod ``namespace/name``): pods with a CPU startup boost in progress; a group
        holding one is kept below minReplicas too (marked ``below_min_replicas``, never
        evicted), so that its pods can be unboosted (upstream's creator maps)."""
        live: dict[ControllerKey, list[Pod]] = {}
        for pod in pods:
            key = controller_of(pod)
            if key is None:
                _log.debug("pod %s is not managed by any controller", pod_id(pod))
                continue
            live.setdefault(key, []).append(pod)
        required = required_replicas(vpa=vpa, min_replicas=min_replicas)
        groups: dict[ControllerKey, GroupStats] = {}
        pod_groups: dict[str, ControllerKey] = {}
        skipped: list[SkippedGroup] = []
        touched: set[str] = set()
        in_flight = in_flight or {}
        for key in sorted(live):
            members = live[key]
            below_min = len(members) < required
            # Upstream keeps a too-small group only for in-place updates that skip the budget,
            # marking it ``belowMinReplicas`` so it is never evicted.
            has_boosted = any(pod_id(pod) in boosted for pod in members)
            if (
                below_min
                and not has_boosted
                and not (in_place_mode and in_place_skip_disruption_budget)
            ):
                skipped.append(
                    SkippedGroup(
                        controller=key,
                        live=len(members),
                        reason=f"too few replicas: {len(members)} live, {required} required",
                    )
                )
                continue
            configured = configured_replicas(
                key=key,
                controller=controllers.get(key),
                live=len(members) + (terminating or {}).get(key, 0),
            )
            if isinstance(configured, str):
                skipped.append(SkippedGroup(controller=key, live=len(members), reason=configured))
                continue
            pending = sum(1 for pod in members if _is_pending(pod))
            stats = groups[key] = GroupStats(
                configured=configured,
                pending=pending,
                running=len(members) - pending,
                # Go's int(float64(configured) * fraction): truncation toward zero.
                eviction_tolerance=int(configured * eviction_tolerance),
                below_min_replicas=below_min,
            )
            for pod in members:
                pod_groups[pod_id(pod)] = key
                kind = in_flight.get(pod_id(pod))
                if kind is None:
                    continue
                touched.add(pod_id(pod))
                if kind is DisruptionKind.RESIZE:
                    stats.in_place_initiated += 1
                elif not _is_pending(pod):
                    stats.evicted += 1
        return cls(
            groups=groups,
            pod_groups=pod_groups,
            skipped=tuple(skipped),
            in_place_skip_disruption_budget=in_place_skip_disruption_budget,
            _touched=touched,
        )

    def _stats(self, pod: Pod) -> GroupStats | None:
        key = self.pod_groups.get(pod_id(pod))
        return None if key is None else self.groups.get(key)

    def can_evict(
        self,
        pod: Pod,
        *,
        now: datetime,
        last_in_place_attempt: datetime | None = None,
    ) -> bool:
        """``CanEvict``: pending pods always; others while the group's budget allows."""
        if pod_id(pod) in self._touched:
            return False
        stats = self._stats(pod)
        if stats is None:
            return False
        if _is_pending(pod):
            return True
        if stats.below_min_replicas:
            return False
        if is_in_place_updating(pod):
            return self._can_evict_resizing(
                pod, stats=stats, now=now, last_in_place_attempt=last_in_place_attempt
            )
        return stats.is_pod_disruptable()

    def record_eviction(self, pod: Pod) -> None:
        """Spend budget for an eviction the caller made; pending pods are not counted."""
        stats = self._stats(pod)
        if stats is None:
            raise ValueError(f"pod {pod_id(pod)} is not in any budgeted group")
        self._touched.add(pod_id(pod))
        if not _is_pending(pod):
            stats.evicted += 1

    def in_place_decision(
        self,
        pod: Pod,
        *,
        now: datetime,
        last_in_place_attempt: datetime | None = None,
        fall_back_to_eviction: bool = True,
    ) -> InPlaceDecision:
        """``CanInPlaceUpdate``; ``fall_back_to_eviction=False`` is mode InPlace (never Evict)."""
        stats = self._stats(pod)
        if stats is None or _is_pending(pod) or pod_id(pod) in self._touched:
            return InPlaceDecision.DEFERRED
        if is_in_place_updating(pod):
            if fall_back_to_eviction and self._can_evict_resizing(
                pod, stats=stats, now=now, last_in_place_attempt=last_in_place_attempt
            ):
                return InPlaceDecision.EVICT
            return InPlaceDecision.DEFERRED
        if self.in_place_skip_disruption_budget and is_non_disruptive_resize(pod):
            return InPlaceDecision.APPROVED
        if stats.is_pod_disruptable():
            return InPlaceDecision.APPROVED
        return InPlaceDecision.DEFERRED

    def can_unboost(self, pod: Pod) -> bool:
        """``CanUnboost`` past its gate and expiry checks: not Pending, not touched this loop,
        no resize outstanding, and the group may lose one more pod for a moment."""
        stats = self._stats(pod)
        if stats is None or _is_pending(pod) or pod_id(pod) in self._touched:
            return False
        if is_in_place_updating(pod):
            return False
        return stats.is_pod_disruptable()

    def record_in_place_update(self, pod: Pod) -> None:
        """Count a resize the caller issued (``inPlaceUpdateInitiated``)."""
        stats = self._stats(pod)
        if stats is None:
            raise ValueError(f"pod {pod_id(pod)} is not in any budgeted group")
        self._touched.add(pod_id(pod))
        stats.in_place_initiated += 1

    @staticmethod
    def _can_evict_resizing(
        pod: Pod,
        *,
        stats: GroupStats,
        now: datetime,
        last_in_place_attempt: datetime | None,
    ) -> bool:
        """``CanEvictInPlacingPod``: fall back to eviction only when the resize failed."""
        if not stats.is_pod_disruptable():
            return False
        # Upstream records "now" when no attempt is known, so the elapsed time starts at zero.
        elapsed = now - (last_in_place_attempt or now)
        pending = _condition(pod, "PodResizePending")
        if pending is not None:
            if pending.get("reason") == "Deferred":
                return elapsed > DEFERRED_RESIZE_TIMEOUT
            # Infeasible, or a reason upstream does not know: evict.
            return True
        progress = _condition(pod, "PodResizeInProgress")
        if progress is None:
            return False
        if not progress.get("reason") and not progress.get("message"):
            return elapsed > IN_PROGRESS_RESIZE_TIMEOUT
        # Reason Error, or anything unknown: evict.
        return True
