"""The loop the process runs for its shared cache itself (not for any one component).

The ``/scale`` lookups (:class:`~kubescale.kube.scale_lookups.ScaleLookups`) answer the request
path from memory and queue what they miss; this loop resolves the queue and refreshes stale
answers on every replica — every ``SWEEP_PERIOD`` (upstream's ``scaleCacheLoopPeriod``), and at
once when a miss wakes it (``serve``; a simulated run steps it on its interval).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from kubescale.kube.scale_lookups import SWEEP_PERIOD
from kubescale.kube.shared_cache import SharedCache
from kubescale.runtime.component import LoopSpec

__all__ = ["SCALE_LOOKUPS_LOOP", "ScaleLookupsLoop", "scale_lookups_loop"]

SCALE_LOOKUPS_LOOP: Final = "scale-lookups"


class ScaleLookupsLoop:
    """Resolves the shared cache's queued /scale lookups."""

    name = SCALE_LOOKUPS_LOOP

    def __init__(self, cache: SharedCache) -> None:
        self._cache = cache

    async def run_once(self, now: datetime) -> None:
        await self._cache.resolve_lookups()


def scale_lookups_loop(cache: SharedCache) -> LoopSpec:
    """The every-replica loop spec for ``cache``'s lookups (woken by a miss)."""
    return LoopSpec(
        loop=ScaleLookupsLoop(cache),
        interval=SWEEP_PERIOD,
        leader_only=False,
        wake=cache.lookups_wanted,
    )
