"""The one disruption arbiter: how many more pods of a workload (or of the cluster) a system may
disrupt now, counting every system's disruptions on one ledger.

Upstream's VPA updater, descheduler and cluster autoscaler each evict on their own budget: the
updater's ``--eviction-tolerance`` and ``--min-replicas``, the descheduler's
``maxNoOfPodsToEvictPerNamespace``/``...Total``, the cluster autoscaler's drain (bounded only by
PodDisruptionBudgets). Each counts the pods it sees unavailable, but not the evictions another
program made a moment ago that its informer does not show yet — so within a loop, and across
loops until the watch catches up, their budgets add up: a workload the updater would take 3 of 6
pods from and the descheduler 2 can lose 5.

The rule (``--coordination one-brain``): a system ``a`` with a limit ``L_a`` (at most ``L_a`` pods
of the workload disrupted at once) may disrupt one more pod while

    disrupted = max(desired - healthy, 0) + in_flight  <  L_a

where ``desired`` is the workload's configured replica count, ``healthy`` the pods the informer
shows available (running, not being deleted), and ``in_flight`` the disruptions of those healthy
pods that the ledger holds (:class:`~.disruption_ledger.DisruptionLedger`) — every
system's, in flight until the informer shows their effect. Each grant is recorded on the ledger
before the next question, so ``disrupted`` is the true count of pods down or going, and no
interleaving of systems takes it above ``max_a L_a``: together they never take a workload below
what the most permissive one of them alone would allow. A PodDisruptionBudget is one more limit
that every system obeys (the API server enforces it on each eviction).

The same rule per cluster (or namespace) with ``desired - healthy`` left out: the descheduler's
total limits count every system's in-flight evictions.

``--coordination separate`` (upstream's behaviour): ``in_flight`` holds only the asking system's
own disruptions (:attr:`DisruptionLedger.shared` is false) — the budgets add up again.

Pure: plain numbers in, a number out; the ledger adapter (:class:`DisruptionArbiter`) only reads
the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from kubescale.coordination.disruption_ledger import DisruptionKind, DisruptionLedger
from kubescale.objects.pod import Pod
from kubescale.objects.views import meta

__all__ = [
    "DisruptionArbiter",
    "WorkloadView",
    "cluster_allowance",
    "disrupted",
    "workload_allowance",
]


@dataclass(frozen=True, kw_only=True)
class WorkloadView:
    """One workload as a system asking sees it."""

    desired: int
    """Configured replicas (``/scale``, or the live pods when that is more)."""
    healthy: int
    """Pods the informer shows available: running and not being deleted."""
    in_flight: int
    """Disruptions on the ledger (that the asker counts) of those healthy pods."""


def disrupted(view: WorkloadView) -> int:
    """Pods of the workload down or going: the missing ones plus those in flight."""
    return max(view.desired - view.healthy, 0) + view.in_flight


def workload_allowance(*, view: WorkloadView, max_disrupted: int) -> int:
    """How many more pods the asker may disrupt under its own limit ``max_disrupted``."""
    return max(max_disrupted - disrupted(view), 0)


def cluster_allowance(*, in_flight: int, limit: int | None) -> int | None:
    """How many more the asker may disrupt under a cluster (or namespace) limit; ``None`` for
    no limit."""
    if limit is None:
        return None
    return max(limit - in_flight, 0)


class DisruptionArbiter:
    """The rule above over the process's ledger (one per process, in the shared cache)."""

    def __init__(self, ledger: DisruptionLedger) -> None:
        self.ledger = ledger

    @property
    def shared(self) -> bool:
        return self.ledger.shared

    def in_flight_evictions(self, pods: Iterable[Pod], *, actor: str, now: datetime) -> int:
        """How many of ``pods`` (as the informer shows them) have an eviction in flight that
        ``actor`` counts."""
        count = 0
        for pod in pods:
            entry = self.ledger.pending(pod, now=now, actor=actor)
            if entry is not None and entry.kind is DisruptionKind.EVICTION:
                count += 1
        return count

    def view(
        self, *, desired: int, healthy: Iterable[Pod], actor: str, now: datetime
    ) -> WorkloadView:
        pods = [pod for pod in healthy if not meta(pod).deleting]
        return WorkloadView(
            desired=desired,
            healthy=len(pods),
            in_flight=self.in_flight_evictions(pods, actor=actor, now=now),
        )

    def cluster_in_flight(self, *, actor: str, now: datetime, namespace: str | None = None) -> int:
        """Evictions in flight in the cluster (or ``namespace``) that ``actor`` counts."""
        return sum(
            1
            for entry in self.ledger.in_flight(now=now, actor=actor)
            if entry.kind is DisruptionKind.EVICTION
            and (namespace is None or entry.namespace == namespace)
        )
