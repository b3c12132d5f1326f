"""Upstream VPA's histograms (``pkg/recommender/util``), stored column-wise.

Bucketing (``histogram_options.go``): linear buckets (:class:`LinearHistogramOptions`) or, as the
recommender uses, exponential buckets, bucket ``n >= 1`` starting at
``first * (ratio**n - 1) / (ratio - 1)``, ``FindBucket(v) = 0`` below ``first``, else
``int(log(v * (ratio - 1) / first + 1) / log(ratio))`` capped at the last bucket, and
``NumBuckets = int(ceil(log_ratio(max * (ratio - 1) / first + 1))) + 1``. CPU: 0.01 core to
1000 cores, memory: 1e7 to 1e12 bytes, ratio 1.05 -> 176 buckets each; epsilon 1e-4 (a bucket
lighter than that is "empty"). Logarithms and powers are Go's
(:mod:`kubescale.controllers.vpa.model.go_math`).

Histogram rules (``histogram.go``; epsilon is the options' own, ``h.options.Epsilon()``):
``AddSample`` moves min/max bucket only when the bucket then weighs at least epsilon;
``SubtractSample`` clamps to the bucket's weight when within epsilon and re-scans min/max;
``Percentile(p)`` walks from the min bucket accumulating until the partial sum reaches
``p * totalWeight`` (total tracked separately) and returns the **end** of that bucket (the start of
the next), or the start of the last bucket; no interpolation. ``Merge`` adds the other's buckets in
its ``[min, max]``. Checkpoints (``SaveToChekpoint``/``LoadFromCheckpoint``): weights scaled so the
heaviest bucket is 10000, ``uint32(floor(w * ratio + 0.5))``, zeros dropped, ``totalWeight`` raw;
loading spreads ``totalWeight`` over the stored integers and then drops buckets under epsilon from
min/max (kubernetes/autoscaler#7886, fix for #7726).

Decay (``decaying_histogram.go``): a sample weighs ``weight * 2**((t - ref) / halfLife)``; when
``t > ref + 100 * halfLife`` the reference moves to ``t.Round(halfLife)`` and every weight is
scaled by ``Ldexp(1, round((oldRef - newRef) / halfLife))``; ``Merge`` first aligns the older
reference with the younger one (scaling the older histogram, even when it is the argument).

Storage: a :class:`HistogramStore` holds many histograms of one kind as rows: bucket weights in
:class:`~kubescale.controllers.vpa.model.histogram_rows.BucketRows` (a row reads as upstream's dense
176-bucket slice; a store made with ``window=W`` keeps a row in ``W`` consecutive buckets until a
write lands outside them) plus per-row total weight, min/max bucket and reference time (microseconds
since Go's zero time). :class:`DecayingHistogram` is the upstream API on one row;
the store's ``*_rows`` methods do the same operations for many rows at once with numpy, in the
same floating-point order, so a row ends up bit-for-bit where the scalar calls would put it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from kubescale.controllers.vpa.model.checkpoint_format import histogram_json, parse_histogram
from kubescale.controllers.vpa.model.go_math import (
    FloatArray,
    IntArray,
    from_go_micros,
    go_exp2,
    go_exp2_array,
    go_float_to_int64,
    go_log,
    go_log_array,
    go_micros,
    go_pow,
    go_round_half_up,
    round_time,
    saturating_sub_ns,
)
from kubescale.controllers.vpa.model.histogram_rows import BucketRows
from kubescale.objects.vpa_checkpoint import HistogramCheckpoint

__all__ = [
    "CPU_HISTOGRAM_OPTIONS",
    "DEFAULT_HALF_LIFE_NS",
    "EPSILON",
    "MAX_CHECKPOINT_WEIGHT",
    "MEMORY_HISTOGRAM_OPTIONS",
    "DecayingHistogram",
    "ExponentialHistogramOptions",
    "HistogramCheckpointError",
    "HistogramOptions",
    "HistogramStore",
    "LinearHistogramOptions",
]

MAX_CHECKPOINT_WEIGHT = 10000
"""util.MaxCheckpointWeight: the heaviest bucket's weight in a checkpoint."""
MIN_SAMPLE_WEIGHT = 0.1
"""model.minSampleWeight: the (constant) weight of a CPU sample."""
EPSILON = 1e-4
"""model.epsilon = 0.001 * minSampleWeight (a Go constant expression, exactly 1e-4)."""
BUCKET_SIZE_GROWTH = 0.05
"""model.DefaultHistogramBucketSizeGrowth."""
MAX_DECAY_EXPONENT = 100
_CHUNK_ROWS = 2048
DEFAULT_HALF_LIFE_NS = 24 * 3600 * 10**9


class HistogramCheckpointError(ValueError):
    """A histogram checkpoint upstream's LoadFromCheckpoint would reject."""


class HistogramOptions:
    """The number and size of a histogram's buckets (upstream's ``HistogramOptions``
    interface): :class:`ExponentialHistogramOptions` or :class:`LinearHistogramOptions`."""

    epsilon: float
    num_buckets: int
    bucket_starts: tuple[float, ...]

    def find_bucket(self, value: float) -> int:
        """FindBucket: the bucket ``value`` falls in, the first or last one outside the range."""
        raise NotImplementedError

    def find_buckets(self, values: FloatArray) -> IntArray:
        """FindBucket element-wise (finite non-negative values)."""
        raise NotImplementedError

    def bucket_start(self, bucket: int) -> float:
        """GetBucketStart."""
        if not 0 <= bucket < self.num_buckets:
            raise IndexError(f"index {bucket} out of range [0..{self.num_buckets - 1}]")
        return self.bucket_starts[bucket]


@dataclass(frozen=True)
class ExponentialHistogramOptions(HistogramOptions):
    """Exponential bucketing (``NewExponentialHistogramOptions``)."""

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float
    num_buckets: int = field(init=False)
    bucket_starts: tuple[float, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.first_bucket_size <= 0 or self.ratio <= 1:
            raise ValueError("maxValue, firstBucketSize and epsilon must be > 0.0, ratio > 1.0")
        if self.epsilon <= 0:
            raise ValueError("epsilon must be > 0.0")
        log_ratio = go_log(self.ratio)
        count = (
            go_float_to_int64(
                math.ceil(
                    go_log(self.max_value * (self.ratio - 1) / self.first_bucket_size + 1)
                    / log_ratio
                )
            )
            + 1
        )
        object.__setattr__(self, "num_buckets", count)
        starts = [0.0] + [
            self.first_bucket_size * (go_pow(self.ratio, float(n)) - 1) / (self.ratio - 1)
            for n in range(1, count)
        ]
        object.__setattr__(self, "bucket_starts", tuple(starts))

    def find_bucket(self, value: float) -> int:
        """FindBucket."""
        if value < self.first_bucket_size:
            return 0
        bucket = go_float_to_int64(
            go_log(value * (self.ratio - 1) / self.first_bucket_size + 1) / go_log(self.ratio)
        )
        return min(bucket, self.num_buckets - 1)

    def find_buckets(self, values: FloatArray) -> IntArray:
        """FindBucket element-wise (finite non-negative values)."""
        safe = np.maximum(values, self.first_bucket_size)
        logs = go_log_array(safe * (self.ratio - 1) / self.first_bucket_size + 1) / go_log(
            self.ratio
        )
        buckets = np.minimum(logs.astype(np.int64), self.num_buckets - 1)
        result: IntArray = np.where(values < self.first_bucket_size, 0, buckets)
        return result


@dataclass(frozen=True)
class LinearHistogramOptions(HistogramOptions):
    """Fixed-size buckets (``NewLinearHistogramOptions``): bucket ``n`` starts at
    ``n * bucketSize``, ``NumBuckets = int(ceil(maxValue / bucketSize)) + 1`` (the last start is
    at least ``maxValue``), ``FindBucket(v) = int(v / bucketSize)`` (Go's conversion truncates
    toward zero) clamped to ``[0, NumBuckets - 1]``."""

    max_value: float
    bucket_size: float
    epsilon: float
    num_buckets: int = field(init=False)
    bucket_starts: tuple[float, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.bucket_size <= 0 or self.epsilon <= 0:
            raise ValueError("maxValue and bucketSize must both be positive")
        count = go_float_to_int64(math.ceil(self.max_value / self.bucket_size)) + 1
        object.__setattr__(self, "num_buckets", count)
        starts = tuple(float(n) * self.bucket_size for n in range(count))
        object.__setattr__(self, "bucket_starts", starts)

    def find_bucket(self, value: float) -> int:
        """FindBucket."""
        bucket = go_float_to_int64(value / self.bucket_size)
        return max(0, min(bucket, self.num_buckets - 1))

    def find_buckets(self, values: FloatArray) -> IntArray:
        """FindBucket element-wise (finite values)."""
        quotients = np.clip(values / self.bucket_size, -1.0, float(self.num_buckets))
        result: IntArray = np.clip(np.trunc(quotients).astype(np.int64), 0, self.num_buckets - 1)
        return result


_RATIO = 1.0 + BUCKET_SIZE_GROWTH
CPU_HISTOGRAM_OPTIONS = ExponentialHistogramOptions(
    max_value=1000.0, first_bucket_size=0.01, ratio=_RATIO, epsilon=EPSILON
)
"""CPU in cores: first bucket 0.01 core, max 1000 cores (176 buckets)."""
MEMORY_HISTOGRAM_OPTIONS = ExponentialHistogramOptions(
    max_value=1e12, first_bucket_size=1e7, ratio=_RATIO, epsilon=EPSILON
)
"""Memory in bytes: first bucket 10 MB, max 1 TB (176 buckets)."""


class HistogramStore:
    """Many decaying histograms with the same options and half-life, one row each.

    Bucket weights live in :class:`BucketRows` pools grown by blocks of ``block_rows`` slots
    (no copying, no transient double allocation); a row takes storage at its first write, in a
    ``window``-bucket slot when ``window`` is set and the write fits, else a dense slot.
    """

    def __init__(
        self,
        options: HistogramOptions,
        half_life_ns: int,
        *,
        capacity: int = 256,
        window: int = 0,
    ) -> None:
        if half_life_ns <= 0:
            raise ValueError("half-life must be positive")
        self.options = options
        self.half_life_ns = half_life_ns
        self._buckets = options.num_buckets
        capacity = max(1, capacity)
        self.block_rows = capacity
        self._weights = BucketRows(self._buckets, window=window, block_rows=capacity)
        self._weights.ensure_rows(capacity)
        self.total = np.zeros(capacity, dtype=np.float64)
        self.min_bucket = np.full(capacity, self._buckets - 1, dtype=np.int16)
        self.max_bucket = np.zeros(capacity, dtype=np.int16)
        self.reference_us = np.zeros(capacity, dtype=np.int64)
        self._free: list[int] = []  # released rows, reused first
        self._next = 0  # rows at and above are unused
        self.bucket_starts = np.asarray(options.bucket_starts, dtype=np.float64)
        self.epsilon = options.epsilon
        self.row_scans = 0
        """``updateMinAndMaxBucket`` calls that read a whole row (an end bucket had lost its
        weight); the others read the two end buckets only."""
        """``options.Epsilon()``: the weight under which a bucket counts as empty."""

    # -- rows -----------------------------------------------------------------------------

    @property
    def weights_nbytes(self) -> int:
        """Bytes held by the bucket weights (all pool blocks)."""
        return self._weights.nbytes

    @property
    def capacity(self) -> int:
        return int(self.total.shape[0])

    def allocate(self) -> int:
        """A fresh, empty row (NewDecayingHistogram)."""
        if self._free:
            row = self._free.pop()
        else:
            if self._next == self.capacity:
                self._grow()
            row = self._next
            self._next += 1
        self._reset(row)
        return row

    def release(self, row: int) -> None:
        self._reset(row)
        self._free.append(row)

    def row_weights(self, row: int) -> FloatArray:
        """The row's bucket weights (all buckets, a copy)."""
        return self._weights.read(row, 0, self._buckets)

    def weights_of(self, rows: IntArray) -> FloatArray:
        """The bucket weights of ``rows`` as a ``[len(rows), 176]`` copy."""
        return self._weights.dense_rows(rows)

    def _reset(self, row: int) -> None:
        self._weights.clear(row)
        self.total[row] = 0.0
        self.min_bucket[row] = self._buckets - 1
        self.max_bucket[row] = 0
        self.reference_us[row] = 0

    def _grow(self) -> None:
        old = self.capacity
        grow = self.block_rows
        self._weights.ensure_rows(old + grow)
        self.total = np.concatenate([self.total, np.zeros(grow)])
        self.min_bucket = np.concatenate(
            [self.min_bucket, np.full(grow, self._buckets - 1, dtype=np.int16)]
        )
        self.max_bucket = np.concatenate([self.max_bucket, np.zeros(grow, dtype=np.int16)])
        self.reference_us = np.concatenate([self.reference_us, np.zeros(grow, dtype=np.int64)])
        del old

    def copy_row(self, source: int, target: int) -> None:
        self._weights.copy(source, target)
        self.total[target] = self.total[source]
        self.min_bucket[target] = self.min_bucket[source]
        self.max_bucket[target] = self.max_bucket[source]
        self.reference_us[target] = self.reference_us[source]

    # -- scalar operations (one row) ------------------------------------------------------

    def _update_min_max(self, row: int) -> None:
        """updateMinAndMaxBucket."""
        low, high = int(self.min_bucket[row]), int(self.max_bucket[row])
        weight = self._weights.weight
        # Issue 29: most calls (each memory peak the checkpoint pass subtracts) find weight at
        # both ends, where upstream's two loops stop at once: two reads, not the whole row.
        if weight(row, low) >= self.epsilon and weight(row, high) >= self.epsilon:
            return
        self.row_scans += 1
        weights = self._weights.read(row, 0, self._buckets).tolist()
        last = self._buckets - 1
        low = int(self.min_bucket[row])
        while weights[low] < self.epsilon and low < last:
            low += 1
        high = int(self.max_bucket[row])
        while weights[high] < self.epsilon and high > 0:
            high -= 1
        self.min_bucket[row] = low
        self.max_bucket[row] = high

    def _scale(self, row: int, factor: float) -> None:
        """histogram.scale: weights in [min, max] and the total times ``factor``."""
        low, high = int(self.min_bucket[row]), int(self.max_bucket[row])
        if low <= high:
            weights, base = self._weights.writable(row, low, high + 1)
            weights[low - base : high + 1 - base] *= factor
        self.total[row] *= factor
        self._update_min_max(row)

    def _shift_reference(self, row: int, new_reference_us: int) -> None:
        """shiftReferenceTimestamp."""
        new_reference_us = round_time(new_reference_us, self.half_life_ns)
        exponent = go_round_half_up(
            float(saturating_sub_ns(int(self.reference_us[row]), new_reference_us))
            / float(self.half_life_ns)
        )
        self._scale(row, math.ldexp(1.0, exponent) if exponent < 1024 else math.inf)
        self.reference_us[row] = new_reference_us

    def _decay_factor(self, row: int, time_us: int) -> float:
        """decayFactor (may shift the reference first)."""
        reference = int(self.reference_us[row])
        limit_us = reference + (self.half_life_ns * MAX_DECAY_EXPONENT) // 1000
        if time_us > limit_us:
            self._shift_reference(row, time_us)
            reference = int(self.reference_us[row])
        return go_exp2(float(saturating_sub_ns(time_us, reference)) / float(self.half_life_ns))

    def _add_plain(self, row: int, bucket: int, weight: float) -> None:
        """histogram.AddSample on an already decayed weight."""
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        weights, base = self._weights.writable(row, bucket, bucket + 1)
        weights[bucket - base] += weight
        self.total[row] += weight
        bucket_weight = weights[bucket - base]
        if bucket < self.min_bucket[row] and bucket_weight >= self.epsilon:
            self.min_bucket[row] = bucket
        if bucket > self.max_bucket[row] and bucket_weight >= self.epsilon:
            self.max_bucket[row] = bucket

    def add_sample(self, row: int, value: float, weight: float, time_us: int) -> None:
        self._add_plain(
            row, self.options.find_bucket(value), weight * self._decay_factor(row, time_us)
        )

    def subtract_sample(self, row: int, value: float, weight: float, time_us: int) -> None:
        decayed = weight * self._decay_factor(row, time_us)
        if decayed < 0:
            raise ValueError("sample weight must be non-negative")
        bucket = self.options.find_bucket(value)
        weights, base = self._weights.writable(row, bucket, bucket + 1)
        current = float(weights[bucket - base])
        if decayed > current - self.epsilon:
            decayed = current
        self.total[row] -= decayed
        weights[bucket - base] -= decayed
        self._update_min_max(row)

    def merge(self, row: int, other: HistogramStore, other_row: int) -> None:
        """decayingHistogram.Merge(other): aligns references, then adds other's buckets."""
        if other.half_life_ns != self.half_life_ns or other.options != self.options:
            raise ValueError("can't merge histograms with different options or half-life")
        mine, theirs = int(self.reference_us[row]), int(other.reference_us[other_row])
        if mine < theirs:
            self._shift_reference(row, theirs)
        elif theirs < mine:
            other._shift_reference(other_row, mine)
        low, high = int(other.min_bucket[other_row]), int(other.max_bucket[other_row])
        if low <= high:
            weights, base = self._weights.writable(row, low, high + 1)
            weights[low - base : high + 1 - base] += other._weights.read(other_row, low, high + 1)
        self.total[row] += other.total[other_row]
        self.min_bucket[row] = min(self.min_bucket[row], low)
        self.max_bucket[row] = max(self.max_bucket[row], high)

    def is_empty(self, row: int) -> bool:
        return self._weights.weight(row, int(self.min_bucket[row])) < self.epsilon

    def percentile(self, row: int, percentile: float) -> float:
        if self.is_empty(row):
            return 0.0
        low, high = int(self.min_bucket[row]), int(self.max_bucket[row])
        threshold = percentile * float(self.total[row])
        weights = self._weights.read(row, low, high).tolist()
        partial = 0.0
        bucket = low
        for weight in weights:
            partial += weight
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self._buckets - 1:
            return self.options.bucket_starts[bucket + 1]
        return self.options.bucket_starts[bucket]

    # -- vectorised operations (many rows; each row at most once per call) ----------------

    def add_samples_rows(
        self, rows: IntArray, values: FloatArray, weights: FloatArray, times_us: IntArray
    ) -> None:
        """``add_sample`` for each ``(row, value, weight, time)``; rows must be distinct."""
        if rows.size == 0:
            return
        limit = self.reference_us[rows] + (self.half_life_ns * MAX_DECAY_EXPONENT) // 1000
        for index in np.nonzero(times_us > limit)[0]:
            self._shift_reference(int(rows[index]), int(times_us[index]))
        delta_ns = (times_us - self.reference_us[rows]) * 1000
        factors = go_exp2_array(delta_ns.astype(np.float64) / float(self.half_life_ns))
        decayed = weights * factors
        buckets = self.options.find_buckets(values)
        heavy = self._weights.add_at(rows, buckets, decayed) >= self.epsilon
        self.total[rows] += decayed
        lower = heavy & (buckets < self.min_bucket[rows])
        self.min_bucket[rows[lower]] = buckets[lower]
        higher = heavy & (buckets > self.max_bucket[rows])
        self.max_bucket[rows[higher]] = buckets[higher]

    def percentiles_rows(self, rows: IntArray, percentiles: Sequence[float]) -> FloatArray:
        """``percentile`` of each row for each of ``percentiles``: shape ``[len(rows), P]``.

        Works through ``rows`` in chunks so the temporaries stay a few MB."""
        result = np.zeros((rows.size, len(percentiles)), dtype=np.float64)
        for start in range(0, rows.size, _CHUNK_ROWS):
            chunk = rows[start : start + _CHUNK_ROWS]
            result[start : start + chunk.size] = self._percentiles_chunk(chunk, percentiles)
        return result

    def _percentiles_chunk(self, rows: IntArray, percentiles: Sequence[float]) -> FloatArray:
        count = rows.size
        result = np.zeros((count, len(percentiles)), dtype=np.float64)
        weights = self.weights_of(rows)
        low = self.min_bucket[rows].astype(np.int64)
        high = self.max_bucket[rows].astype(np.int64)
        columns = np.arange(self._buckets)
        # Go sums buckets low..high-1 in order; zeros outside that range add exactly nothing.
        in_range = (columns[None, :] >= low[:, None]) & (columns[None, :] < high[:, None])
        partial = np.cumsum(np.where(in_range, weights, 0.0), axis=1)
        empty = weights[np.arange(count), low] < self.epsilon
        totals = self.total[rows]
        for column, percentile in enumerate(percentiles):
            threshold = percentile * totals
            reached = in_range & (partial >= threshold[:, None])
            # No bucket reached: Go's loop ends at max(min, max) (it never runs when min >= max).
            first = np.where(reached.any(axis=1), reached.argmax(axis=1), np.maximum(low, high))
            ends = np.where(
                first < self._buckets - 1,
                self.bucket_starts[np.minimum(first + 1, self._buckets - 1)],
                self.bucket_starts[first],
            )
            result[:, column] = np.where(empty, 0.0, ends)
        return result

    # -- checkpoints ----------------------------------------------------------------------

    def save_row(self, row: int) -> tuple[dict[int, int], float]:
        """SaveToChekpoint: ``(bucketWeights, totalWeight)``."""
        low, high = int(self.min_bucket[row]), int(self.max_bucket[row])
        weights = self._weights.read(row, low, high + 1).tolist() if low <= high else []
        heaviest = 0.0
        for weight in weights:
            heaviest = max(heaviest, weight)
        ratio = float(MAX_CHECKPOINT_WEIGHT) / heaviest if heaviest else math.inf
        buckets: dict[int, int] = {}
        for offset, weight in enumerate(weights):
            scaled = weight * ratio
            if math.isnan(scaled):
                continue  # 0 * Inf: Go's uint32(int(NaN)) is 0, dropped
            stored = go_round_half_up(scaled) & 0xFFFFFFFF
            if stored > 0:
                buckets[low + offset] = stored
        return buckets, float(self.total[row])

    def load_row(self, row: int, bucket_weights: Mapping[int, int], total_weight: float) -> None:
        """LoadFromCheckpoint (histogram part), then the epsilon re-scan of min/max."""
        if total_weight < 0:
            raise HistogramCheckpointError(
                f"Cannot load checkpoint with negative weight {total_weight}"
            )
        stored_sum = 0
        for bucket, weight in bucket_weights.items():
            stored_sum += weight
            if bucket >= self._buckets:
                raise HistogramCheckpointError(
                    f"Checkpoint has bucket {bucket} that is exceeding histogram buckets "
                    f"{self._buckets}"
                )
            if bucket < 0:
                raise HistogramCheckpointError(f"Checkpoint has a negative bucket {bucket}")
        if stored_sum == 0:
            return
        ratio = total_weight / float(stored_sum)
        weights, base = self._weights.writable(row, min(bucket_weights), max(bucket_weights) + 1)
        for bucket, weight in bucket_weights.items():
            self.min_bucket[row] = min(self.min_bucket[row], bucket)
            self.max_bucket[row] = max(self.max_bucket[row], bucket)
            weights[bucket - base] += float(weight) * ratio
        self.total[row] += total_weight
        self._update_min_max(row)


class DecayingHistogram:
    """``util.NewDecayingHistogram``: the upstream API on one row of a :class:`HistogramStore`.

    ``DecayingHistogram(options, half_life)`` makes a standalone histogram (its own one-row
    store); :meth:`on_row` wraps a row of a shared store.
    """

    __slots__ = ("_row", "_store")

    def __init__(self, options: HistogramOptions, half_life_ns: int) -> None:
        self._store = HistogramStore(options, half_life_ns, capacity=1)
        self._row = self._store.allocate()

    @classmethod
    def on_row(cls, store: HistogramStore, row: int) -> DecayingHistogram:
        histogram = cls.__new__(cls)
        histogram._store = store
        histogram._row = row
        return histogram

    @property
    def store(self) -> HistogramStore:
        return self._store

    @property
    def row(self) -> int:
        return self._row

    @property
    def options(self) -> HistogramOptions:
        return self._store.options

    @property
    def half_life_ns(self) -> int:
        return self._store.half_life_ns

    @property
    def total_weight(self) -> float:
        return float(self._store.total[self._row])

    @property
    def min_bucket(self) -> int:
        return int(self._store.min_bucket[self._row])

    @property
    def max_bucket(self) -> int:
        return int(self._store.max_bucket[self._row])

    @property
    def reference_us(self) -> int:
        return int(self._store.reference_us[self._row])

    @property
    def reference_timestamp(self) -> datetime:
        return from_go_micros(self.reference_us)

    def bucket_weights(self) -> list[float]:
        return [float(weight) for weight in self._store.row_weights(self._row)]

    def add_sample(self, value: float, weight: float, time: datetime) -> None:
        self._store.add_sample(self._row, value, weight, go_micros(time))

    def subtract_sample(self, value: float, weight: float, time: datetime) -> None:
        self._store.subtract_sample(self._row, value, weight, go_micros(time))

    def merge(self, other: DecayingHistogram) -> None:
        self._store.merge(self._row, other._store, other._row)

    def percentile(self, percentile: float) -> float:
        return self._store.percentile(self._row, percentile)

    def is_empty(self) -> bool:
        return self._store.is_empty(self._row)

    def equals(self, other: DecayingHistogram) -> bool:
        """decayingHistogram.Equals: same options, half-life, reference, min/max, weights
        within 1e-15."""
        if (
            self.options != other.options
            or self.half_life_ns != other.half_life_ns
            or self.reference_us != other.reference_us
            or self.min_bucket != other.min_bucket
            or self.max_bucket != other.max_bucket
        ):
            return False
        low, high = self.min_bucket, self.max_bucket
        mine = self._store.row_weights(self._row)[low : high + 1]
        theirs = other._store.row_weights(other._row)[low : high + 1]
        return bool(np.all(np.abs(mine - theirs) <= 1e-15))

    def save_to_checkpoint(self) -> HistogramCheckpoint:
        """The ``HistogramCheckpoint`` JSON (:func:`checkpoint_format.histogram_json`)."""
        buckets, total = self._store.save_row(self._row)
        return histogram_json(buckets, total, self.reference_us)

    def load_from_checkpoint(self, checkpoint: HistogramCheckpoint) -> None:
        """LoadFromCheckpoint: adds the checkpoint's weights and takes its reference time."""
        bucket_weights, total, reference_us = parse_histogram(checkpoint)
        self._store.load_row(self._row, bucket_weights, total)
        self._store.reference_us[self._row] = reference_us


def as_int_array(values: Sequence[int] | npt.NDArray[Any]) -> IntArray:
    return np.asarray(values, dtype=np.int64)
