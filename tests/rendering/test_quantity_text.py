"""Quantities as people read them (kubescale/rendering/quantity_text.py), by table."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.rendering.quantity_text import apart, human_bytes, human_cores


@pytest.mark.parametrize(
    ("cores", "text"),
    [
        (None, "–"),
        (0.126, "126m"),  # below a core: millicores, rounded
        (1.5, "1.50"),  # cores with two decimals
        (999.0, "999.00"),
        (1000.0, "1k"),  # decimal SI past a thousand
        (2.5e6, "2.5M"),
        (1e11, "100G"),  # a VPA's upper bound with few samples (was printed as 1e+11)
    ],
)
def test_human_cores(cores: float | None, text: str) -> None:
    assert human_cores(cores) == text


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (None, "–"),
        (512.0, "512B"),
        (362.6 * 2**20, "362.6Mi"),  # >= 10 of a unit: one decimal
        (1.5 * 2**30, "1.50Gi"),  # < 10 of a unit: two decimals
        (100 * 2**40, "100.0Ti"),
    ],
)
def test_human_bytes(amount: float | None, text: str) -> None:
    assert human_bytes(amount) == text


MIB = 2**20


@pytest.mark.parametrize(
    ("first", "second", "human", "expected"),
    [
        # the complaint: "512.0Mi below the lower bound 512.0Mi" — 1 byte apart is
        # 1 / 2^20 = 0.00000095 Mi: 6 decimals (511.99999905 rounds to 511.999999)
        (512 * MIB - 1, 512 * MIB, human_bytes, ("511.999999Mi", "512.000000Mi")),
        # 0.5 MiB apart: one more decimal than the usual one (511.5 vs 512.0 already differ)
        (511.5 * MIB, 512 * MIB, human_bytes, ("511.5Mi", "512.0Mi")),
        (362.6 * MIB, 362.6 * MIB, human_bytes, ("362.6Mi", "362.6Mi")),  # equal: as usual
        # 126.2m vs 125.8m both round to 126m: one decimal shows them apart
        (0.1262, 0.1258, human_cores, ("126.2m", "125.8m")),
        (1.501, 1.5, human_cores, ("1.501", "1.500")),  # 1.50 each: one more digit
        (1.5, 2.0, human_cores, ("1.50", "2.00")),
    ],
)
def test_values_that_differ_are_shown_apart(
    first: float, second: float, human: Any, expected: tuple[str, str]
) -> None:
    assert apart(first, second, human) == expected


@given(
    st.integers(min_value=0, max_value=2**47),
    st.integers(min_value=0, max_value=2**47),
)
def test_distinct_byte_counts_never_read_the_same(first: int, second: int) -> None:
    shown = apart(float(first), float(second), human_bytes)
    assert (shown[0] == shown[1]) == (first == second), shown
