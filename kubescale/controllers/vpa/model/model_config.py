"""The recommender model's settings (upstream's recommender flags, reference §2.1), apart from
the model's arithmetic: the flags and settings (``recommender_config``, which every ``serve``
imports to parse its command line) need them, and importing them imports no numpy (the
model's histograms and estimators do; a process that does not run the recommender never
loads them — issue 29).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kubescale.objects.quantities import Quantity

__all__ = [
    "CPU",
    "HISTOGRAM_HALF_LIFE_NS",
    "MEMORY",
    "AggregationsConfig",
    "RecommenderConfig",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
_HOUR_NS = 3600 * 10**9
HISTOGRAM_HALF_LIFE_NS: Final = 24 * _HOUR_NS
"""The histograms' default decay half-life (upstream's 24 h)."""


@dataclass(frozen=True)
class AggregationsConfig:
    """model.AggregationsConfig: what the histograms and memory peaks are built with."""

    memory_aggregation_interval_ns: int = 24 * _HOUR_NS
    memory_aggregation_interval_count: int = 8
    memory_histogram_decay_half_life_ns: int = HISTOGRAM_HALF_LIFE_NS
    cpu_histogram_decay_half_life_ns: int = HISTOGRAM_HALF_LIFE_NS
    oom_bump_up_ratio: float = 1.2
    oom_min_bump_up_bytes: float = 100 * 1024 * 1024

    @property
    def memory_aggregation_window_ns(self) -> int:
        """GetMemoryAggregationWindowLength: interval x count (8 days by default)."""
        return self.memory_aggregation_interval_ns * self.memory_aggregation_interval_count


@dataclass(frozen=True, kw_only=True)
class RecommenderConfig:
    """Every model flag of upstream's recommender (reference §2.1), with upstream defaults."""

    recommendation_margin_fraction: float = 0.15
    pod_recommendation_min_cpu_millicores: float = 25.0
    pod_recommendation_min_memory_mb: float = 250.0
    target_cpu_percentile: float = 0.9
    recommendation_lower_bound_cpu_percentile: float = 0.5
    recommendation_upper_bound_cpu_percentile: float = 0.95
    target_memory_percentile: float = 0.9
    recommendation_lower_bound_memory_percentile: float = 0.5
    recommendation_upper_bound_memory_percentile: float = 0.95
    confidence_interval_cpu_ns: int = 24 * _HOUR_NS
    confidence_interval_memory_ns: int = 24 * _HOUR_NS
    memory_aggregation_interval_ns: int = 24 * _HOUR_NS
    memory_aggregation_interval_count: int = 8
    memory_histogram_decay_half_life_ns: int = 24 * _HOUR_NS
    cpu_histogram_decay_half_life_ns: int = 24 * _HOUR_NS
    oom_bump_up_ratio: float = 1.2
    oom_min_bump_up_bytes: float = 104857600.0
    round_cpu_millicores: int = 1
    round_memory_bytes: int = 1
    humanize_memory: bool = False
    """Deprecated upstream flag (``--humanize-memory``), honoured as upstream does."""
    cpu_integer_post_processor_enabled: bool = False
    container_recommendation_max_allowed_cpu: Quantity | None = None
    container_recommendation_max_allowed_memory: Quantity | None = None
    memory_saver: bool = False
    recommendation_policy: str = "upstream"
    """kubescale's ``--recommendation-policy``: ``upstream`` (this module's chain) or
    ``adaptive`` (:mod:`kubescale.controllers.vpa.model.policy.adaptive_estimator`)."""

    @property
    def aggregations(self) -> AggregationsConfig:
        return AggregationsConfig(
            memory_aggregation_interval_ns=self.memory_aggregation_interval_ns,
            memory_aggregation_interval_count=self.memory_aggregation_interval_count,
            memory_histogram_decay_half_life_ns=self.memory_histogram_decay_half_life_ns,
            cpu_histogram_decay_half_life_ns=self.cpu_histogram_decay_half_life_ns,
            oom_bump_up_ratio=self.oom_bump_up_ratio,
            oom_min_bump_up_bytes=self.oom_min_bump_up_bytes,
        )

    @property
    def global_max_allowed(self) -> dict[str, Quantity] | None:
        """initGlobalMaxAllowed: the ``--container-recommendation-max-allowed-*`` caps."""
        result: dict[str, Quantity] = {}
        if self.container_recommendation_max_allowed_cpu is not None:
            result[CPU] = self.container_recommendation_max_allowed_cpu
        if self.container_recommendation_max_allowed_memory is not None:
            result[MEMORY] = self.container_recommendation_max_allowed_memory
        return result or None
