"""The OOMs an aggregate has seen: the fact upstream's model folds into the memory histogram and
then forgets.

Upstream's ``RecordOOM`` turns an OOM into one bumped memory sample; when it happened, and how
often the container has been OOM-killed lately, is lost. :class:`OomLog` keeps the recent OOMs
of one aggregate as ``(time, memory in use)`` events — the memory in use being what upstream's
bump-up starts from, ``max(request, current peak)`` — for the ``adaptive`` recommendation
policy. Bounded by age and size: events older than :data:`OOM_LOG_HORIZON_US` before the newest
are dropped, and at most :data:`OOM_LOG_MAX_EVENTS` are kept (the oldest go first). Events are
kept in time order; an OOM older than the newest is inserted in place.

Not checkpointed (the checkpoint format is upstream's): a restarted recommender starts with
empty logs. Imports nothing of kubescale.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Final

__all__ = ["OOM_LOG_HORIZON_US", "OOM_LOG_MAX_EVENTS", "OomEvent", "OomLog"]

OOM_LOG_HORIZON_US: Final = 14 * 24 * 3600 * 10**6
"""How far back (from the newest event) OOMs are kept: 14 days."""
OOM_LOG_MAX_EVENTS: Final = 64
"""At most this many OOMs are kept per aggregate."""


@dataclass(frozen=True, slots=True, order=True)
class OomEvent:
    """One OOM: microseconds since Go's zero time, and the memory in use (bytes)."""

    time_us: int
    memory_bytes: int


@dataclass(slots=True)
class OomLog:
    """Recent OOMs of one aggregate, oldest first (module docstring)."""

    events: list[OomEvent] = field(default_factory=list)

    def add(self, time_us: int, memory_bytes: int) -> None:
        """Record an OOM, then drop what is too old or too many."""
        bisect.insort(self.events, OomEvent(time_us, memory_bytes))
        newest = self.events[-1].time_us
        keep_from = 0
        while (
            keep_from < len(self.events)
            and self.events[keep_from].time_us < newest - OOM_LOG_HORIZON_US
        ):
            keep_from += 1
        keep_from = max(keep_from, len(self.events) - OOM_LOG_MAX_EVENTS)
        if keep_from:
            del self.events[:keep_from]

    def merge(self, other: OomLog) -> None:
        """Add another aggregate's OOMs (a VPA's containers of one name are merged)."""
        for event in other.events:
            self.add(event.time_us, event.memory_bytes)

    def copy(self) -> OomLog:
        return OomLog(list(self.events))
