"""The arithmetic of a simulation report: weighted percentiles, time integrals, stable rounding.

Every sample of a simulated run stands for an interval of time (see
:mod:`kubescale.sim.scenario.timeline`), so statistics are *time-weighted*: a percentile is the
smallest sampled value at or below which at least that share of the sampled *time* lies — the
nearest-rank percentile when every step is equally long — and an average is ∫value dt / ∫dt.
Nearest-rank was chosen over interpolation so that every percentile in a report is a value the run
actually produced and can be checked by hand.

Rounding: a report must be byte-identical across runs, and its floats readable, so every float
is rounded to a fixed number of decimals per unit (:data:`DECIMALS`) before it is stored; ``-0.0``
becomes ``0.0`` and non-finite values are refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = [
    "BYTES_PER_GIB",
    "DECIMALS",
    "SECONDS_PER_HOUR",
    "rounded",
    "rounded_or_none",
    "time_weighted_average",
    "weighted_percentile",
]

SECONDS_PER_HOUR: Final = 3600.0
BYTES_PER_GIB: Final = float(2**30)

DECIMALS: Final[dict[str, int]] = {
    "cores": 6,  # a micro-core: far below the millicore Kubernetes requests are written in
    "bytes": 0,  # whole bytes
    "seconds": 3,
    "hours": 6,  # core-hours, GiB-hours, node-hours
    "cost": 6,
    "count": 4,  # time-averaged counts (replicas, nodes)
}

# Tolerance on cumulative weights: step lengths are sums of floats, so a cumulative share that
# should equal the percentile's share exactly may come out a hair below it.
_RELATIVE_TOLERANCE: Final = 1e-9


def rounded(value: float, unit: str) -> float:
    """``value`` rounded for ``unit`` (a key of :data:`DECIMALS`); whole-byte values stay floats
    so a field always has one JSON type."""
    if not math.isfinite(value):
        raise ValueError(f"a report value must be finite, got {value!r}")
    result = round(value, DECIMALS[unit])
    return 0.0 if result == 0 else float(result)


def rounded_or_none(value: float | None, unit: str) -> float | None:
    return None if value is None else rounded(value, unit)


def weighted_percentile(
    values: Sequence[float], weights: Sequence[float], percent: float
) -> float | None:
    """The smallest value ``v`` with ∑ weight(x ≤ v) ≥ percent/100 · ∑ weight; ``None`` without
    samples of positive weight. Equal weights: the nearest-rank percentile, ``x[⌈p·n/100⌉]``."""
    if len(values) != len(weights):
        raise ValueError("values and weights differ in length")
    if not 0 < percent <= 100:
        raise ValueError(f"percent must be in (0, 100], got {percent}")
    pairs = sorted(
        (value, weight) for value, weight in zip(values, weights, strict=True) if weight > 0
    )
    if not pairs:
        return None
    total = math.fsum(weight for _, weight in pairs)
    threshold = percent / 100.0 * total * (1.0 - _RELATIVE_TOLERANCE)
    cumulative = 0.0
    for value, weight in pairs:
        cumulative += weight
        if cumulative >= threshold:
            return value
    return pairs[-1][0]


def time_weighted_average(pairs: Iterable[tuple[float, float]]) -> float | None:
    """∑ value·weight / ∑ weight over ``(value, weight)`` pairs; ``None`` when no time passed."""
    total_weight = 0.0
    total = 0.0
    for value, weight in pairs:
        total += value * weight
        total_weight += weight
    return total / total_weight if total_weight > 0 else None
