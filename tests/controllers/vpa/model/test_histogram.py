"""Histogram rules, as tables from upstream's ``util/*_test.go`` and the reference (§2.3)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from kubescale.controllers.vpa.model.go_math import go_micros, round_time
from kubescale.controllers.vpa.model.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    EPSILON,
    MAX_CHECKPOINT_WEIGHT,
    MEMORY_HISTOGRAM_OPTIONS,
    DecayingHistogram,
    ExponentialHistogramOptions,
    HistogramCheckpointError,
    HistogramOptions,
    HistogramStore,
    LinearHistogramOptions,
)
from kubescale.objects.vpa_checkpoint import HistogramCheckpoint

HOUR = 3600 * 10**9
DAY = 24 * HOUR
START = datetime.fromtimestamp(1234567890, UTC)  # upstream's decaying_histogram_test startTime
ALIGNED = datetime(2018, 1, 2, 3, tzinfo=UTC)  # a whole hour: samples there weigh exactly 1x
# histogram_options_test.go: NewExponentialHistogramOptions(500, 40, 1.5, epsilon).
SMALL = ExponentialHistogramOptions(
    max_value=500.0, first_bucket_size=40.0, ratio=1.5, epsilon=EPSILON
)


def test_both_kinds_are_histogram_options() -> None:
    assert isinstance(SMALL, HistogramOptions)
    assert isinstance(LINEAR, HistogramOptions)


def test_exponential_options_table() -> None:
    assert SMALL.num_buckets == 6
    assert [SMALL.bucket_start(n) for n in range(6)] == [0.0, 40.0, 100.0, 190.0, 325.0, 527.5]
    cases = {-1.0: 0, 39.99: 0, 40.0: 1, 100.0: 2, 900.0: 5}
    assert {value: SMALL.find_bucket(value) for value in cases} == cases
    with pytest.raises(IndexError):
        SMALL.bucket_start(6)


# histogram_options_test.go: NewLinearHistogramOptions(5.0, 0.3, epsilon).
LINEAR = LinearHistogramOptions(max_value=5.0, bucket_size=0.3, epsilon=0.001)


def test_linear_options_table() -> None:
    # NumBuckets = int(ceil(5.0 / 0.3)) + 1 = ceil(16.67) + 1 = 18; bucket n starts at n * 0.3
    # (17 * 0.3 = 5.1, the first start >= maxValue); FindBucket = int(v / 0.3) clamped to
    # [0, 17]: -1.0 -> int(-3.33) = -3 -> 0, 1.3 -> int(4.33) = 4, 100.0 -> 333 -> 17.
    assert LINEAR.epsilon == 0.001
    assert LINEAR.num_buckets == 18
    assert (LINEAR.bucket_start(0), LINEAR.bucket_start(17)) == (0.0, 5.1)
    cases = {-1.0: 0, 0.0: 0, 1.3: 4, 100.0: 17}
    assert {value: LINEAR.find_bucket(value) for value in cases} == cases
    values = np.array(list(cases))
    assert LINEAR.find_buckets(values).tolist() == list(cases.values())
    with pytest.raises(IndexError):
        LINEAR.bucket_start(18)
    for bad in ((0.0, 0.3, 0.001), (5.0, 0.0, 0.001), (5.0, 0.3, 0.0)):
        with pytest.raises(ValueError, match="must both be positive"):
            LinearHistogramOptions(max_value=bad[0], bucket_size=bad[1], epsilon=bad[2])


def test_a_histogram_on_linear_buckets() -> None:
    # histogram_test.go's percentile rule on linear buckets of 1.0 up to 10 (11 buckets): samples
    # 1.5 (weight 1), 4.2 (weight 2), 7.9 (weight 1) land in buckets 1, 4, 7; total weight 4.
    # P25 reaches 1 of 4 in bucket 1 -> its end, 2.0; P50 and P75 reach 2 and 3 in bucket 4 ->
    # 5.0; P100 bucket 7 -> 8.0. A checkpoint round trip keeps the same percentiles.
    options = LinearHistogramOptions(max_value=10.0, bucket_size=1.0, epsilon=EPSILON)
    histogram = DecayingHistogram(options, DAY)
    for value, weight in ((1.5, 1.0), (4.2, 2.0), (7.9, 1.0)):
        histogram.add_sample(value, weight, ALIGNED)
    assert [histogram.percentile(p) for p in (0.25, 0.5, 0.75, 1.0)] == [2.0, 5.0, 5.0, 8.0]
    restored = DecayingHistogram(options, DAY)
    restored.load_from_checkpoint(histogram.save_to_checkpoint())
    assert [restored.percentile(p) for p in (0.25, 0.5, 0.75, 1.0)] == [2.0, 5.0, 5.0, 8.0]


def test_cpu_and_memory_bucketing_has_176_buckets() -> None:
    assert CPU_HISTOGRAM_OPTIONS.num_buckets == 176
    assert MEMORY_HISTOGRAM_OPTIONS.num_buckets == 176
    # Bucket starts in millicores as listed in kubernetes/autoscaler#7554.
    millicores = {1: 10.0, 2: 20.5, 3: 31.525, 4: 43.1013, 36: 958.3632, 37: 1016.2814}
    for bucket, expected in millicores.items():
        assert CPU_HISTOGRAM_OPTIONS.bucket_start(bucket) * 1000 == pytest.approx(
            expected, abs=1e-4
        )
    # The memory scheme is the CPU one scaled by 1e9 (10 MB first bucket).
    for bucket in (1, 36, 37, 100, 175):
        assert MEMORY_HISTOGRAM_OPTIONS.bucket_start(bucket) == pytest.approx(
            CPU_HISTOGRAM_OPTIONS.bucket_start(bucket) * 1e9, rel=1e-12
        )
    # The last bucket starts at or above the maximum value.
    assert CPU_HISTOGRAM_OPTIONS.bucket_start(175) >= 1000.0
    assert CPU_HISTOGRAM_OPTIONS.bucket_start(174) < 1000.0


@pytest.mark.parametrize(
    ("cores", "bucket"),
    [(0.0, 0), (0.0099, 0), (0.01, 1), (0.03, 2), (1.0, 36), (1e6, 175)],
)
def test_cpu_find_bucket(cores: float, bucket: int) -> None:
    assert CPU_HISTOGRAM_OPTIONS.find_bucket(cores) == bucket


def test_bucket_start_is_where_find_bucket_switches() -> None:
    for bucket in range(1, 176):
        start = CPU_HISTOGRAM_OPTIONS.bucket_start(bucket)
        assert CPU_HISTOGRAM_OPTIONS.find_bucket(start * (1 + 1e-9)) == bucket
        assert CPU_HISTOGRAM_OPTIONS.find_bucket(start * (1 - 1e-9)) == bucket - 1


def _hist(half_life_ns: int = HOUR) -> DecayingHistogram:
    return DecayingHistogram(SMALL, half_life_ns)


def test_percentile_of_empty_histogram_is_zero() -> None:
    histogram = _hist()
    assert [histogram.percentile(p) for p in (-0.5, 0.0, 0.5, 1.0, 1.5)] == [0.0] * 5


def test_percentile_is_the_end_of_the_bucket() -> None:
    # TestPercentiles, on exponential buckets: weights 1, 2, 3, 4 in buckets 1..4.
    histogram = _hist()
    for bucket, weight in zip((45.0, 120.0, 200.0, 400.0), (1.0, 2.0, 3.0, 4.0), strict=True):
        histogram.add_sample(bucket, weight, START)
    table = {0.0: 100.0, 0.1: 100.0, 0.2: 190.0, 0.3: 190.0, 0.4: 325.0, 0.6: 325.0}
    table |= {0.61: 527.5, 0.9: 527.5, 1.0: 527.5}
    assert {p: histogram.percentile(p) for p in table} == table


def test_percentile_in_the_last_bucket_is_its_start() -> None:
    histogram = _hist()
    histogram.add_sample(10_000.0, 1.0, START)
    assert histogram.percentile(0.5) == 527.5


def test_is_empty_uses_epsilon() -> None:
    # TestEmptyHistogram: epsilon * 2.5, minus epsilon twice.
    histogram = _hist()
    assert histogram.is_empty()
    histogram.add_sample(45.0, EPSILON * 2.5, START)
    assert not histogram.is_empty()
    histogram.subtract_sample(45.0, EPSILON, START)
    assert not histogram.is_empty()
    histogram.subtract_sample(45.0, EPSILON, START)
    assert histogram.is_empty()


def test_light_sample_does_not_move_min_bucket() -> None:
    # TestNonEmptyOnEpsilonAddition: an epsilon*0.3 sample below a heavy one keeps min bucket.
    histogram = _hist()
    histogram.add_sample(400.0, EPSILON * 3, START)
    histogram.add_sample(45.0, EPSILON * 0.3, START)
    histogram.add_sample(1e9, EPSILON * 0.3, START)
    assert not histogram.is_empty()
    assert (histogram.min_bucket, histogram.max_bucket) == (4, 4)


def test_simple_decay() -> None:
    # TestSimpleDecay: a 1000-weight sample 20 half-lives older loses to a weight-1 sample.
    histogram = _hist()
    histogram.add_sample(120.0, 1000.0, START)
    histogram.add_sample(45.0, 1.0, START + timedelta(hours=20))
    assert histogram.percentile(0.999) == 100.0
    assert histogram.percentile(1.0) == 190.0


def test_long_term_decay_shifts_the_reference() -> None:
    # TestLongtermDecay: after > 100 half-lives the old sample decays below epsilon.
    histogram = _hist()
    histogram.add_sample(120.0, 1.0, START)
    histogram.add_sample(45.0, 1.0, START + timedelta(hours=101))
    assert histogram.percentile(1.0) == 100.0
    assert histogram.reference_us == round_time(go_micros(START + timedelta(hours=101)), HOUR)


def test_decaying_percentiles() -> None:
    # TestDecayingHistogramPercentiles: weights 1..4, one half-life apart.
    histogram = _hist()
    for index, value in enumerate((45.0, 120.0, 200.0, 400.0)):
        histogram.add_sample(value, float(index + 1), START + timedelta(hours=index))
    table = {0.0: 100.0, 0.02: 100.0, 0.03: 190.0, 0.10: 190.0, 0.11: 325.0, 0.34: 325.0}
    table |= {0.35: 527.5, 1.0: 527.5}
    assert {p: histogram.percentile(p) for p in table} == table


def test_reference_time_rounds_to_midnight_with_ties_up() -> None:
    histogram = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    histogram.add_sample(1.0, 0.1, datetime(2024, 3, 5, 11, 59, 59, tzinfo=UTC))
    assert histogram.reference_timestamp == datetime(2024, 3, 5, tzinfo=UTC)
    noon = DecayingHistogram(CPU_HISTOGRAM_OPTIONS, DAY)
    noon.add_sample(1.0, 0.1, datetime(2024, 3, 5, 12, tzinfo=UTC))
    assert noon.reference_timestamp == datetime(2024, 3, 6, tzinfo=UTC)
    # The sample before the reference weighs 0.1 * 2**-0.5.
    assert noon.total_weight == pytest.approx(0.1 * 2**-0.5, rel=1e-15)


def test_merge_aligns_the_older_reference() -> None:
    # TestDecayingHistogramMerge.
    h1, h2, expected = _hist(), _hist(), _hist()
    h1.add_sample(45.0, 1.0, START)
    h1.add_sample(120.0, 1.0, START + timedelta(hours=1))
    h2.add_sample(120.0, 1.0, START + timedelta(hours=2))
    h2.add_sample(200.0, 1.0, START + timedelta(hours=1))
    for value, hours in ((120.0, 2), (120.0, 1), (200.0, 1), (45.0, 0)):
        expected.add_sample(value, 1.0, START + timedelta(hours=hours))
    h1.merge(h2)
    assert h1.equals(expected)


def test_subtract_clamps_to_the_bucket_weight() -> None:
    histogram = _hist()
    histogram.add_sample(45.0, 1.0, START)
    histogram.subtract_sample(45.0, 1.0 + EPSILON / 2, START)
    assert histogram.bucket_weights()[1] == 0.0
    assert histogram.total_weight == 0.0
    assert histogram.is_empty()


# -- checkpoints (histogram_test.go) -------------------------------------------------------------


def test_save_empty_histogram() -> None:
    saved = _hist().save_to_checkpoint()
    assert saved == {"referenceTimestamp": None}


def test_save_scales_the_heaviest_bucket_to_10000() -> None:
    histogram = _hist()
    histogram.add_sample(45.0, 1.0, ALIGNED)
    saved = histogram.save_to_checkpoint()
    assert saved["bucketWeights"] == {"1": MAX_CHECKPOINT_WEIGHT}
    assert saved["totalWeight"] == 1.0


def test_save_drops_relatively_small_buckets() -> None:
    histogram = _hist()
    histogram.add_sample(45.0, 1.0, ALIGNED)
    histogram.add_sample(120.0, 100000.0, ALIGNED)
    saved = histogram.save_to_checkpoint()
    assert saved["bucketWeights"] == {"2": 10000}
    assert saved["totalWeight"] == 100001.0


def test_save_multiple_values() -> None:
    histogram = _hist()
    for value, weight in ((45.0, 1.0), (120.0, 10000.0), (200.0, 50.0)):
        histogram.add_sample(value, weight, ALIGNED)
    saved = histogram.save_to_checkpoint()
    assert saved["bucketWeights"] == {"1": 1, "2": 10000, "3": 50}
    assert saved["totalWeight"] == 10051.0


def test_load_spreads_the_total_weight() -> None:
    histogram = _hist()
    histogram.load_from_checkpoint(
        {"totalWeight": 6.0, "bucketWeights": {"0": 1, "1": 2}, "referenceTimestamp": None}
    )
    assert histogram.total_weight == 6.0
    assert histogram.bucket_weights()[:2] == [2.0, 4.0]


def test_load_takes_the_reference_timestamp() -> None:
    histogram = _hist()
    histogram.load_from_checkpoint(
        {
            "totalWeight": 6.0,
            "bucketWeights": {"0": 1},
            "referenceTimestamp": "2018-01-02T03:04:05Z",
        }
    )
    assert not histogram.is_empty()
    assert histogram.reference_timestamp == datetime(2018, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "checkpoint",
    [
        {"totalWeight": 1.0, "bucketWeights": {"-1": 1}},
        {"totalWeight": 1.0, "bucketWeights": {"99": 1}},
        {"totalWeight": -1.0, "bucketWeights": {}},
    ],
)
def test_load_rejects_invalid_checkpoints(checkpoint: HistogramCheckpoint) -> None:
    with pytest.raises(HistogramCheckpointError):
        _hist().load_from_checkpoint(checkpoint)


def test_load_drops_buckets_below_epsilon_from_min_max() -> None:
    # kubernetes/autoscaler#7726/#7886: weights that round below epsilon on load no longer
    # make the histogram look empty.
    histogram = DecayingHistogram(MEMORY_HISTOGRAM_OPTIONS, DAY)
    histogram.load_from_checkpoint({"totalWeight": 0.9, "bucketWeights": {"10": 1, "40": 10000}})
    assert histogram.bucket_weights()[10] < EPSILON
    assert (histogram.min_bucket, histogram.max_bucket) == (40, 40)
    assert not histogram.is_empty()
    assert histogram.percentile(0.5) == MEMORY_HISTOGRAM_OPTIONS.bucket_start(41)


def test_epsilon_is_exactly_upstreams_constant() -> None:
    # 0.001 * minSampleWeight is a Go constant expression: exactly 1e-4, not 0.001 * 0.1.
    assert EPSILON == 1e-4
    assert math.isclose(EPSILON, 0.001 * 0.1)


# -- the epsilon of the options (histogram.go reads h.options.Epsilon(), not a constant) --------

# SMALL's buckets with epsilon 0.5: starts 0, 40, 100, 190, 325, 527.5; 45 → bucket 1, 200 → 3.
COARSE = ExponentialHistogramOptions(
    max_value=500.0, first_bucket_size=40.0, ratio=1.5, epsilon=0.5
)


def _coarse() -> DecayingHistogram:
    return DecayingHistogram(COARSE, HOUR)


def test_a_sample_lighter_than_the_options_epsilon_leaves_the_histogram_empty() -> None:
    histogram = _coarse()
    # 0.3 < 0.5: AddSample does not move min/max, and IsEmpty reads bucket min (5, weight 0).
    histogram.add_sample(45.0, 0.3, ALIGNED)
    assert histogram.is_empty()
    assert histogram.percentile(0.5) == 0.0
    # 0.3 + 0.3 = 0.6 >= 0.5: bucket 1 becomes min and max; P50 is the end of bucket 1 (100).
    histogram.add_sample(45.0, 0.3, ALIGNED)
    assert not histogram.is_empty()
    assert (histogram.min_bucket, histogram.max_bucket) == (1, 1)
    assert histogram.percentile(0.5) == 100.0


def test_subtract_clamps_within_the_options_epsilon() -> None:
    histogram = _coarse()
    histogram.add_sample(45.0, 1.0, ALIGNED)
    # 0.6 > 1.0 - 0.5: SubtractSample takes the whole bucket (with epsilon 1e-4 0.4 would stay).
    histogram.subtract_sample(45.0, 0.6, ALIGNED)
    assert histogram.bucket_weights()[1] == 0.0
    assert histogram.total_weight == 0.0
    assert histogram.is_empty()


def test_loading_drops_buckets_under_the_options_epsilon() -> None:
    histogram = _coarse()
    # ratio = totalWeight / Σstored = 1.0 / 10: bucket 1 weighs 0.3 (< 0.5), bucket 3 0.7.
    histogram.load_from_checkpoint({"totalWeight": 1.0, "bucketWeights": {"1": 3, "3": 7}})
    assert (histogram.min_bucket, histogram.max_bucket) == (3, 3)
    # P10: threshold 0.1 reached in bucket 3 → its end, the start of bucket 4 (325).
    assert histogram.percentile(0.1) == 325.0


def test_vectorised_rows_use_the_options_epsilon() -> None:
    store = HistogramStore(COARSE, HOUR, capacity=2)
    rows = np.array([store.allocate(), store.allocate()], dtype=np.int64)
    at = np.full(2, go_micros(ALIGNED), dtype=np.int64)
    # Row 0 gets 0.3 (under epsilon: stays empty), row 1 gets 0.7 at 200 (bucket 3).
    store.add_samples_rows(rows, np.array([45.0, 200.0]), np.array([0.3, 0.7]), at)
    assert [store.is_empty(int(row)) for row in rows] == [True, False]
    # P50: row 0 is empty → 0; row 1's only bucket is 3 → its end, 325.
    assert store.percentiles_rows(rows, [0.5]).tolist() == [[0.0], [325.0]]


# -- updateMinAndMaxBucket reads the row only when an end bucket lost its weight (issue 29) ------


@pytest.mark.parametrize(
    ("subtracted", "scans", "ends"),
    [
        # Weight 1 at 45 and at 200: SMALL's buckets start at 0, 40, 100 (40 + 40 * 1.5),
        # 190 (+ 60 * 1.5), 325 (+ 90 * 1.5), so buckets 1 and 3. Subtracting half of 45's
        # keeps weight at both ends -> no row scan.
        (0.5, 0, (1, 3)),
        # Subtracting all of 45's empties the low end -> one scan, the low end moves to 3.
        (1.0, 1, (3, 3)),
    ],
)
def test_min_max_update_reads_the_row_only_when_an_end_emptied(
    subtracted: float, scans: int, ends: tuple[int, int]
) -> None:
    store = HistogramStore(SMALL, 24 * HOUR, capacity=1)
    row = store.allocate()
    moment = go_micros(ALIGNED)
    store.add_sample(row, 45.0, 1.0, moment)
    store.add_sample(row, 200.0, 1.0, moment)
    before = store.row_scans
    store.subtract_sample(row, 45.0, subtracted, moment)
    assert store.row_scans - before == scans
    assert (int(store.min_bucket[row]), int(store.max_bucket[row])) == ends
