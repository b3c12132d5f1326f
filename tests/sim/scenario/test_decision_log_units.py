"""The summary's units (kubescale/sim/scenario/decision_log.py): Kubernetes' notation, by table."""

from __future__ import annotations

import pytest

from kubescale.sim.scenario.decision_log import human_bytes, human_cores


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
