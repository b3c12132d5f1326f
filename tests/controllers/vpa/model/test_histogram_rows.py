"""Windowed histogram rows against dense rows, bit for bit.

A :class:`HistogramStore` made with ``window=W`` keeps a row in ``W`` buckets until a write
lands outside them. Random operation sequences (samples near and far apart, subtraction,
merges, reference shifts, copies, checkpoint round trips, row reuse) must leave every row of a
windowed store exactly where the same sequence leaves a dense store (which
``test_histogram_reference`` checks against a transliteration of upstream's code), while the
window pool holds rows that never left their window.
"""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.histogram import MEMORY_HISTOGRAM_OPTIONS, HistogramStore
from kubescale.controllers.vpa.model.histogram_rows import BucketRows

HALF_LIFE_NS = 24 * 3600 * 10**9
BASE_US = 63_500_000_000 * 10**6
ROWS = 4


def _bits(values: list[float]) -> list[bytes]:
    return [struct.pack("<d", value) for value in values]


def _same(dense: HistogramStore, windowed: HistogramStore, row: int) -> None:
    assert _bits(windowed.row_weights(row).tolist()) == _bits(dense.row_weights(row).tolist())
    assert _bits([float(windowed.total[row])]) == _bits([float(dense.total[row])])
    assert int(windowed.min_bucket[row]) == int(dense.min_bucket[row])
    assert int(windowed.max_bucket[row]) == int(dense.max_bucket[row])
    assert int(windowed.reference_us[row]) == int(dense.reference_us[row])
    assert windowed.save_row(row) == dense.save_row(row)
    assert windowed.is_empty(row) == dense.is_empty(row)


memory = st.one_of(
    st.floats(min_value=0.0, max_value=2e12, allow_nan=False),
    st.sampled_from([0.0, 1e7, 5e8, 5.1e8, 5.3e8, 2e9, 1e12]),
)
operation = st.tuples(
    st.sampled_from(["add", "add", "add", "subtract", "merge", "copy", "reload", "release"]),
    st.integers(min_value=0, max_value=ROWS - 1),
    st.integers(min_value=0, max_value=ROWS - 1),
    memory,
    st.integers(min_value=0, max_value=30 * 24 * 3600),
)


@settings(max_examples=200, deadline=None)
@given(
    ops=st.lists(operation, min_size=1, max_size=40),
    window=st.sampled_from([1, 3, 16]),
    batch=st.lists(memory, min_size=ROWS, max_size=ROWS),
)
def test_windowed_rows_match_dense_rows(
    ops: list[tuple[str, int, int, float, int]], window: int, batch: list[float]
) -> None:
    dense = HistogramStore(MEMORY_HISTOGRAM_OPTIONS, HALF_LIFE_NS, capacity=3)
    windowed = HistogramStore(MEMORY_HISTOGRAM_OPTIONS, HALF_LIFE_NS, capacity=3, window=window)
    rows = [(dense.allocate(), windowed.allocate()) for _ in range(ROWS)]
    assert all(mine == theirs for mine, theirs in rows)
    now_us = BASE_US
    for kind, row, other, value, seconds in ops:
        now_us += seconds * 10**6
        for store in (dense, windowed):
            if kind == "add":
                store.add_sample(row, value, 1.0, now_us)
            elif kind == "subtract":
                store.subtract_sample(row, value, 1.0, now_us)
            elif kind == "merge":
                store.merge(row, store, other)
            elif kind == "copy":
                store.copy_row(other, row)
            elif kind == "reload":
                buckets, total = store.save_row(other)
                reference_us = int(store.reference_us[other])
                store.load_row(row, buckets, total)
                store.reference_us[row] = reference_us
            else:
                store.release(row)
                assert store.allocate() == row
        for index in range(ROWS):
            _same(dense, windowed, index)
    all_rows = np.arange(ROWS, dtype=np.int64)
    times = np.full(ROWS, now_us + 3600 * 10**6, dtype=np.int64)
    for store in (dense, windowed):
        store.add_samples_rows(all_rows, np.array(batch), np.ones(ROWS), times)
    for index in range(ROWS):
        _same(dense, windowed, index)
    queries = [0.0, 0.5, 0.9, 0.95, 1.0]
    assert _bits(windowed.percentiles_rows(all_rows, queries).ravel().tolist()) == _bits(
        dense.percentiles_rows(all_rows, queries).ravel().tolist()
    )
    for index in range(ROWS):
        assert [windowed.percentile(index, q) for q in queries] == [
            dense.percentile(index, q) for q in queries
        ]


def test_a_row_stays_in_its_window_until_a_write_lands_outside() -> None:
    rows = BucketRows(176, window=4, block_rows=2)
    rows.ensure_rows(2)
    assert rows.nbytes == 0  # no storage before the first write
    weights, base = rows.writable(0, 40, 41)
    assert (base, weights.size) == (38, 4)  # the written bucket centred in four
    weights[2] = 2.5
    assert rows.nbytes == 2 * 4 * 8  # one block of two four-bucket slots
    assert rows.read(0, 38, 44).tolist() == [0.0, 0.0, 2.5, 0.0, 0.0, 0.0]
    assert rows.weight(0, 40) == 2.5
    assert rows.weight(0, 100) == 0.0
    # A write beyond the window moves the row to a dense slot, weights in place.
    dense, dense_base = rows.writable(0, 50, 51)
    assert (dense_base, dense.size) == (0, 176)
    assert np.flatnonzero(dense).tolist() == [40]
    assert dense[40] == 2.5
    assert rows.nbytes == 2 * 4 * 8 + 2 * 176 * 8
    # The released window slot is reused, zeroed.
    reused, _ = rows.writable(1, 0, 1)
    assert reused.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert rows.dense_rows(np.array([1, 0])).nonzero()[1].tolist() == [40]
