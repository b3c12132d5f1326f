"""One descheduling cycle as a pure generator (upstream ``runDeschedulerLoop``/``runProfiles``).

``descheduling_cycle(policy=..., view=...)`` yields an
:class:`~.framework.eviction.EvictionRequest` for every eviction a plugin asks for and expects
``True`` back when it happened (``send``); it returns a :class:`CycleReport`. The loop answers by
calling the Eviction API, ``--dry-run`` and tests answer without one (:func:`run_cycle`).

Upstream's order and rules:

1. with at most one node, the cycle is skipped (reason in :attr:`CycleReport.skipped`);
2. the eviction counters start at zero (:class:`~.framework.eviction.PodEvictor` with the
   policy's ``maxNoOfPodsToEvictPerNode/PerNamespace/Total``);
3. every profile's Deschedule plugins, profile after profile, then every profile's Balance
   plugins, each in its ``enabled`` order (issue #979);
4. the coordination layer's ``budget`` (:mod:`kubescale.coordination.descheduler_budget`;
   upstream's, adding nothing, by default): with one brain the limits also count every system's
   evictions in flight, and an eviction the limits allow may still be refused (no better node,
   a node the cluster autoscaler is removing, a PDB spent in flight);
5. a plugin error is recorded and the cycle goes on; a profile whose evictor cannot be built
   (its ``priorityThreshold.name`` names no PriorityClass) is skipped with an error.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from kubescale.coordination.descheduler_budget import UPSTREAM_BUDGET, EvictionBudget
from kubescale.scheduling.cycle_view import CycleView
from kubescale.scheduling.evictor import DefaultEvictor, EvictorError
from kubescale.scheduling.policy.policy_loading import (
    BALANCE,
    DEFAULT_EVICTOR,
    DESCHEDULE,
    DeschedulerPolicy,
)

from .framework.eviction import (
    EvictionRecord,
    EvictionRequest,
    EvictionResult,
    PodEvictor,
)
from .framework.strategy_context import StrategyContext, StrategyError
from .strategies.registry import STRATEGIES

__all__ = ["Cycle", "CycleReport", "StrategyTiming", "descheduling_cycle", "run_cycle"]

SKIPPED_FEW_NODES = (
    "The cluster size is 0 or 1 meaning eviction causes service disruption or degradation. "
    "So aborting."
)


@dataclass(frozen=True, kw_only=True)
class StrategyTiming:
    profile: str
    strategy: str
    seconds: float
    error: str = ""


@dataclass
class CycleReport:
    """What a cycle did."""

    skipped: str = ""
    evictions: list[EvictionRecord] = field(default_factory=list)
    strategies: list[StrategyTiming] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def evicted(self) -> list[EvictionRecord]:
        return [r for r in self.evictions if r.result is EvictionResult.EVICTED]


Cycle = Generator[EvictionRequest, bool, CycleReport]


def descheduling_cycle(
    *,
    policy: DeschedulerPolicy,
    view: CycleView,
    timer: Callable[[], float] | None = None,
    budget: EvictionBudget = UPSTREAM_BUDGET,
) -> Cycle:
    """One cycle (module docstring)."""
    report = CycleReport()
    if len(view.nodes) <= 1:
        report.skipped = SKIPPED_FEW_NODES
        return report
    pod_evictor = PodEvictor(
        max_per_node=policy.max_pods_per_node,
        max_per_namespace=policy.max_pods_per_namespace,
        max_total=policy.max_pods_total,
        budget=budget,
    )
    report.evictions = pod_evictor.records
    evictors: dict[str, DefaultEvictor] = {}
    for profile in policy.profiles:
        try:
            evictors[profile.name] = DefaultEvictor(profile.evictor, view)
        except EvictorError as err:
            report.errors.append(f"profile {profile.name}: {err}")
    clock = timer or (lambda: 0.0)
    for point in (DESCHEDULE, BALANCE):
        for profile in policy.profiles:
            evictor = evictors.get(profile.name)
            if evictor is None:
                continue
            names = profile.deschedule if point == DESCHEDULE else profile.balance
            for name in names:
                ctx = StrategyContext(
                    view=view,
                    profile=profile.name,
                    strategy=name,
                    evictor=evictor,
                    pod_evictor=pod_evictor,
                    use_filter=DEFAULT_EVICTOR in profile.filter,
                    use_pre_eviction_filter=DEFAULT_EVICTOR in profile.pre_eviction_filter,
                )
                started = clock()
                error = ""
                try:
                    yield from STRATEGIES[name](ctx, profile.args[name])
                except StrategyError as err:
                    error = str(err)
                    report.errors.append(f"profile {profile.name}, plugin {name}: {err}")
                report.strategies.append(
                    StrategyTiming(
                        profile=profile.name, strategy=name, seconds=clock() - started, error=error
                    )
                )
    return report


def run_cycle(cycle: Cycle, answer: Callable[[EvictionRequest], bool]) -> CycleReport:
    """Drive ``cycle`` synchronously, ``answer`` deciding each eviction's outcome."""
    try:
        request = next(cycle)
        while True:
            request = cycle.send(answer(request))
    except StopIteration as stop:
        report: CycleReport = stop.value
        return report
