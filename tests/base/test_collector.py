"""``bulk_allocation``: the young generation's threshold raised while any holder is inside,
the process's own threshold restored when the last one leaves (success, error, overlap)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kubescale.base.collector import BULK_THRESHOLD, bulk_allocation


@pytest.fixture(autouse=True)
def process_threshold() -> Iterator[tuple[int, ...]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever an earlier test left
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*saved)


def test_raised_inside_restored_after() -> None:
    with bulk_allocation():
        assert gc.get_threshold() == (BULK_THRESHOLD, 10, 10)  # older generations untouched
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_holders_restore_when_the_last_leaves() -> None:
    # two informers listing at once: the first to finish must not end the other's bulk load
    first, second = bulk_allocation(), bulk_allocation()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == BULK_THRESHOLD
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_when_the_block_fails() -> None:
    with pytest.raises(RuntimeError), bulk_allocation():
        raise RuntimeError("the LIST failed")
    assert gc.get_threshold() == (700, 10, 10)
    with bulk_allocation():  # and the next holder raises it again
        assert gc.get_threshold()[0] == BULK_THRESHOLD


@pytest.mark.parametrize(
    ("process", "inside"),
    [
        ((0, 10, 10), (0, 10, 10)),  # automatic collection off: left off
        ((100_000, 5, 5), (100_000, 5, 5)),  # already higher: kept
        ((1_000, 20, 30), (BULK_THRESHOLD, 20, 30)),
    ],
)
def test_the_process_threshold_is_the_floor(
    process: tuple[int, int, int], inside: tuple[int, int, int]
) -> None:
    gc.set_threshold(*process)
    with bulk_allocation():
        assert gc.get_threshold() == inside
    assert gc.get_threshold() == process
