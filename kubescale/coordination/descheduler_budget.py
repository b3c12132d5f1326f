"""One brain (``--coordination one-brain``): the descheduler on the process's one disruption
ledger, the fit simulation and the cluster autoscaler's marks.

A descheduling cycle's ``PodEvictor`` asks an :class:`EvictionBudget` (the port; built by the
loop at the start of each cycle over its view of the cluster, :class:`ClusterView`, through
:class:`DeschedulerBudgets`): with one brain a :class:`LedgerBudget`, with ``separate``
:data:`UPSTREAM_BUDGET`, which adds nothing to upstream's counters.

* **limits** — ``maxNoOfPodsToEvictPerNode/PerNamespace/Total`` count this cycle's evictions
  plus every system's evictions in flight on the ledger
  (:class:`~kubescale.coordination.disruption_arbiter.DisruptionArbiter`): the VPA updater's and the
  cluster autoscaler's, and the descheduler's own from earlier cycles that the informer does not
  show yet. Upstream's counters start at zero each cycle and see no other program.
* **a workload's missing pods** — ``maxNoOfPodsToEvictPerNamespace`` is also the
  descheduler's limit on one workload (a controller's pods are all in its namespace), and as
  the other systems' limits it counts the workload's pods down or going: the arbiter's
  ``disrupted`` = ``max(desired - healthy, 0) + in_flight``, ``desired`` from the controller's
  spec (:func:`desired_replicas`, read through the shared cache), ``healthy`` its pods running
  and ready and not being deleted, ``in_flight`` every system's evictions of them (this
  cycle's too). Upstream's namespace counter starts at zero each cycle: while the replacements
  of the last cycle's evictions are not ready yet, it evicts the same number again.
* **PodDisruptionBudgets** — the arbiter's workload rule with the PDB's ``disruptionsAllowed``
  as the limit: the evictions in flight of pods it selects spend it (the status may count one
  already: counting it twice errs on the safe side for one watch delay, as the autoscaler's
  drain plan does). Upstream relies on the API server's 429 alone, which cannot see an
  eviction whose outcome was unknown.
* **nowhere better to go** — upstream's ``nodeFit`` turned on for every profile: the pod must
  fit, by the same fit simulation the cluster autoscaler and the scheduler extender ask
  (:class:`kubescale.scheduling.fit.ClusterSnapshot`), on another ready node; a pod that fits
  nowhere else is left where it runs (else it goes Pending, and the autoscaler adds a node for
  what the descheduler took off one).
* **no ping-pong with consolidation** — a pod on a node the cluster autoscaler is removing
  (``ToBeDeletedByClusterAutoscaler``) is left to the autoscaler's drain, and a node it is
  removing or has marked unneeded (``DeletionCandidateOfClusterAutoscaler``) is no better place:
  the descheduler never moves pods onto a node consolidation is about to empty, nor evicts what
  a drain is evicting. (``docs/coordination.md``.)

Pure over the view, the ledger's contents and ``now``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from kubescale.coordination.disruption_arbiter import (
    DisruptionArbiter,
    WorkloadView,
    disrupted,
    workload_allowance,
)
from kubescale.coordination.disruption_ledger import DisruptionKind, DisruptionLedger
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector, SelectorError, label_selector_from_dict
from kubescale.objects.views import Meta, meta, spec_of, status_of
from kubescale.scheduling.autoscaler_taints import (
    AUTOSCALER_MARKS,
    DELETION_CANDIDATE_TAINT,
    TO_BE_DELETED_TAINT,
)
from kubescale.scheduling.filters import is_node_ready

__all__ = [
    "ACTOR",
    "AUTOSCALER_MARKS",
    "BUDGET_IN_FLIGHT_TEXT",
    "DELETION_CANDIDATE_TAINT",
    "NODE_REMOVED_TEXT",
    "NO_BETTER_NODE_TEXT",
    "TO_BE_DELETED_TAINT",
    "UPSTREAM_BUDGET",
    "ClusterView",
    "EvictionBudget",
    "InFlight",
    "LedgerBudget",
    "Refusal",
    "UpstreamBudget",
    "WorkloadKey",
    "desired_replicas",
    "marked_by_autoscaler",
    "pdb_allowance",
]

ACTOR: Final = "descheduler"
"""The descheduler's name on the disruption ledger."""

WorkloadKey = tuple[str, str, str]
"""``(namespace, kind, name)`` of a pod's controller."""

NO_BETTER_NODE_TEXT: Final = "pod fits on no other node"
NODE_REMOVED_TEXT: Final = "node is being removed by the cluster autoscaler"
BUDGET_IN_FLIGHT_TEXT: Final = "disruption budget spent by evictions in flight"


class Refusal(enum.Enum):
    """Why one brain refuses an eviction the limits allow (the text is the result label of
    ``descheduler_pods_evicted_total``, as the descheduler's own results)."""

    NO_BETTER_NODE = NO_BETTER_NODE_TEXT
    NODE_REMOVED = NODE_REMOVED_TEXT
    BUDGET_IN_FLIGHT = BUDGET_IN_FLIGHT_TEXT


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """Evictions on the process's ledger, outside this cycle's own, that the limits count."""

    total: int = 0
    node: int = 0
    namespace: int = 0


class EvictionBudget(Protocol):
    """The port: what the coordination adds to a descheduling cycle's limits."""

    def in_flight(self, *, node: str, namespace: str, exclude: Set[str]) -> InFlight:
        """Evictions in flight in the cluster, on ``node`` and in ``namespace`` (every
        system's), leaving out the pods of uids ``exclude`` (this cycle's own, counted
        already)."""
        ...

    def refuse(self, pod: Pod) -> Refusal | None:
        """Why ``pod`` must not be evicted although the limits allow it, if so."""
        ...

    def workload_disrupted(self, pod: Pod) -> int | None:
        """Pods of ``pod``'s workload down or going (missing, and evictions in flight of
        every system, this cycle's included); ``None`` when its size is unknown."""
        ...

    def refresh(self) -> None:
        """Re-read the coordination layer's record, on the loop's thread between two steps
        of the cycle (the steps run on a worker thread and read a copy taken here:
        :mod:`kubescale.runtime.off_loop`), so the next step counts every eviction made up to
        now."""
        ...


class ClusterView(Protocol):
    """What :class:`LedgerBudget` reads of a cycle's view of the cluster (the descheduler's
    ``CycleView`` is one)."""

    @property
    def pods(self) -> Sequence[Pod]: ...

    @property
    def all_nodes(self) -> Sequence[Node]: ...

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]: ...

    @property
    def node_by_name(self) -> Mapping[str, Node]: ...

    def pods_on(self, node: str) -> Sequence[Pod]: ...

    def fits_any(self, pod: Pod, candidates: Iterable[Node], *, other_nodes_only: bool) -> bool: ...


class UpstreamBudget:
    """``separate``: upstream's descheduler — its counters start at zero each cycle, it sees
    no other system's evictions, the workloads' missing pods nor the autoscaler's marks, and
    evicts without the fit check."""

    def in_flight(self, *, node: str, namespace: str, exclude: Set[str]) -> InFlight:
        return InFlight()

    def refuse(self, pod: Pod) -> Refusal | None:
        return None

    def workload_disrupted(self, pod: Pod) -> int | None:
        return None

    def refresh(self) -> None:
        return None


UPSTREAM_BUDGET: Final = UpstreamBudget()


_SPEC_REPLICAS_KINDS: Final = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
_NO_SIZE_KINDS: Final = frozenset({"Job", "CronJob"})


def desired_replicas(kind: str, controller: Mapping[str, Any] | None) -> int | None:
    """How many pods ``controller`` (a cached object of ``kind``, or a ``/scale`` for another
    kind) wants, as the VPA updater reads it: ``spec.replicas``, a DaemonSet's
    ``status.desiredNumberScheduled``; ``None`` when unknown or meaningless (a Job runs to
    completion: a pod that is gone may be done, not missing)."""
    if controller is None or kind in _NO_SIZE_KINDS:
        return None
    if kind == "DaemonSet":
        value = status_of(controller).get("desiredNumberScheduled")
    else:
        value = spec_of(controller).get("replicas")
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def workload_key(pod: Pod) -> WorkloadKey | None:
    view = meta(pod)
    controller = view.controller
    if controller is None:
        return None
    return (view.namespace, controller.kind, controller.name)


def is_available(pod: Pod) -> bool:
    """Running, ready (when it says) and not being deleted: counted healthy."""
    if meta(pod).deleting or status_of(pod).get("phase") != "Running":
        return False
    for condition in status_of(pod).get("conditions") or ():
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return True


def _taint_keys(node: Node) -> set[str]:
    return {str(t.get("key", "")) for t in spec_of(node).get("taints") or ()}


def marked_by_autoscaler(node: Node, marks: Set[str] = AUTOSCALER_MARKS) -> bool:
    """Whether ``node`` carries one of the cluster autoscaler's ``marks``."""
    return bool(_taint_keys(node) & marks)


def pdb_allowance(*, disruptions_allowed: int, in_flight: int) -> int:
    """The arbiter's workload rule with a PDB's ``disruptionsAllowed`` as the limit: nothing
    counted missing (the status did), ``in_flight`` evictions of its pods spend it."""
    view = WorkloadView(desired=0, healthy=0, in_flight=in_flight)
    return workload_allowance(view=view, max_disrupted=disruptions_allowed)


class LedgerBudget:
    """The one-brain :class:`EvictionBudget` of one cycle (module docstring)."""

    def __init__(
        self,
        *,
        view: ClusterView,
        arbiter: DisruptionArbiter,
        now: datetime,
        desired: Mapping[WorkloadKey, int] | None = None,
        source: DisruptionLedger | None = None,
    ) -> None:
        """``desired``: each workload's desired replicas (:func:`desired_replicas`); a
        workload not in it is not counted by the workload rule. ``source``: the process's
        ledger, of which :meth:`refresh` reads a fresh copy into the arbiter (the budget of a
        cycle computed on a worker thread reads a copy: ``arbiter`` is over one); without it
        the arbiter reads the ledger itself and :meth:`refresh` has nothing to do."""
        self.view = view
        self.arbiter = arbiter
        self._source = source
        self.now = now
        self.desired = desired or {}
        self._workload_pods: dict[WorkloadKey, list[Pod]] | None = None
        self._destinations: list[Node] = [
            n for n in view.all_nodes if is_node_ready(n) and not marked_by_autoscaler(n)
        ]
        self._pdbs: list[tuple[str, LabelSelector, int]] = []
        for pdb in view.pdbs:
            try:
                selector = label_selector_from_dict(spec_of(pdb).get("selector"))
            except SelectorError:
                continue
            self._pdbs.append(
                (
                    str(Meta(pdb).raw.get("namespace", "")),
                    selector,
                    int(status_of(pdb).get("disruptionsAllowed") or 0),
                )
            )

    def _evicting(self, pods: Iterable[Pod], exclude: Set[str]) -> int:
        return self.arbiter.in_flight_evictions(
            (p for p in pods if str(Meta(p).raw.get("uid", "")) not in exclude),
            actor=ACTOR,
            now=self.now,
        )

    def refresh(self) -> None:
        if self._source is not None:
            self.arbiter = DisruptionArbiter(self._source.detached())

    def in_flight(self, *, node: str, namespace: str, exclude: Set[str]) -> InFlight:
        entries = [
            e
            for e in self.arbiter.ledger.in_flight(now=self.now, actor=ACTOR)
            if e.kind is DisruptionKind.EVICTION and e.uid not in exclude
        ]
        return InFlight(
            total=len(entries),
            node=self._evicting(self.view.pods_on(node), exclude) if node else 0,
            namespace=sum(1 for e in entries if e.namespace == namespace),
        )

    def workload_disrupted(self, pod: Pod) -> int | None:
        """The arbiter's ``disrupted`` for ``pod``'s workload: its pods missing (desired −
        healthy) plus every system's evictions in flight of its healthy pods (this cycle's on
        the ledger too); ``None`` when the workload's size is not known."""
        key = workload_key(pod)
        desired = self.desired.get(key) if key is not None else None
        if key is None or desired is None:
            return None
        if self._workload_pods is None:
            grouped: dict[WorkloadKey, list[Pod]] = {}
            for other in self.view.pods:
                other_key = workload_key(other)
                if other_key is not None:
                    grouped.setdefault(other_key, []).append(other)
            self._workload_pods = grouped
        healthy = [p for p in self._workload_pods.get(key, ()) if is_available(p)]
        return disrupted(
            self.arbiter.view(desired=desired, healthy=healthy, actor=ACTOR, now=self.now)
        )

    def refuse(self, pod: Pod) -> Refusal | None:
        current = str(spec_of(pod).get("nodeName") or "")
        node = self.view.node_by_name.get(current)
        if node is not None and marked_by_autoscaler(node, {TO_BE_DELETED_TAINT}):
            return Refusal.NODE_REMOVED
        if not self.view.fits_any(pod, self._destinations, other_nodes_only=True):
            return Refusal.NO_BETTER_NODE
        meta = Meta(pod).raw
        namespace, labels = str(meta.get("namespace", "")), meta.get("labels") or {}
        for pdb_namespace, selector, allowed in self._pdbs:
            if pdb_namespace != namespace or not selector.matches(labels):
                continue
            covered = [
                p
                for p in self.view.pods
                if Meta(p).raw.get("namespace") == namespace
                and selector.matches(Meta(p).raw.get("labels") or {})
            ]
            in_flight = self._evicting(covered, frozenset())
            if pdb_allowance(disruptions_allowed=allowed, in_flight=in_flight) < 1:
                return Refusal.BUDGET_IN_FLIGHT
        return None
