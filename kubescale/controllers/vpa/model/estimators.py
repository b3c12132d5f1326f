"""The recommender's model flags and estimator chain (``logic/estimator.go``,
``logic/recommender.go CreatePodResourceRecommender``).

Per container, with ``P(q)`` the histogram percentile (bucket end), ``margin(x) = x +
int(x * marginFraction)`` and ``c`` the confidence:

* target = ``margin(P_target)``;
* lowerBound = ``margin(P_lower) * (1 + 0.001/c)**-2`` (``c = 0`` gives 0);
* upperBound = ``margin(P_upper) * (1 + 1/c)**1`` (``c = 0`` gives the 1e14 clamp);
* each then at least the pod minimum split evenly, ``max(x, podMin * (1/N))`` with N the
  number of (non-Off) containers in the VPA's recommendation map.

``c = min((last - first) / confidenceInterval, samples / confidenceInterval.Minutes())`` (days
and samples-per-minute-days at the default 24 h). CPU percentiles give cores, converted with
``int64(cores * 1000)``; memory bytes with ``int64(bytes)``; every scaling is
``resourceAmountFromFloat(float64(amount) * factor)`` clamped to ``[0, 1e14]`` (NaN, from
``0 * Inf``, converts to ``-2**63`` as on amd64 and loses to the pod minimum). Powers are Go's
``math.Pow``.

:func:`estimate` is the scalar chain; :func:`estimate_arrays` runs it over many containers at
once with numpy, bit for bit the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kubescale.controllers.vpa.model.aggregate_state import (
    MAX_RESOURCE_AMOUNT,
    AggregateContainerState,
    resource_amount_from_float,
    scale_resource,
)
from kubescale.controllers.vpa.model.go_math import (
    FloatArray,
    IntArray,
    go_pow,
    go_pow_int_array,
    saturating_sub_ns,
)
from kubescale.controllers.vpa.model.model_config import RecommenderConfig

__all__ = [
    "ContainerEstimate",
    "confidence",
    "estimate",
    "estimate_arrays",
    "pod_minimums",
]

_HOUR_NS = 3600 * 10**9
_MINUTE_NS = 60 * 10**9
_LOWER_MULTIPLIER, _LOWER_EXPONENT = 0.001, -2
_UPPER_MULTIPLIER, _UPPER_EXPONENT = 1.0, 1
_INT64_MIN = -(2**63)


@dataclass(frozen=True)
class ContainerEstimate:
    """RecommendedContainerResources before controlled-resource filtering (ResourceAmounts)."""

    target_cpu: int
    target_memory: int
    lower_cpu: int
    lower_memory: int
    upper_cpu: int
    upper_memory: int


def _minutes(duration_ns: int) -> float:
    """time.Duration.Minutes."""
    whole, rest = divmod(abs(duration_ns), _MINUTE_NS)
    value = float(whole) + float(rest) / 60e9
    return value if duration_ns >= 0 else -value


def confidence(*, first_us: int, last_us: int, total_samples: int, interval_ns: int) -> float:
    """getConfidence."""
    lifespan = float(saturating_sub_ns(last_us, first_us)) / float(interval_ns)
    samples = float(total_samples) / _minutes(interval_ns)
    return lifespan if lifespan < samples else samples


def pod_minimums(config: RecommenderConfig, containers: int) -> tuple[int, int]:
    """GetRecommendedPodResources: the per-container CPU and memory minimums."""
    fraction = 1.0 / float(containers)
    min_cpu = scale_resource(
        resource_amount_from_float(config.pod_recommendation_min_cpu_millicores * 0.001 * 1000.0),
        fraction,
    )
    min_memory = scale_resource(
        resource_amount_from_float(config.pod_recommendation_min_memory_mb * 1024 * 1024),
        fraction,
    )
    return min_cpu, min_memory


def _with_margin(base: int, fraction: float) -> int:
    return base + scale_resource(base, fraction)


def _confidence_scaled(base: int, multiplier: float, exponent: int, conf: float) -> int:
    return scale_resource(
        base, go_pow(1.0 + multiplier / conf if conf else _div(multiplier), float(exponent))
    )


def _div(multiplier: float) -> float:
    """``multiplier / 0.0`` in Go float64: ±Inf (NaN for 0/0), then ``1 + that``."""
    if multiplier == 0:
        return math.nan
    return 1.0 + math.copysign(math.inf, multiplier)


def estimate(
    state: AggregateContainerState, config: RecommenderConfig, *, containers: int
) -> ContainerEstimate:
    """estimateContainerResources for one (merged) aggregate, before resource filtering."""
    cpu, memory = state.cpu, state.memory
    margin = config.recommendation_margin_fraction
    min_cpu, min_memory = pod_minimums(config, containers)

    def cpu_at(percentile: float) -> int:
        return _with_margin(resource_amount_from_float(cpu.percentile(percentile) * 1000.0), margin)

    def memory_at(percentile: float) -> int:
        return _with_margin(resource_amount_from_float(memory.percentile(percentile)), margin)

    conf_cpu = confidence(
        first_us=state.first_sample_start_us,
        last_us=state.last_sample_start_us,
        total_samples=state.total_samples_count,
        interval_ns=config.confidence_interval_cpu_ns,
    )
    conf_memory = confidence(
        first_us=state.first_sample_start_us,
        last_us=state.last_sample_start_us,
        total_samples=state.total_samples_count,
        interval_ns=config.confidence_interval_memory_ns,
    )
    return ContainerEstimate(
        target_cpu=max(cpu_at(config.target_cpu_percentile), min_cpu),
        target_memory=max(memory_at(config.target_memory_percentile), min_memory),
        lower_cpu=max(
            _confidence_scaled(
                cpu_at(config.recommendation_lower_bound_cpu_percentile),
                _LOWER_MULTIPLIER,
                _LOWER_EXPONENT,
                conf_cpu,
            ),
            min_cpu,
        ),
        lower_memory=max(
            _confidence_scaled(
                memory_at(config.recommendation_lower_bound_memory_percentile),
                _LOWER_MULTIPLIER,
                _LOWER_EXPONENT,
                conf_memory,
            ),
            min_memory,
        ),
        upper_cpu=max(
            _confidence_scaled(
                cpu_at(config.recommendation_upper_bound_cpu_percentile),
                _UPPER_MULTIPLIER,
                _UPPER_EXPONENT,
                conf_cpu,
            ),
            min_cpu,
        ),
        upper_memory=max(
            _confidence_scaled(
                memory_at(config.recommendation_upper_bound_memory_percentile),
                _UPPER_MULTIPLIER,
                _UPPER_EXPONENT,
                conf_memory,
            ),
            min_memory,
        ),
    )


# -- vectorised --------------------------------------------------------------------------------


def _amounts(values: FloatArray) -> IntArray:
    """resourceAmountFromFloat element-wise."""
    clamped = np.where(values > float(MAX_RESOURCE_AMOUNT), float(MAX_RESOURCE_AMOUNT), values)
    clamped = np.where(clamped < 0, 0.0, clamped)
    nan = np.isnan(clamped)
    result: IntArray = np.where(nan, _INT64_MIN, np.where(nan, 0.0, clamped).astype(np.int64))
    return result


def _margin_arrays(base: IntArray, fraction: float) -> IntArray:
    result: IntArray = base + _amounts(base.astype(np.float64) * fraction)
    return result


def _pow_arrays(x: FloatArray, exponent: int) -> FloatArray:
    regular = np.isfinite(x) & (x > 0)
    safe = np.where(regular, x, 2.0)
    powered = go_pow_int_array(safe, exponent)
    special = np.array([go_pow(float(v), float(exponent)) for v in x[~regular]])
    result: FloatArray = powered
    if special.size:
        result = powered.copy()
        result[~regular] = special
    return result


def _confidence_arrays(
    first_us: IntArray, last_us: IntArray, samples: IntArray, interval_ns: int
) -> FloatArray:
    lifespan = ((last_us - first_us) * 1000).astype(np.float64) / float(interval_ns)
    amount = samples.astype(np.float64) / _minutes(interval_ns)
    result: FloatArray = np.where(lifespan < amount, lifespan, amount)
    return result


def _scaled_by_confidence(
    base: IntArray, multiplier: float, exponent: int, conf: FloatArray
) -> IntArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = 1.0 + multiplier / conf
        scaled = base.astype(np.float64) * _pow_arrays(factor, exponent)
    return _amounts(scaled)


def estimate_arrays(
    *,
    cpu_percentiles: FloatArray,
    memory_percentiles: FloatArray,
    first_us: IntArray,
    last_us: IntArray,
    samples: IntArray,
    containers: IntArray,
    config: RecommenderConfig,
) -> dict[str, IntArray]:
    """:func:`estimate` for many aggregates: percentile columns are (target, lower, upper).

    Returns arrays keyed ``target_cpu``, ``target_memory``, ``lower_cpu`` ... as in
    :class:`ContainerEstimate`.
    """
    margin = config.recommendation_margin_fraction
    with np.errstate(invalid="ignore"):
        cpu = [_margin_arrays(_amounts(cpu_percentiles[:, i] * 1000.0), margin) for i in range(3)]
        memory = [_margin_arrays(_amounts(memory_percentiles[:, i]), margin) for i in range(3)]
    conf_cpu = _confidence_arrays(first_us, last_us, samples, config.confidence_interval_cpu_ns)
    conf_memory = _confidence_arrays(
        first_us, last_us, samples, config.confidence_interval_memory_ns
    )
    counts = containers.tolist()
    minimums = {count: pod_minimums(config, count) for count in set(counts)}
    min_cpu = np.array([minimums[c][0] for c in counts], dtype=np.int64)
    min_memory = np.array([minimums[c][1] for c in counts], dtype=np.int64)
    return {
        "target_cpu": np.maximum(cpu[0], min_cpu),
        "target_memory": np.maximum(memory[0], min_memory),
        "lower_cpu": np.maximum(
            _scaled_by_confidence(cpu[1], _LOWER_MULTIPLIER, _LOWER_EXPONENT, conf_cpu), min_cpu
        ),
        "lower_memory": np.maximum(
            _scaled_by_confidence(memory[1], _LOWER_MULTIPLIER, _LOWER_EXPONENT, conf_memory),
            min_memory,
        ),
        "upper_cpu": np.maximum(
            _scaled_by_confidence(cpu[2], _UPPER_MULTIPLIER, _UPPER_EXPONENT, conf_cpu), min_cpu
        ),
        "upper_memory": np.maximum(
            _scaled_by_confidence(memory[2], _UPPER_MULTIPLIER, _UPPER_EXPONENT, conf_memory),
            min_memory,
        ),
    }
