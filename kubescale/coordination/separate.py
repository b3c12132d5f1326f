"""``--coordination separate``: the ports' answers of upstream's separate programs.

Each system alone: its own budget (the ledger, not ``shared``, shows a system only its own
disruptions), no HPA/VPA ownership (the VPA sets what the HPA divides by unless
``--avoid-hpa-conflict``), the pods' spec requests for binpacking, the descheduler without the
fit check and without the other systems' evictions, no protection of the descheduler's moves,
no veto on kube-scheduler's placements (upstream's scheduler knows nothing of the descheduler).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.pod import Pod
from kubescale.objects.views import ObjectRef

from .descheduler_budget import UPSTREAM_BUDGET, ClusterView, EvictionBudget, WorkloadKey
from .disruption_ledger import Disruption
from .eviction_memory import Remembered
from .ports import RequestsAhead
from .recent_moves import DescheduledMove

__all__ = ["NoMoves", "NoVeto", "OwnBudgets", "OwnEvictionsOnly", "SpecRequests", "VpaOwnsAll"]


class OwnEvictionsOnly:
    """:class:`~.ports.DisruptionGate`: upstream's autoscaler sees only the PDBs' status."""

    def already_going(self, pod: Pod, *, now: datetime) -> bool:
        return False

    def evictions_in_flight(self, *, now: datetime) -> list[Disruption]:
        return []

    def possibly_going(self, *, now: datetime) -> list[tuple[str, str]]:
        return []


class OwnBudgets:
    """:class:`~.ports.DeschedulerBudgets`: upstream's counters, from zero each cycle."""

    @property
    def counts_missing_pods(self) -> bool:
        return False

    def budget(
        self,
        *,
        view: ClusterView,
        now: datetime,
        desired: Callable[[], Mapping[WorkloadKey, int]],
        snapshot: bool = False,
    ) -> EvictionBudget:
        return UPSTREAM_BUDGET


class NoMoves:
    """:class:`~.ports.RecentMoves`: upstream's autoscaler knows nothing of the descheduler."""

    def descheduled_moves(self, *, now: datetime, within: timedelta) -> list[DescheduledMove]:
        return []


class VpaOwnsAll:
    """:class:`~.ports.ResourceOwnership`: the VPA does not know about the HPA (only
    ``--avoid-hpa-conflict``, upstream's flag, makes the webhook look)."""

    def vpa_leaves_hpa_resources(self, *, requested: bool) -> bool:
        return requested

    def hpa_owned(
        self, hpas: Iterable[HorizontalPodAutoscaler], workload: ObjectRef | None
    ) -> frozenset[str]:
        return frozenset()


class SpecRequests:
    """:class:`~.ports.RequestsAheadPolicy`: the autoscaler reads the requests in the pod
    spec; the updater looks at scheduled pods only."""

    @property
    def updater_replaces_pending(self) -> bool:
        return False

    def provider(self, build: Callable[[], RequestsAhead] | None) -> RequestsAhead | None:
        return None


class NoVeto:
    """:class:`~.ports.PlacementVeto`: upstream's kube-scheduler knows nothing of the
    descheduler's evictions — it may put a replacement straight back on the node its pod was
    evicted from (descheduler issues #994, #655, #626, #424, #335)."""

    def refused_nodes(self, pod: Pod, now: datetime) -> Mapping[str, Remembered]:
        return {}
