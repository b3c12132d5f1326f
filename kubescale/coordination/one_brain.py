"""``--coordination one-brain``: the ports' answers when the systems decide together.

Each class answers one port of :mod:`.ports` from the process's one
:class:`~.disruption_ledger.DisruptionLedger` (``shared``: every system counts every system's
disruptions) and the pure rules of this package. ``docs/coordination.md`` says why each rule
is what it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.pod import Pod
from kubescale.objects.views import ObjectRef

from .descheduler_budget import ClusterView, EvictionBudget, LedgerBudget, WorkloadKey
from .descheduling_board import DeschedulingBoard
from .disruption_arbiter import DisruptionArbiter
from .disruption_ledger import Disruption, DisruptionKind, DisruptionLedger
from .eviction_memory import Remembered
from .ports import RequestsAhead
from .recent_moves import DESCHEDULER_ACTOR, DescheduledMove, moves_from_ledger
from .resource_ownership import hpas_scaled_resources

__all__ = [
    "LedgerBudgets",
    "LedgerGate",
    "LedgerMoves",
    "RecentEvictionsVeto",
    "RequestsAheadOfPods",
    "VpaYieldsToHpa",
]


@dataclass(frozen=True)
class LedgerGate:
    """:class:`~.ports.DisruptionGate`: every system's evictions on the one ledger."""

    ledger: DisruptionLedger

    def already_going(self, pod: Pod, *, now: datetime) -> bool:
        return self.ledger.pending(pod, now=now) is not None

    def evictions_in_flight(self, *, now: datetime) -> list[Disruption]:
        return [e for e in self.ledger.in_flight(now=now) if e.kind is DisruptionKind.EVICTION]

    def possibly_going(self, *, now: datetime) -> list[tuple[str, str]]:
        # already_going is True only for a pod with an entry in the ledger (by uid): the
        # entries' pods, each recorded with its namespace and name, are every candidate.
        return list(dict.fromkeys((e.namespace, e.name) for e in self.ledger.in_flight(now=now)))


@dataclass(frozen=True)
class LedgerBudgets:
    """:class:`~.ports.DeschedulerBudgets`: a :class:`~.descheduler_budget.LedgerBudget` per
    cycle, counting the workloads' missing pods."""

    ledger: DisruptionLedger

    @property
    def counts_missing_pods(self) -> bool:
        return True

    def budget(
        self,
        *,
        view: ClusterView,
        now: datetime,
        desired: Callable[[], Mapping[WorkloadKey, int]],
        snapshot: bool = False,
    ) -> EvictionBudget:
        if not snapshot:
            return LedgerBudget(
                view=view, arbiter=DisruptionArbiter(self.ledger), now=now, desired=desired()
            )
        # the cycle's steps read a copy (they run on a worker thread); refresh() renews it
        return LedgerBudget(
            view=view,
            arbiter=DisruptionArbiter(self.ledger.detached()),
            now=now,
            desired=desired(),
            source=self.ledger,
        )


@dataclass(frozen=True)
class LedgerMoves:
    """:class:`~.ports.RecentMoves`: the descheduler's evictions in the ledger's history."""

    ledger: DisruptionLedger

    def descheduled_moves(self, *, now: datetime, within: timedelta) -> list[DescheduledMove]:
        return moves_from_ledger(
            self.ledger.recent(now=now, within=within, actor=DESCHEDULER_ACTOR)
        )


class VpaYieldsToHpa:
    """:class:`~.ports.ResourceOwnership`: the HPA owns the resources it scales on; the VPA
    leaves them alone whatever ``--avoid-hpa-conflict`` says."""

    def vpa_leaves_hpa_resources(self, *, requested: bool) -> bool:
        return True

    def hpa_owned(
        self, hpas: Iterable[HorizontalPodAutoscaler], workload: ObjectRef | None
    ) -> frozenset[str]:
        return hpas_scaled_resources(hpas, workload)


class RequestsAheadOfPods:
    """:class:`~.ports.RequestsAheadPolicy`: the autoscaler binpacks with the VPA's answers,
    and the updater replaces pending pods so that they get them."""

    @property
    def updater_replaces_pending(self) -> bool:
        return True

    def provider(self, build: Callable[[], RequestsAhead] | None) -> RequestsAhead | None:
        return build() if build is not None else None


@dataclass(frozen=True)
class RecentEvictionsVeto:
    """:class:`~.ports.PlacementVeto`: the nodes the descheduler just evicted a pod of the same
    owner from — the scheduler extender's :class:`~.eviction_memory.EvictionMemory`, on the
    board, which the descheduler's evictions fill (none while no extender runs)."""

    board: DeschedulingBoard

    def refused_nodes(self, pod: Pod, now: datetime) -> Mapping[str, Remembered]:
        memory = self.board.memory
        return memory.refused_nodes(pod, now) if memory is not None else {}
