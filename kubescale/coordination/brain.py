"""The process's one brain: the coordination state and the ports' implementations, picked once.

``--coordination`` (:mod:`kubescale.base.coordination`) is read here and nowhere else: a
:class:`Brain` holds the process's one disruption ledger, the descheduler's and extender's
board, and an implementation of each port of :mod:`.ports` — :mod:`.one_brain`'s or
:mod:`.separate`'s. The systems take their ports from :func:`brain_of` when they are built
(every component gets the process's :class:`~kubescale.kube.shared_cache.SharedCache`, which
keeps the one :class:`Brain`, :meth:`~kubescale.kube.shared_cache.SharedCache.one_per_process`);
they contain no branch on the setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubescale.base.coordination import Coordination
from kubescale.kube.shared_cache import SharedCache

from .descheduling_board import DeschedulingBoard
from .disruption_ledger import DisruptionLedger
from .one_brain import (
    LedgerBudgets,
    LedgerGate,
    LedgerMoves,
    RecentEvictionsVeto,
    RequestsAheadOfPods,
    VpaYieldsToHpa,
)
from .ports import (
    DeschedulerBudgets,
    DisruptionGate,
    PlacementVeto,
    RecentMoves,
    RequestsAheadPolicy,
    ResourceOwnership,
)
from .separate import NoMoves, NoVeto, OwnBudgets, OwnEvictionsOnly, SpecRequests, VpaOwnsAll

__all__ = ["Brain", "brain_of"]


@dataclass(frozen=True, kw_only=True)
class Brain:
    """One process's coordination (module docstring)."""

    coordination: Coordination
    ledger: DisruptionLedger
    """Every eviction and resize of every system (counted by each as the setting says)."""
    board: DeschedulingBoard
    """The descheduler's evictions and readings, for the scheduler extender."""
    gate: DisruptionGate
    descheduler_budgets: DeschedulerBudgets
    recent_moves: RecentMoves
    ownership: ResourceOwnership
    requests_ahead: RequestsAheadPolicy
    placement_veto: PlacementVeto

    @classmethod
    def build(cls, coordination: Coordination) -> Brain:
        """The ports' implementations for ``coordination`` (the one place that picks them)."""
        shared = coordination.shared
        ledger = DisruptionLedger(shared=shared)
        board = DeschedulingBoard()
        if shared:
            return cls(
                coordination=coordination,
                ledger=ledger,
                board=board,
                gate=LedgerGate(ledger),
                descheduler_budgets=LedgerBudgets(ledger),
                recent_moves=LedgerMoves(ledger),
                ownership=VpaYieldsToHpa(),
                requests_ahead=RequestsAheadOfPods(),
                placement_veto=RecentEvictionsVeto(board),
            )
        return cls(
            coordination=coordination,
            ledger=ledger,
            board=board,
            gate=OwnEvictionsOnly(),
            descheduler_budgets=OwnBudgets(),
            recent_moves=NoMoves(),
            ownership=VpaOwnsAll(),
            requests_ahead=SpecRequests(),
            placement_veto=NoVeto(),
        )


def brain_of(cache: SharedCache) -> Brain:
    """The one :class:`Brain` of the process whose shared cache is ``cache``."""
    return cache.one_per_process(Brain, lambda: Brain.build(cache.coordination))
