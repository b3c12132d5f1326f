"""The ports: what the systems ask the coordination layer, as small :class:`typing.Protocol`\\ s.

A system holds a port and asks it; it never asks which coordination the process runs. Each port
has two implementations, picked once at wiring time by ``--coordination``
(:func:`kubescale.coordination.brain.brain_of`): :mod:`.one_brain` (the systems decide
together) and :mod:`.separate` (upstream's answers, each system alone). Which system asks which
port (``docs/coordination.md``):

============================  =====================================================  ==========
port                          question                                               asked by
============================  =====================================================  ==========
:class:`DisruptionGate`       is another system evicting this pod; which evictions   autoscaler
                              in flight spend the PodDisruptionBudgets
:class:`DeschedulerBudgets`   what the coordination adds to a cycle's limits         descheduler
:class:`RecentMoves`          the descheduler's recent moves scale-down must keep    autoscaler
:class:`ResourceOwnership`    which resources of a workload the HPA owns (the VPA    webhook,
                              leaves them alone)                                     updater
:class:`RequestsAhead`        a pod with the requests the VPA will give it           autoscaler
:class:`RequestsAheadPolicy`  whether those answers are asked for, and whether the   autoscaler,
                              updater replaces pending pods for them                 updater
:class:`PlacementVeto`        which nodes a pod must not be placed on                extender
============================  =====================================================  ==========
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.pod import Pod
from kubescale.objects.views import ObjectRef

from .descheduler_budget import ClusterView, EvictionBudget, WorkloadKey
from .disruption_ledger import Disruption
from .eviction_memory import Remembered
from .recent_moves import DescheduledMove
from .requests_ahead import AheadAnswer

__all__ = [
    "DeschedulerBudgets",
    "DisruptionGate",
    "PlacementVeto",
    "RecentMoves",
    "RequestsAhead",
    "RequestsAheadPolicy",
    "ResourceOwnership",
]


class DisruptionGate(Protocol):
    """The disruptions of the other systems a system's own drain must count."""

    def already_going(self, pod: Pod, *, now: datetime) -> bool:
        """Whether another system's eviction of ``pod`` is in flight (do not evict it again)."""
        ...

    def evictions_in_flight(self, *, now: datetime) -> list[Disruption]:
        """Every eviction in flight that the PodDisruptionBudgets' allowance must count."""
        ...

    def possibly_going(self, *, now: datetime) -> list[tuple[str, str]]:
        """``(namespace, name)`` of every pod :meth:`already_going` may answer True for (a
        superset: each is asked again): a scan asks only about these, not about every pod."""
        ...


class DeschedulerBudgets(Protocol):
    """The descheduler's cycle budget (:mod:`.descheduler_budget`)."""

    @property
    def counts_missing_pods(self) -> bool:
        """Whether :meth:`budget` reads the workloads' desired replicas (the descheduler then
        requests its controllers' informers)."""
        ...

    def budget(
        self,
        *,
        view: ClusterView,
        now: datetime,
        desired: Callable[[], Mapping[WorkloadKey, int]],
        snapshot: bool = False,
    ) -> EvictionBudget:
        """The budget of one cycle over ``view``; ``desired`` is asked only when counted.
        ``snapshot``: the budget reads a copy of the coordination layer's record, renewed by
        :meth:`EvictionBudget.refresh` (for a cycle whose steps run on a worker thread while
        the loop's thread goes on writing the record)."""
        ...


class RecentMoves(Protocol):
    """The descheduler's moves the cluster autoscaler's scale-down must not undo
    (:mod:`.recent_moves`)."""

    def descheduled_moves(self, *, now: datetime, within: timedelta) -> list[DescheduledMove]:
        """The descheduler's evictions of the last ``within``."""
        ...


class ResourceOwnership(Protocol):
    """Which resources of a workload an HPA owns (:mod:`.resource_ownership`)."""

    def vpa_leaves_hpa_resources(self, *, requested: bool) -> bool:
        """Whether the VPA leaves alone the resources an HPA scales its workload on
        (``requested``: the webhook's ``--avoid-hpa-conflict``)."""
        ...

    def hpa_owned(
        self, hpas: Iterable[HorizontalPodAutoscaler], workload: ObjectRef | None
    ) -> frozenset[str]:
        """The resources (``cpu``/``memory``) of ``workload`` that ``hpas`` own."""
        ...


class RequestsAhead(Protocol):
    """What the VPA will give a pod (the webhook's decision): the VPA provides it."""

    def requests_for(self, pod: Pod) -> Pod:
        """``pod`` with the requests the VPA will give it, or ``pod`` itself."""
        ...

    def answer_for(self, pod: Pod) -> AheadAnswer:
        """:meth:`requests_for`'s answer with what it was decided from."""
        ...

    def still_current(self, answer: AheadAnswer) -> bool:
        """Whether the same pod would get ``answer`` again now (an answer that depends on the
        pod alone always would)."""
        ...


class RequestsAheadPolicy(Protocol):
    """Whether the autoscaler binpacks with :class:`RequestsAhead` (:mod:`.requests_ahead`)."""

    @property
    def updater_replaces_pending(self) -> bool:
        """Whether the updater replaces a pod the scheduler could not place (so that it gets
        the requests the autoscaler sized for)."""
        ...

    def provider(self, build: Callable[[], RequestsAhead] | None) -> RequestsAhead | None:
        """The answers the autoscaler binpacks with (``build`` the VPA's provider, called only
        when used); ``None``: the pods' own requests."""
        ...


class PlacementVeto(Protocol):
    """Nodes a pod must not be placed on, with why (the descheduler's recent evictions, kept by
    :class:`~.eviction_memory.EvictionMemory`)."""

    def refused_nodes(self, pod: Pod, now: datetime) -> Mapping[str, Remembered]:
        """Node → why, for each node ``pod`` must not go to."""
        ...
