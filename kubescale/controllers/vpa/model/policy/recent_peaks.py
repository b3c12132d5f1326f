"""Recent memory usage of an aggregate that has been OOM-killed: hourly maxima and the highest
usage remembered.

Upstream's model keeps memory only as daily peaks in a decaying histogram, so after a burst the
percentiles hold the burst's height for days. The ``adaptive`` policy's *burst release* needs to
know that a burst is over — the usage of the last hours back near the idle level — and how high
the burst went, to jump straight back there at the next OOM. :class:`RecentPeaks` keeps, per
aggregate, the highest usage of each clock hour for the last :data:`RECENT_PEAKS_HOURS` hours,
and the highest usage seen (``peak_bytes`` at ``peak_us``; replaced by a higher usage, or by any
usage once it is older than :data:`PEAK_MEMORY_US`).

Created at an aggregate's first accepted OOM (aggregates never OOM-killed pay nothing) and fed
every memory usage sample after it; bounded (at most ``RECENT_PEAKS_HOURS`` entries). Not
checkpointed, like the OOM log. Imports nothing of kubescale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = ["HOUR_US", "PEAK_MEMORY_US", "RECENT_PEAKS_HOURS", "RecentPeaks"]

HOUR_US: Final = 3600 * 10**6
RECENT_PEAKS_HOURS: Final = 48
"""Hourly maxima are kept for this many clock hours back from the newest sample's hour."""
PEAK_MEMORY_US: Final = 14 * 24 * HOUR_US
"""The remembered peak is kept for 14 days (as the OOM log), then the next usage replaces it."""


@dataclass(slots=True)
class RecentPeaks:
    """Hourly usage maxima (clock hour -> bytes) and the remembered peak (module docstring)."""

    started_us: int
    hourly: dict[int, int] = field(default_factory=dict)
    newest_hour: int = -1
    peak_bytes: int = 0
    peak_us: int = 0

    def add(self, usage_bytes: int, time_us: int) -> None:
        """One memory usage sample (any order; hours older than the kept range are ignored)."""
        hour = time_us // HOUR_US
        hourly = self.hourly
        if hour > self.newest_hour:
            self.newest_hour = hour
            if hourly:
                for old in [h for h in hourly if h <= hour - RECENT_PEAKS_HOURS]:
                    del hourly[old]
        if hour > self.newest_hour - RECENT_PEAKS_HOURS and usage_bytes > hourly.get(hour, -1):
            hourly[hour] = usage_bytes
        if usage_bytes >= self.peak_bytes or time_us - self.peak_us > PEAK_MEMORY_US:
            self.peak_bytes, self.peak_us = usage_bytes, time_us
        self.started_us = min(self.started_us, time_us)

    def max_between(self, since_us: int, until_us: int, *, at_most: int | None = None) -> int:
        """The highest usage of the clock hours from ``since_us``'s to ``until_us``'s (0 if
        none); with ``at_most``, of the hours whose highest usage is at most that."""
        first, last = since_us // HOUR_US, until_us // HOUR_US
        return max(
            (
                v
                for h, v in self.hourly.items()
                if first <= h <= last and (at_most is None or v <= at_most)
            ),
            default=0,
        )

    def merge(self, other: RecentPeaks) -> None:
        """Add another aggregate's recent usage (a VPA's containers of one name are merged)."""
        for hour, usage in sorted(other.hourly.items()):
            self.add(usage, hour * HOUR_US)
        if other.peak_bytes > self.peak_bytes:
            self.peak_bytes, self.peak_us = other.peak_bytes, other.peak_us
        self.started_us = min(self.started_us, other.started_us)

    def copy(self) -> RecentPeaks:
        return RecentPeaks(
            self.started_us, dict(self.hourly), self.newest_hour, self.peak_bytes, self.peak_us
        )
