"""What a strategy plugin is handed: upstream's ``frameworktypes.Handle`` for one profile.

``filter``/``pre_eviction_filter`` are the AND of the profile's Filter and PreEvictionFilter
plugins (only ``DefaultEvictor`` exists; a profile that disables it filters nothing);
``evict`` goes through the cycle's shared :class:`~.eviction.PodEvictor`. A strategy is a
generator function ``strategy(ctx, args)`` that ``yield from ctx.evict(pod)`` for each pod it
evicts (see :mod:`.eviction`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from kubescale.objects.pod import Pod
from kubescale.scheduling.cycle_view import CycleView
from kubescale.scheduling.evictor import DefaultEvictor

from .eviction import Evicting, EvictionRequest, PodEvictor

__all__ = ["Strategy", "StrategyContext", "StrategyError", "StrategyRun"]

StrategyRun = Generator[EvictionRequest, bool, None]
Strategy = Callable[["StrategyContext", Any], StrategyRun]


class StrategyError(Exception):
    """A plugin that cannot run this cycle (upstream returns a ``Status`` with ``Err``)."""


@dataclass
class StrategyContext:
    view: CycleView
    profile: str
    strategy: str
    evictor: DefaultEvictor
    pod_evictor: PodEvictor
    use_filter: bool = True
    use_pre_eviction_filter: bool = True

    def filter(self, pod: Pod) -> bool:
        return not self.use_filter or self.evictor.filter(pod)

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return not self.use_pre_eviction_filter or self.evictor.pre_eviction_filter(pod)

    def evictable(self, pod: Pod) -> bool:
        """``Filter ∧ PreEvictionFilter``."""
        return self.filter(pod) and self.pre_eviction_filter(pod)

    def evict(self, pod: Pod, reason: str = "") -> Evicting:
        return self.pod_evictor.evict(
            pod, strategy=self.strategy, profile=self.profile, reason=reason
        )

    def node_limit_exceeded(self, node: str) -> bool:
        return self.pod_evictor.node_limit_exceeded(node)
