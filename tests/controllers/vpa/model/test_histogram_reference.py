"""The columnar histogram store against a plain scalar transliteration of upstream's code.

:class:`ScalarHistogram` below is the reference: Python lists, one object per histogram, each
method a line-by-line reading of ``histogram.go``/``decaying_histogram.go`` (Go's float
functions come from :mod:`kubescale.controllers.vpa.model.go_math`, tested on their own). Random
operation sequences must leave the store's rows — through the per-row API and through the vectorised
``*_rows`` methods — bit-for-bit where the reference ends up.
"""

from __future__ import annotations

import math
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.go_math import (
    go_exp2,
    go_exp2_array,
    go_log,
    go_log_array,
    go_pow,
    go_pow_int_array,
    go_round_half_up,
    round_time,
    saturating_sub_ns,
)
from kubescale.controllers.vpa.model.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    EPSILON,
    MEMORY_HISTOGRAM_OPTIONS,
    HistogramOptions,
    HistogramStore,
)

HALF_LIFE_NS = 24 * 3600 * 10**9
BASE_US = 63_500_000_000 * 10**6  # 2013 in microseconds since Go's zero time


class ScalarHistogram:
    """decayingHistogram, transliterated."""

    def __init__(self, options: HistogramOptions, half_life_ns: int) -> None:
        self.options = options
        self.half_life_ns = half_life_ns
        count = options.num_buckets
        self.weights = [0.0] * count
        self.total = 0.0
        self.min_bucket = count - 1
        self.max_bucket = 0
        self.reference_us = 0

    def _update_min_max(self) -> None:
        last = len(self.weights) - 1
        while self.weights[self.min_bucket] < EPSILON and self.min_bucket < last:
            self.min_bucket += 1
        while self.weights[self.max_bucket] < EPSILON and self.max_bucket > 0:
            self.max_bucket -= 1

    def _scale(self, factor: float) -> None:
        for bucket in range(self.min_bucket, self.max_bucket + 1):
            self.weights[bucket] *= factor
        self.total *= factor
        self._update_min_max()

    def _shift(self, new_reference_us: int) -> None:
        new_reference_us = round_time(new_reference_us, self.half_life_ns)
        exponent = go_round_half_up(
            float(saturating_sub_ns(self.reference_us, new_reference_us)) / float(self.half_life_ns)
        )
        self._scale(math.ldexp(1.0, exponent))
        self.reference_us = new_reference_us

    def _decay(self, time_us: int) -> float:
        if time_us > self.reference_us + self.half_life_ns * 100 // 1000:
            self._shift(time_us)
        return go_exp2(
            float(saturating_sub_ns(time_us, self.reference_us)) / float(self.half_life_ns)
        )

    def add(self, value: float, weight: float, time_us: int) -> None:
        weight = weight * self._decay(time_us)
        bucket = self.options.find_bucket(value)
        self.weights[bucket] += weight
        self.total += weight
        if bucket < self.min_bucket and self.weights[bucket] >= EPSILON:
            self.min_bucket = bucket
        if bucket > self.max_bucket and self.weights[bucket] >= EPSILON:
            self.max_bucket = bucket

    def subtract(self, value: float, weight: float, time_us: int) -> None:
        weight = weight * self._decay(time_us)
        bucket = self.options.find_bucket(value)
        if weight > self.weights[bucket] - EPSILON:
            weight = self.weights[bucket]
        self.total -= weight
        self.weights[bucket] -= weight
        self._update_min_max()

    def merge(self, other: ScalarHistogram) -> None:
        if self.reference_us < other.reference_us:
            self._shift(other.reference_us)
        elif other.reference_us < self.reference_us:
            other._shift(self.reference_us)
        for bucket in range(other.min_bucket, other.max_bucket + 1):
            self.weights[bucket] += other.weights[bucket]
        self.total += other.total
        self.min_bucket = min(self.min_bucket, other.min_bucket)
        self.max_bucket = max(self.max_bucket, other.max_bucket)

    def percentile(self, percentile: float) -> float:
        if self.weights[self.min_bucket] < EPSILON:
            return 0.0
        partial = 0.0
        threshold = percentile * self.total
        bucket = self.min_bucket
        while bucket < self.max_bucket:
            partial += self.weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.options.num_buckets - 1:
            return self.options.bucket_start(bucket + 1)
        return self.options.bucket_start(bucket)


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _same_row(store: HistogramStore, row: int, reference: ScalarHistogram) -> None:
    assert [_bits(w) for w in store.row_weights(row).tolist()] == [
        _bits(w) for w in reference.weights
    ]
    assert _bits(float(store.total[row])) == _bits(reference.total)
    assert int(store.min_bucket[row]) == reference.min_bucket
    assert int(store.max_bucket[row]) == reference.max_bucket
    assert int(store.reference_us[row]) == reference.reference_us


values = st.one_of(
    st.floats(min_value=0.0, max_value=2000.0, allow_nan=False),
    st.sampled_from([0.0, 0.01, 0.0205, 1.0, 1.0162814, 999.9, 1000.0]),
)
steps = st.integers(min_value=0, max_value=3 * 24 * 3600)  # seconds of progress per step
operations = st.lists(
    st.tuples(st.sampled_from(["add", "add", "add", "subtract", "merge"]), values, steps),
    min_size=1,
    max_size=40,
)
percentiles = st.lists(st.floats(min_value=-0.1, max_value=1.1), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(ops=operations, queries=percentiles, weight=st.sampled_from([0.1, 1.0, 0.00003]))
def test_row_operations_match_the_reference(
    ops: list[tuple[str, float, int]], queries: list[float], weight: float
) -> None:
    store = HistogramStore(CPU_HISTOGRAM_OPTIONS, HALF_LIFE_NS, capacity=1)
    row, other_row = store.allocate(), store.allocate()
    reference = ScalarHistogram(CPU_HISTOGRAM_OPTIONS, HALF_LIFE_NS)
    now_us = BASE_US
    for kind, value, seconds in ops:
        now_us += seconds * 10**6
        if kind == "add":
            store.add_sample(row, value, weight, now_us)
            reference.add(value, weight, now_us)
        elif kind == "subtract":
            store.subtract_sample(row, value, weight, now_us)
            reference.subtract(value, weight, now_us)
        else:
            other = ScalarHistogram(CPU_HISTOGRAM_OPTIONS, HALF_LIFE_NS)
            store._reset(other_row)
            store.add_sample(other_row, value, weight, now_us)
            other.add(value, weight, now_us)
            store.merge(row, store, other_row)
            reference.merge(other)
            _same_row(store, other_row, other)
        _same_row(store, row, reference)
    for query in queries:
        assert store.percentile(row, query) == reference.percentile(query)


@settings(max_examples=60, deadline=None)
@given(
    histories=st.lists(
        st.lists(st.tuples(values, steps), min_size=0, max_size=15), min_size=1, max_size=12
    ),
    batch=st.lists(st.tuples(values, steps), min_size=12, max_size=12),
    queries=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=3),
)
def test_vectorised_rows_match_the_reference(
    histories: list[list[tuple[float, int]]],
    batch: list[tuple[float, int]],
    queries: list[float],
) -> None:
    store = HistogramStore(MEMORY_HISTOGRAM_OPTIONS, HALF_LIFE_NS, capacity=3)
    rows = [store.allocate() for _ in histories]
    references = []
    for row, history in zip(rows, histories, strict=True):
        reference = ScalarHistogram(MEMORY_HISTOGRAM_OPTIONS, HALF_LIFE_NS)
        now_us = BASE_US
        for value, seconds in history:
            now_us += seconds * 10**6
            store.add_sample(row, value * 1e9, 1.0, now_us)
            reference.add(value * 1e9, 1.0, now_us)
        references.append((reference, now_us))
    # One more sample per row, all rows at once.
    times = [
        now + seconds * 10**6
        for (_, now), (_, seconds) in zip(references, batch[: len(references)], strict=True)
    ]
    sample_values = [value * 1e9 for value, _ in batch[: len(rows)]]
    store.add_samples_rows(
        np.array(rows, dtype=np.int64),
        np.array(sample_values),
        np.ones(len(rows)),
        np.array(times[: len(rows)], dtype=np.int64),
    )
    for (reference, _), value, time_us in zip(references, sample_values, times, strict=False):
        reference.add(value, 1.0, time_us)
    for row, (reference, _) in zip(rows, references, strict=True):
        _same_row(store, row, reference)
    table = store.percentiles_rows(np.array(rows, dtype=np.int64), queries)
    for index, (reference, _) in enumerate(references):
        assert table[index].tolist() == [reference.percentile(q) for q in queries]


# -- Go's float functions ------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-300, max_value=1e300))
def test_go_log_is_within_an_ulp_and_vectorises_exactly(x: float) -> None:
    assert abs(go_log(x) - math.log(x)) <= 2 * math.ulp(math.log(x))
    assert _bits(float(go_log_array(np.array([x]))[0])) == _bits(go_log(x))


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-200.0, max_value=200.0))
def test_go_exp2_is_within_an_ulp_and_vectorises_exactly(x: float) -> None:
    assert abs(go_exp2(x) - 2.0**x) <= 2 * math.ulp(2.0**x)
    assert _bits(float(go_exp2_array(np.array([x]))[0])) == _bits(go_exp2(x))


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0.5, max_value=2.0), st.sampled_from([1, 2, 3, 37, 175, -1, -2]))
def test_go_pow_integer_exponents(x: float, y: int) -> None:
    expected = x**y
    assert math.isclose(go_pow(x, float(y)), expected, rel_tol=1e-13)
    assert _bits(float(go_pow_int_array(np.array([x]), y)[0])) == _bits(go_pow(x, float(y)))


def test_go_pow_special_cases() -> None:
    assert go_pow(math.inf, 1.0) == math.inf
    assert go_pow(math.inf, -2.0) == 0.0
    assert go_pow(1.0, -2.0) == 1.0
    assert go_pow(2.0, 0.0) == 1.0
    assert go_pow(4.0, 0.5) == 2.0
    assert math.isnan(go_pow(-2.0, 0.5))
