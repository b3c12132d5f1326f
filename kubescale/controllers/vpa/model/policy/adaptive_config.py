"""The recommendation policies' names and the ``adaptive`` policy's parameters.

``--recommendation-policy`` takes :data:`UPSTREAM_POLICY` (default: upstream VPA 1.8's estimator
chain, bit for bit) or :data:`ADAPTIVE_POLICY`. :class:`AdaptivePolicyConfig` holds the
adaptive policy's parameters; the defaults are the operating point chosen in
``docs/vpa-recommendation-policy.md`` (tuned on workloads vm-001 … vm-250 of the Bitbrains month,
held out on vm-251 … vm-500). They are not flags: the replay
(``bench/vpa_trace_replay.py --policy-param``) varies them to draw the trade-off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kubescale.controllers.vpa.model.policy.oom_log import OOM_LOG_HORIZON_US
from kubescale.controllers.vpa.model.policy.recent_peaks import RECENT_PEAKS_HOURS

__all__ = [
    "ADAPTIVE_POLICY",
    "DEFAULT_ADAPTIVE_POLICY",
    "RECOMMENDATION_POLICIES",
    "UPSTREAM_POLICY",
    "AdaptivePolicyConfig",
]

UPSTREAM_POLICY: Final = "upstream"
ADAPTIVE_POLICY: Final = "adaptive"
RECOMMENDATION_POLICIES: Final = (UPSTREAM_POLICY, ADAPTIVE_POLICY)

_HOUR_NS = 3600 * 10**9


@dataclass(frozen=True, kw_only=True)
class AdaptivePolicyConfig:
    """Parameters of the ``adaptive`` policy (see
    :mod:`kubescale.controllers.vpa.model.policy.adaptive_estimator` for how each is used)."""

    memory_rungs: tuple[tuple[float, float], ...] = (
        (0.9, 0.15),
        (0.99, 0.15),
        (1.0, 0.15),
        (1.0, 0.3),
    )
    """Memory target per OOM pressure: ``(percentile of the peaks histogram, margin)``; rung
    ``n`` is used after ``n`` OOM episodes within ``episode_window_ns`` (the last rung beyond)."""
    episode_gap_ns: int = 6 * _HOUR_NS
    """An OOM at least this long after the previous one starts a new episode."""
    episode_window_ns: int = 12 * 24 * _HOUR_NS
    """Episodes that started within this window count toward the rung."""
    oom_hold_ns: int = 36 * _HOUR_NS
    """After an OOM, memory is held at the OOM floor for this long."""
    oom_bump_ratio: float = 2.0
    """OOM floor, part 1: the memory in use at the last OOM times this (unless one of the two
    ratios below applies)."""
    young_oom_bump_ratio: float = 8.0
    """OOM floor, part 1, for a young aggregate (see ``young_ns``): it has hours of history, its
    highest peak says little about its range, and doubling from the pod minimum takes five OOMs
    to reach gibibytes."""
    known_peak_bump_ratio: float = 1.5
    """OOM floor, part 1, once the burst release remembers a peak above the memory in use at the
    OOM (plus ``oom_peak_margin``): the floor's remembered peak already covers the known height,
    so the multiple only has to cover a burst higher than any seen."""
    oom_peak_percentile: float = 1.0
    oom_peak_margin: float = 0.15
    """OOM floor, part 2: this percentile of the peaks histogram (1.0: the highest peak still
    held) plus this fraction."""
    young_ns: int = 48 * _HOUR_NS
    """History (first to last sample) below which the aggregate is *young*: its memory target
    is at least ``young_memory_margin`` above the highest peak seen (0: no young rule)."""
    young_memory_margin: float = 1.0
    """Young aggregates: memory at least ``P(1.0)`` of the peaks histogram plus this fraction."""
    release_quiet_ns: int = 4 * _HOUR_NS
    """Burst release (0: off): once an OOM-killed aggregate's last OOM is this long ago and
    every clock hour since is quiet — its highest usage at most ``release_ratio`` × the memory
    target — the target falls to the highest quiet hour of the last ``release_history_ns``
    plus ``release_margin``; the next OOM jumps back to the remembered peak (the OOM floor)."""
    release_history_ns: int = 46 * _HOUR_NS
    release_margin: float = 0.85
    release_ratio: float = 0.5
    release_min_bytes: int = 4 << 30
    """The release applies only when it lowers the target by at least this much: a restart
    is worth it for gibibytes held for days, not for a small container's daily spike."""
    cpu_percentiles: tuple[float, ...] = (0.8, 0.85, 0.9, 0.95)
    """CPU target candidates (percentiles of the CPU histogram, each plus ``cpu_margin``)."""
    cpu_margin: float = 0.15
    throttle_cost_cores: float = 20.0
    """The CPU candidate chosen minimises ``level (cores) + throttle_cost_cores × (1 − p)``: a
    unit of expected throttled fraction is worth this many cores."""
    settle_ns: int = 6 * _HOUR_NS
    """History (first to last CPU sample) after which the upper bounds tighten."""
    memory_upper_ratio: float = 2.0
    """Once settled, memory upperBound is at most target × this."""
    cpu_upper_ratio: float = 4.0
    """Once settled, CPU upperBound is at most target × this."""

    def __post_init__(self) -> None:
        if not self.memory_rungs:
            raise ValueError("memory_rungs: at least one rung is needed")
        for percentile, margin in self.memory_rungs:
            _check_percentile("memory_rungs", percentile)
            if margin < 0:
                raise ValueError(f"memory_rungs: margin must be >= 0, got {margin}")
        if not self.cpu_percentiles:
            raise ValueError("cpu_percentiles: at least one percentile is needed")
        for percentile in self.cpu_percentiles:
            _check_percentile("cpu_percentiles", percentile)
        _check_percentile("oom_peak_percentile", self.oom_peak_percentile)
        names = ("episode_gap_ns", "episode_window_ns", "oom_hold_ns", "settle_ns", "young_ns")
        for name in (*names, "release_quiet_ns", "release_history_ns"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0")
        if (self.episode_window_ns + self.episode_gap_ns) // 1000 > OOM_LOG_HORIZON_US:
            raise ValueError("episode_window_ns + episode_gap_ns: longer than the OOM log keeps")
        for name in ("release_quiet_ns", "release_history_ns"):
            if getattr(self, name) >= (RECENT_PEAKS_HOURS - 1) * _HOUR_NS:
                raise ValueError(f"{name}: must be under {RECENT_PEAKS_HOURS - 1} h (hours kept)")
        for name in (
            "oom_bump_ratio",
            "young_oom_bump_ratio",
            "known_peak_bump_ratio",
            "oom_peak_margin",
            "young_memory_margin",
            "release_margin",
            "release_ratio",
            "release_min_bytes",
            "cpu_margin",
            "throttle_cost_cores",
            "memory_upper_ratio",
            "cpu_upper_ratio",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0")
        if self.memory_upper_ratio < 1 or self.cpu_upper_ratio < 1:
            raise ValueError("memory_upper_ratio, cpu_upper_ratio: must be >= 1")


def _check_percentile(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: percentile must be within [0, 1], got {value}")


DEFAULT_ADAPTIVE_POLICY: Final = AdaptivePolicyConfig()
