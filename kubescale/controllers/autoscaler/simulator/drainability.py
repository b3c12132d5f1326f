"""Which pods block a node's removal: upstream's drainability rules, in upstream's order.

``pkg/simulator/drainability/rules/rules.go`` (reference §3.3); the first rule with an opinion
decides:

==  ========================================================  ===================================
1   mirror (static) pod                                       skip (not moved, not blocking)
2   terminating for longer than its grace period + 30 s       skip
3   replica count (with ``--skip-nodes-with-custom-           block ``ControllerNotFound`` /
    controller-pods``): the pod's ReplicaSet / Job /          ``MinReplicasReached``
    StatefulSet / DaemonSet is gone, or a ReplicaSet has
    fewer replicas than ``--min-replica-count``
4   DaemonSet pod                                             drain-ok (listed apart: not moved)
5   ``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` drain-ok (rules 6-12 skipped — the
                                                              Eviction API still enforces PDBs)
6   terminal pod (``IsPodTerminal``: Failed; Succeeded with    drain-ok (still listed to move)
    restartPolicy Never or OnFailure)
7   ``safe-to-evict: "on-completion"``                        wait for completion
8   no controller (with the flag: none of ReplicationController, Job, ReplicaSet, StatefulSet)
                                                              block ``NotReplicated``
9   kube-system pod no PodDisruptionBudget covers (with ``--skip-nodes-with-system-pods``),
    younger than ``--blocking-system-pod-distruption-timeout``  block ``UnmovableKubeSystemPod``
10  ``safe-to-evict: "false"``                                block ``NotSafeToEvictAnnotation``
11  a HostPath, or an EmptyDir not in memory, not listed in
    ``safe-to-evict-local-volumes`` (with ``--skip-nodes-with-local-storage``)
                                                              block ``LocalStorageRequested``
12  a PodDisruptionBudget covering it allows fewer than 1     block ``NotEnoughPdb``
    more disruption (counting the pods already planned away)
==  ========================================================  ===================================

Pods no rule blocks, other than DaemonSet pods and skipped ones, must be moved elsewhere
(``GetPodsToMove``: Undefined and DrainOk alike, terminal pods included).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from kubescale.controllers.autoscaler.model.pod_facts import (
    SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
    OwnerRef,
    controller_of,
    creation_time,
    is_daemonset_pod,
    is_mirror_pod,
    pod_annotations,
    pod_id,
)
from kubescale.controllers.autoscaler.simulator.utilization import is_long_terminating
from kubescale.objects.daemon_set import DaemonSet
from kubescale.objects.job import Job
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.replication_controller import ReplicationController
from kubescale.objects.selectors import LabelSelector, SelectorError, label_selector_from_dict
from kubescale.objects.stateful_set import StatefulSet
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "BlockingReason",
    "DrainContext",
    "NodePods",
    "Outcome",
    "PdbTracker",
    "classify_node_pods",
    "drainability",
]

Controller = ReplicaSet | ReplicationController | Job | StatefulSet | DaemonSet
"""The controllers whose existence (and, for ReplicaSets and ReplicationControllers, replica
count) the drain rules check."""

_REPLICATED_KINDS: Final = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})
_CHECKED_CONTROLLERS: Final = frozenset(
    {"ReplicationController", "ReplicaSet", "Job", "StatefulSet", "DaemonSet"}
)


class Outcome(enum.Enum):
    UNDEFINED = "Undefined"
    SKIP = "SkipDrain"
    DRAIN_OK = "DrainOk"
    BLOCK = "BlockDrain"
    WAIT = "WaitForCompletion"


class BlockingReason(enum.Enum):
    """``drain.BlockingPodReason``."""

    CONTROLLER_NOT_FOUND = "ControllerNotFound"
    MIN_REPLICAS_REACHED = "MinReplicasReached"
    NOT_REPLICATED = "NotReplicated"
    LOCAL_STORAGE_REQUESTED = "LocalStorageRequested"
    NOT_SAFE_TO_EVICT_ANNOTATION = "NotSafeToEvictAnnotation"
    UNMOVABLE_KUBE_SYSTEM_POD = "UnmovableKubeSystemPod"
    NOT_ENOUGH_PDB = "NotEnoughPdb"
    UNEXPECTED_ERROR = "UnexpectedError"


@dataclass(frozen=True)
class Drainability:
    outcome: Outcome
    reason: BlockingReason | None = None


@dataclass(frozen=True)
class _Pdb:
    namespace: str
    name: str
    selector: LabelSelector
    allowed: int


class PdbTracker:
    """PodDisruptionBudgets and the disruptions this loop's plan has used already
    (``RemainingPdbTracker``)."""

    def __init__(
        self,
        pdbs: Iterable[PodDisruptionBudget],
        *,
        in_flight: Sequence[Pod] = (),
    ) -> None:
        """``in_flight``: pods whose eviction (by any system of the process, on the disruption
        ledger) the informers do not show yet — with ``--coordination one-brain`` they spend
        their PDBs' budget before this loop plans anything (the status may not count them yet:
        counting twice errs on the safe side for at most one watch delay)."""
        self._pdbs: list[_Pdb] = []
        for pdb in pdbs:
            meta = Meta(pdb).raw
            try:
                selector = label_selector_from_dict(spec_of(pdb).get("selector"))
            except SelectorError:
                continue
            allowed = int(status_of(pdb).get("disruptionsAllowed") or 0)
            self._pdbs.append(
                _Pdb(
                    namespace=str(meta.get("namespace", "")),
                    name=str(meta.get("name", "")),
                    selector=selector,
                    allowed=allowed,
                )
            )
        self._used: dict[tuple[str, str], int] = {}
        self.disrupt(in_flight)

    def matching(self, pod: Pod) -> list[_Pdb]:
        meta = Meta(pod).raw
        namespace = str(meta.get("namespace", ""))
        labels = meta.get("labels") or {}
        return [p for p in self._pdbs if p.namespace == namespace and p.selector.matches(labels)]

    def has_pdb(self, pod: Pod) -> bool:
        return bool(self.matching(pod))

    def remaining(self, pdb: _Pdb) -> int:
        return pdb.allowed - self._used.get((pdb.namespace, pdb.name), 0)

    def can_disrupt(self, pods: Sequence[Pod]) -> Pod | None:
        """The first pod whose budgets would be exceeded by moving all of ``pods``."""
        wanted: dict[tuple[str, str], int] = {}
        for pod in pods:
            for pdb in self.matching(pod):
                key = (pdb.namespace, pdb.name)
                wanted[key] = wanted.get(key, 0) + 1
                if self.remaining(pdb) - wanted[key] < 0:
                    return pod
        return None

    def disrupt(self, pods: Sequence[Pod]) -> None:
        for pod in pods:
            for pdb in self.matching(pod):
                key = (pdb.namespace, pdb.name)
                self._used[key] = self._used.get(key, 0) + 1


@dataclass(frozen=True, kw_only=True)
class DrainContext:
    """What the rules read besides the pod."""

    pdbs: PdbTracker
    now: datetime
    controller: Callable[[str, OwnerRef], Controller | None] = lambda namespace, ref: None
    """Looks up a pod's controller (namespace, owner) — ``None`` when it does not exist."""
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_custom_controller_pods: bool = True
    min_replica_count: int = 0
    blocking_system_pod_timeout: timedelta = timedelta(hours=1)


def _local_storage(pod: Pod) -> bool:
    allowed = {
        v.strip()
        for v in pod_annotations(pod).get(SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION, "").split(",")
        if v.strip()
    }
    for volume in spec_of(pod).get("volumes") or ():
        name = str(volume.get("name", ""))
        if name in allowed:
            continue
        if "hostPath" in volume:
            return True
        empty_dir = volume.get("emptyDir")
        if empty_dir is not None and (empty_dir or {}).get("medium") != "Memory":
            return True
    return False


def _terminal(pod: Pod) -> bool:
    """Upstream's ``drain.IsPodTerminal``: restartPolicy ``Never`` and Succeeded or Failed;
    ``OnFailure`` and Succeeded; or Failed whatever the policy (the kubelet rejected it). A
    Succeeded pod under ``Always`` (the API server's default) will be restarted: not terminal."""
    phase = status_of(pod).get("phase")
    policy = spec_of(pod).get("restartPolicy")
    if policy == "Never" and phase in ("Succeeded", "Failed"):
        return True
    if policy == "OnFailure" and phase == "Succeeded":
        return True
    return phase == "Failed"


def drainability(pod: Pod, context: DrainContext) -> Drainability:
    """The module docstring's rules, in order."""
    if is_mirror_pod(pod) or is_long_terminating(pod, context.now):
        return Drainability(Outcome.SKIP)
    namespace = str(Meta(pod).raw.get("namespace", ""))
    owner = controller_of(pod)
    checked = owner is not None and owner.kind in _CHECKED_CONTROLLERS
    if context.skip_nodes_with_custom_controller_pods and owner is not None and checked:
        controller = context.controller(namespace, owner)
        if controller is None:
            return Drainability(Outcome.BLOCK, BlockingReason.CONTROLLER_NOT_FOUND)
        if owner.kind in ("ReplicaSet", "ReplicationController"):
            replicas = spec_of(controller).get("replicas")
            if isinstance(replicas, int) and replicas < context.min_replica_count:
                return Drainability(Outcome.BLOCK, BlockingReason.MIN_REPLICAS_REACHED)
    if is_daemonset_pod(pod):
        return Drainability(Outcome.DRAIN_OK)
    safe_to_evict = pod_annotations(pod).get(SAFE_TO_EVICT_ANNOTATION)
    if safe_to_evict == "true":
        return Drainability(Outcome.DRAIN_OK)
    if _terminal(pod):
        return Drainability(Outcome.DRAIN_OK)
    if safe_to_evict == "on-completion":
        return Drainability(Outcome.WAIT)
    replicated = owner is not None and (
        not context.skip_nodes_with_custom_controller_pods or owner.kind in _REPLICATED_KINDS
    )
    if not replicated:
        return Drainability(Outcome.BLOCK, BlockingReason.NOT_REPLICATED)
    if (
        context.skip_nodes_with_system_pods
        and namespace == "kube-system"
        and not context.pdbs.has_pdb(pod)
        and creation_time(pod) + context.blocking_system_pod_timeout > context.now
    ):
        return Drainability(Outcome.BLOCK, BlockingReason.UNMOVABLE_KUBE_SYSTEM_POD)
    if safe_to_evict == "false":
        return Drainability(Outcome.BLOCK, BlockingReason.NOT_SAFE_TO_EVICT_ANNOTATION)
    if context.skip_nodes_with_local_storage and _local_storage(pod):
        return Drainability(Outcome.BLOCK, BlockingReason.LOCAL_STORAGE_REQUESTED)
    for pdb in context.pdbs.matching(pod):
        if context.pdbs.remaining(pdb) < 1:
            return Drainability(Outcome.BLOCK, BlockingReason.NOT_ENOUGH_PDB)
    return Drainability(Outcome.UNDEFINED)


@dataclass
class NodePods:
    """A node's pods sorted by what a removal does to them (``GetPodsToMove``)."""

    to_move: list[Pod] = field(default_factory=list)
    daemon_sets: list[Pod] = field(default_factory=list)
    blocking: Pod | None = None
    reason: BlockingReason | None = None
    waiting: bool = False
    """A pod asks to finish first (``safe-to-evict: on-completion``)."""

    @property
    def blocked(self) -> bool:
        return self.blocking is not None


def classify_node_pods(pods: Iterable[Pod], context: DrainContext) -> NodePods:
    """Every pod through :func:`drainability`; stops at the first blocking pod."""
    result = NodePods()
    for pod in sorted(pods, key=pod_id):
        verdict = drainability(pod, context)
        if verdict.outcome is Outcome.BLOCK:
            result.blocking, result.reason = pod, verdict.reason
            return result
        if verdict.outcome is Outcome.SKIP:
            continue
        if is_daemonset_pod(pod):
            result.daemon_sets.append(pod)
            continue
        if verdict.outcome is Outcome.WAIT:
            result.waiting = True
        # upstream's GetPodsToMove lists every Undefined or DrainOk pod that is not a DaemonSet
        # pod — finished (terminal) pods included: they count against "empty" and are
        # re-placed by the removal simulation like any other
        result.to_move.append(pod)
    return result
