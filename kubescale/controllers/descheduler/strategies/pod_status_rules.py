"""The three plugins that judge a pod by its status: RemovePodsHavingTooManyRestarts,
PodLifeTime and RemoveFailedPods (Deschedule; upstream ``removepodshavingtoomanyrestarts``,
``podlifetime``, ``removefailedpods``). All three list every pod of a node, finished ones
included (``ListAllPodsOnANode``), and require namespaces, label selector, ``Filter`` and
``PreEvictionFilter``.

RemovePodsHavingTooManyRestarts: restarts = Σ ``restartCount`` of the containers (and init
containers with ``includingInitContainers``); eligible when restarts >= ``podRestartThreshold``
and, with ``states``, the pod's phase is one of them or a container (init containers with the
flag) is *waiting* with one of them as reason. Each node's eligible pods are evicted from most
to fewest restarts.

PodLifeTime: the filters given are ANDed, the values within one ORed:

* ``maxPodLifeTimeSeconds``: ``now − creationTimestamp`` strictly greater (a creation time in
  the future is never eligible);
* ``states``: the phase, ``status.reason``, or a container's waiting or terminated reason
  (init/ephemeral containers with their flags);
* ``conditions``: a pod condition matching every field given; ``minTimeSinceLastTransition
  Seconds`` needs a ``lastTransitionTime`` at least that long ago;
* ``exitCodes``: a container's ``state.terminated.exitCode``;
* ``ownerKinds``: include — some ownerReference of an included kind; exclude — none of an
  excluded kind.

Eligible pods of all nodes are evicted oldest first; a node's limit moves on to the next pod.

RemoveFailedPods: phase ``Failed``; age (whole seconds since creation) >= ``minPodLifetimeSeconds``
(default 3600); no ownerReference of an ``excludeOwnerKinds`` kind; with ``reasons``, one of the
containers' waiting/terminated reasons or ``status.reason`` is listed; with ``exitCodes``, one
of the containers' terminated exit codes is listed (init containers with the flag, for both).
Each node's pods are evicted in list order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any, Final

from kubescale.base.times import parse_time
from kubescale.objects.pod import ContainerStatus, Pod
from kubescale.objects.views import Meta, status_of
from kubescale.scheduling.cycle_view import node_name
from kubescale.scheduling.pods import creation_time, owner_refs, restart_count
from kubescale.scheduling.policy.common_args import labels_match
from kubescale.scheduling.policy.strategy_args import (
    PodConditionFilter,
    PodLifeTimeArgs,
    RemoveFailedPodsArgs,
    RemovePodsHavingTooManyRestartsArgs,
)

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun

__all__ = [
    "FAILED_PODS",
    "POD_LIFETIME",
    "TOO_MANY_RESTARTS",
    "pod_lifetime",
    "pod_lifetime_eligible",
    "remove_failed_pods",
    "remove_pods_having_too_many_restarts",
]

TOO_MANY_RESTARTS: Final = "RemovePodsHavingTooManyRestarts"
POD_LIFETIME: Final = "PodLifeTime"
FAILED_PODS: Final = "RemoveFailedPods"


def _statuses(pod: Pod, *, init: bool, ephemeral: bool = False) -> Iterator[ContainerStatus]:
    status = status_of(pod)
    yield from status.get("containerStatuses") or ()
    if init:
        yield from status.get("initContainerStatuses") or ()
    if ephemeral:
        yield from status.get("ephemeralContainerStatuses") or ()


def _in_scope(pod: Pod, namespaces: Any, selector: Any) -> bool:
    namespace = str(Meta(pod).raw.get("namespace", ""))
    return bool(namespaces.allows(namespace)) and labels_match(selector, pod)


# --------------------------------------------------------------------- too many restarts


def _restart_states_match(pod: Pod, args: RemovePodsHavingTooManyRestartsArgs) -> bool:
    if not args.states:
        return True
    if status_of(pod).get("phase") in args.states:
        return True
    for cs in _statuses(pod, init=args.including_init_containers):
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting is not None and waiting.get("reason") in args.states:
            return True
    return False


def remove_pods_having_too_many_restarts(
    ctx: StrategyContext, args: RemovePodsHavingTooManyRestartsArgs
) -> StrategyRun:
    for node in ctx.view.nodes:
        eligible: list[tuple[int, Pod]] = []
        for pod in ctx.view.pods_on(node_name(node), include_terminal=True):
            if not _in_scope(pod, args.namespaces, args.label_selector):
                continue
            restarts = restart_count(pod, including_init=args.including_init_containers)
            if restarts < args.pod_restart_threshold or not _restart_states_match(pod, args):
                continue
            if ctx.evictable(pod):
                eligible.append((restarts, pod))
        eligible.sort(key=lambda entry: -entry[0])
        for restarts, pod in eligible:
            result = yield from ctx.evict(pod, f"pod has {restarts} restarts")
            if result is EvictionResult.NODE_LIMIT:
                break
            if result is EvictionResult.TOTAL_LIMIT:
                return


# -------------------------------------------------------------------------- lifetime


def _reasons(pod: Pod, *, init: bool, ephemeral: bool) -> set[str]:
    found: set[str] = set()
    for cs in _statuses(pod, init=init, ephemeral=ephemeral):
        state = cs.get("state") or {}
        for sub in (state.get("waiting"), state.get("terminated")):
            reason = (sub or {}).get("reason")
            if reason:
                found.add(str(reason))
    return found


def _exit_codes(pod: Pod, *, init: bool, ephemeral: bool = False) -> set[int]:
    codes: set[int] = set()
    for cs in _statuses(pod, init=init, ephemeral=ephemeral):
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is not None and isinstance(terminated.get("exitCode"), int):
            codes.add(int(terminated["exitCode"]))
    return codes


def _condition_matches(pod: Pod, wanted: PodConditionFilter, now: datetime) -> bool:
    for condition in status_of(pod).get("conditions") or ():
        if wanted.type and condition.get("type") != wanted.type:
            continue
        if wanted.status and condition.get("status") != wanted.status:
            continue
        if wanted.reason and condition.get("reason") != wanted.reason:
            continue
        if wanted.min_time_since_last_transition_seconds is not None:
            changed = parse_time(condition.get("lastTransitionTime"))
            if changed is None:
                continue
            if (now - changed).total_seconds() < wanted.min_time_since_last_transition_seconds:
                continue
        return True
    return False


def _owner_kinds_match(pod: Pod, args: PodLifeTimeArgs) -> bool:
    kinds = {str(ref.get("kind", "")) for ref in owner_refs(pod)}
    if args.owner_kinds.include and not kinds & set(args.owner_kinds.include):
        return False
    return not kinds & set(args.owner_kinds.exclude)


def pod_lifetime_eligible(pod: Pod, args: PodLifeTimeArgs, now: datetime) -> bool:
    """PodLifeTime's filters on one pod (module docstring), scope and evictor excluded."""
    if not _owner_kinds_match(pod, args):
        return False
    if args.max_pod_life_time_seconds is not None:
        created = creation_time(pod)
        if created is None or (now - created).total_seconds() <= args.max_pod_life_time_seconds:
            return False
    init, ephemeral = args.including_init_containers, args.including_ephemeral_containers
    if args.states:
        status = status_of(pod)
        seen = _reasons(pod, init=init, ephemeral=ephemeral)
        seen.update(str(v) for v in (status.get("phase"), status.get("reason")) if v)
        if not seen & set(args.states):
            return False
    if args.conditions and not any(_condition_matches(pod, c, now) for c in args.conditions):
        return False
    return not args.exit_codes or bool(
        _exit_codes(pod, init=init, ephemeral=ephemeral) & set(args.exit_codes)
    )


def pod_lifetime(ctx: StrategyContext, args: PodLifeTimeArgs) -> StrategyRun:
    view = ctx.view
    eligible = [
        pod
        for pod in view.pods_on_nodes(include_terminal=True)
        if _in_scope(pod, args.namespaces, args.label_selector)
        and pod_lifetime_eligible(pod, args, view.now)
        and ctx.evictable(pod)
    ]
    eligible.sort(key=lambda pod: creation_time(pod) or view.now)
    for pod in eligible:
        result = yield from ctx.evict(pod, "pod matches the PodLifeTime filters")
        if result is EvictionResult.TOTAL_LIMIT:
            return


# ----------------------------------------------------------------------- failed pods


def _failed_pod_eligible(pod: Pod, args: RemoveFailedPodsArgs, now: datetime) -> bool:
    status = status_of(pod)
    if status.get("phase") != "Failed":
        return False
    created = creation_time(pod)
    age = int((now - created).total_seconds()) if created is not None else 0
    if max(age, 0) < args.min_pod_lifetime_seconds:
        return False
    if any(ref.get("kind") in args.exclude_owner_kinds for ref in owner_refs(pod)):
        return False
    init = args.including_init_containers
    if args.reasons:
        reasons = _reasons(pod, init=init, ephemeral=False)
        if status.get("reason"):
            reasons.add(str(status["reason"]))
        if not reasons & set(args.reasons):
            return False
    return not args.exit_codes or bool(_exit_codes(pod, init=init) & set(args.exit_codes))


def remove_failed_pods(ctx: StrategyContext, args: RemoveFailedPodsArgs) -> StrategyRun:
    for node in ctx.view.nodes:
        for pod in ctx.view.pods_on(node_name(node), include_terminal=True):
            if not _in_scope(pod, args.namespaces, args.label_selector):
                continue
            if not _failed_pod_eligible(pod, args, ctx.view.now) or not ctx.evictable(pod):
                continue
            result = yield from ctx.evict(pod, "pod has failed")
            if result is EvictionResult.NODE_LIMIT:
                break
            if result is EvictionResult.TOTAL_LIMIT:
                return
