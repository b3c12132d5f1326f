"""Issue 31, HPA half: the predictive forecast's error model, the reactive frontier, and the
bench's tuning/validation protocol (``bench/hpa_predictive_frontier.py``), on tiny synthetic
series."""

from __future__ import annotations

import json
import lzma
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import hpa_predictive_frontier as bench
from kubescale.controllers.hpa.predictive import DemandHistory, ErrorModel, coverage_from_target

BASE = datetime(2026, 1, 1, tzinfo=UTC)  # epoch minute 29,453,760, a multiple of 4
ONE_MINUTE = timedelta(minutes=1)


def _periodic(minute: int) -> float:
    """2 replicas' worth, 3 every fourth minute (minute ≡ 3 mod 4)."""
    return 3.0 if minute % 4 == 3 else 2.0


def _replay(history: DemandHistory, minutes: int) -> dict[int, int | None]:
    proposals = {}
    for minute in range(minutes):
        now = BASE + minute * ONE_MINUTE
        history.record(now, _periodic(minute))
        proposals[minute] = history.proposal(now, lead=ONE_MINUTE)
    return proposals


# No day of history: the point forecast F(t) is persistence, the mean of the last 3 minutes.
# A 3-minute window misses the "3" only when it is minutes 0,1,2 (mod 4), i.e. t ≡ 2:
#   t ≡ 2: F = 2;            next minute ≡ 3 → 3 → ratio 3 / 2 = 1.5
#   t ≢ 2: F = (2+2+3)/3 = 7/3; next minute is 2 → ratio 2 / (7/3) = 6/7
# (minutes 0 and 1 see only 2s: F = 2, next 2 → ratio 1). So a quarter of the ratios are
# 1.5, about three quarters 6/7, two are 1.
@pytest.mark.parametrize(
    ("coverage", "minute", "expected"),
    [
        # q = 1.5 (the 90th percentile lies among the 1.5s): t ≡ 2 → ceil(2 × 1.5) = 3
        (0.9, 98, 3),
        # t ≡ 0 → ceil(7/3 × 1.5) = ceil(3.5) = 4
        (0.9, 96, 4),
        # q = 6/7 (the median lies among the 6/7s): t ≡ 2 → ceil(2 × 6/7) = ceil(1.71) = 2
        (0.5, 98, 2),
        # t ≡ 0 → ceil(7/3 × 6/7) = ceil(2.0) = 2
        (0.5, 96, 2),
    ],
)
def test_error_model_scales_for_the_residual_quantile(
    coverage: float, minute: int, expected: int
) -> None:
    history = DemandHistory(coverage=coverage)
    proposals = _replay(history, minute + 1)
    assert proposals[minute] == expected


def test_error_model_needs_an_hour_of_scored_forecasts() -> None:
    history = DemandHistory(coverage=0.9)
    proposals = _replay(history, 40)
    # fewer than 60 scored ratios: q = 1, the point forecast alone; t = 38 ≡ 2: ceil(2) = 2
    assert history.quantile() == 1.0
    assert proposals[38] == 2
    with pytest.raises(ValueError, match="coverage"):
        DemandHistory(coverage=1.0)


# The square-root error model on the same series (residual d = √R − √F, proposal
# ceil((√F + q)²)). By minute 98, 98 forecasts are scored (made at minutes 0 … 97):
#   made at 0, 1: F = 2, next 2 → d = 0                                  (2 of them)
#   made at t ≡ 2: F = 2, next 3 → d = √3 − √2 = 1.7321 − 1.4142 = 0.3178  (2, 6, … 94: 24)
#   the rest: F = 7/3, next 2 → d = √2 − √(7/3) = 1.4142 − 1.5275 = −0.1133 (72)
# sorted: 72 × −0.1133, then 2 × 0 (ranks 73, 74), then 24 × 0.3178 (ranks 75 … 98).
@pytest.mark.parametrize(
    ("coverage", "minute", "expected"),
    [
        # rank ceil(0.9 × 98) = 89 → q = √3 − √2: t ≡ 2, F = 2 → (√2 + √3 − √2)² = 3
        (0.9, 98, 3),
        # t ≡ 0, F = 7/3 → (1.5275 + 0.3178)² = 1.8454² = 3.405 → 4
        (0.9, 96, 4),
        # rank ceil(0.75 × 98) = 74 → q = 0: the point forecast: ceil(2) = 2, ceil(7/3) = 3
        (0.75, 98, 2),
        (0.75, 96, 3),
        # rank ceil(0.7 × 98) = 69 → q = √2 − √(7/3): t ≡ 2 → (1.4142 − 0.1133)² = 1.692 → 2;
        # t ≡ 0 → (√(7/3) + √2 − √(7/3))² = 2 → 2
        (0.7, 98, 2),
        (0.7, 96, 2),
    ],
)
def test_square_root_error_model_scales_for_the_residual_quantile(
    coverage: float, minute: int, expected: int
) -> None:
    history = DemandHistory(coverage=coverage, error_model="sqrt")
    proposals = _replay(history, minute + 1)
    assert proposals[minute] == expected


def test_square_root_error_model_holds_relatively_more_headroom_at_low_load() -> None:
    """One residual spread on the square-root scale: with q = 1 (every forecast 1 below the
    peak that came, on that scale), a point forecast of 4 gives (2 + 1)² = 9 (×2.25), one of
    100 gives (10 + 1)² = 121 (×1.21); the ratio model's one q gives one relative headroom."""
    history = DemandHistory(coverage=0.5, error_model="sqrt")
    history._sorted = [1.0] * 60
    ratio = DemandHistory(coverage=0.5)
    ratio._sorted = [1.5] * 60
    for level, expected, expected_ratio in ((4.0, 9, 6), (100.0, 121, 150)):
        for h in (history, ratio):
            h.record(BASE, level)
        assert history.proposal(BASE, lead=ONE_MINUTE) == expected
        assert ratio.proposal(BASE, lead=ONE_MINUTE) == expected_ratio
    # below an hour of residuals: the point forecast (difference 0)
    fresh = DemandHistory(error_model="sqrt")
    fresh.record(BASE, 4.2)
    assert fresh.quantile() == 0.0
    assert fresh.proposal(BASE, lead=ONE_MINUTE) == 5
    with pytest.raises(ValueError, match="error_model"):
        DemandHistory(error_model="log")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "expected"),
    [(70, 0.7), (50, 0.5), (100, 0.99), (1, 0.01)],  # a share; 100 % capped inside (0, 1)
)
def test_coverage_from_target(target: int, expected: float) -> None:
    assert coverage_from_target(target) == pytest.approx(expected)


def test_coverage_from_target_refuses_a_non_percentage() -> None:
    with pytest.raises(ValueError, match="target"):
        coverage_from_target(0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=50.0), min_size=80, max_size=160),
    st.floats(min_value=0.05, max_value=0.5),
    st.floats(min_value=0.5, max_value=0.95),
    st.sampled_from(["ratio", "sqrt"]),
)
def test_a_higher_coverage_never_proposes_fewer_replicas(
    demands: list[float], low: float, high: float, model: ErrorModel
) -> None:
    histories = (
        DemandHistory(coverage=low, error_model=model),
        DemandHistory(coverage=max(low, high), error_model=model),
    )
    for minute, demand in enumerate(demands):
        now = BASE + minute * ONE_MINUTE
        proposals = []
        for history in histories:
            history.record(now, demand)
            proposals.append(history.proposal(now, lead=timedelta(minutes=3)))
        assert proposals[0] is not None
        assert proposals[1] is not None
        assert proposals[0] <= proposals[1]
    # the quantile's defining property: at least `coverage` of the scored ratios lie at or
    # below it
    ratios = sorted(histories[1]._sorted)
    if len(ratios) >= 60:
        q = histories[1].quantile()
        assert sum(r <= q for r in ratios) >= histories[1].coverage * len(ratios)


def _point(target: int, replica_minutes: int, overloaded: int) -> dict[str, Any]:
    return {
        "hpa_target": target,
        "replica_minutes": replica_minutes,
        "overloaded_minutes": overloaded,
    }


def test_frontier_and_interpolation() -> None:
    sweep = [
        _point(50, 400, 10),
        _point(60, 300, 40),
        _point(65, 320, 50),  # beaten by 60 % on both: not on the frontier
        _point(70, 250, 100),
    ]
    front = bench.frontier(sweep)
    assert [p["hpa_target"] for p in front] == [70, 60, 50]
    # 275 lies halfway between 250 (100) and 300 (40): 100 + (40 − 100) × 0.5 = 70
    assert bench.interpolate(front, 275) == pytest.approx(70.0)
    # 350: halfway between 300 (40) and 400 (10): 25; target 60 + (50 − 60) × 0.5 = 55
    assert bench.interpolate(front, 350) == pytest.approx(25.0)
    assert bench.equivalent_target(front, 350) == pytest.approx(55.0)
    assert bench.interpolate(front, 200) is None
    assert bench.interpolate(front, 401) is None


def _series(path: Path, days: int) -> Path:
    """A synthetic series: a daily rise from 200 to 2,000 requests a minute at 12:00."""
    rows = ["period,count"]
    for minute in range(days * 1440):
        moment = BASE + minute * ONE_MINUTE
        count = 2000 if 720 <= minute % 1440 < 900 else 200
        rows.append(f"{moment:%Y-%m-%d %H:%M:%S},{count}")
    with lzma.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(rows) + "\n")
    return path


def _params(path: Path, tuned_on: list[str]) -> Path:
    body = {"tuned_on": tuned_on, "hpa_target": 70, "lead_minutes": 5, "coverage": 0.9}
    path.write_text(json.dumps(body))
    return path


def test_bench_rejects_parameters_tuned_on_a_validation_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tune, check = _series(tmp_path / "a.csv.xz", 1), _series(tmp_path / "b.csv.xz", 1)
    out = tmp_path / "out.json"
    common = ["--tuning", f"a={tune}", "--validation", f"b={check}", "--out", str(out)]
    for tuned_on, message in (
        (["b"], "tuned_on: names validation series b"),
        (["a", "b"], "tuned_on: names validation series b"),
        (["c"], "tuned_on: c is not this run's tuning series (a)"),
    ):
        params = _params(tmp_path / "params.json", tuned_on)
        assert bench.main(["--params", str(params), *common]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert err.count("\n") == 1
        assert not out.exists()
    # a tuning series that is also a validation series is refused before the file is read
    params = _params(tmp_path / "params.json", ["a"])
    assert bench.main(["--params", str(params), *common, "--validation", f"a={tune}"]) == 2
    assert "also a validation series" in capsys.readouterr().err


def test_bench_places_the_predictive_point_on_each_series_frontier(tmp_path: Path) -> None:
    tune, check = _series(tmp_path / "a.csv.xz", 1), _series(tmp_path / "b.csv.xz", 1)
    out, chart = tmp_path / "out.json", tmp_path / "chart.svg"
    params = _params(tmp_path / "params.json", ["a"])
    argv = ["--params", str(params), "--tuning", f"a={tune}", "--validation", f"b={check}"]
    assert bench.main([*argv, "--targets", "60,80", "--out", str(out), "--svg", str(chart)]) == 0
    document = json.loads(out.read_text())
    assert [(s["series"], s["role"]) for s in document["series"]] == [
        ("a", "tuning"),
        ("b", "validation"),
    ]
    for series in document["series"]:
        # busiest minute 2,000 requests → c = 22.94 cores × 60 s ÷ 2,000 = 688.28 ms
        assert series["cpu_ms_per_request"] == pytest.approx(229_426 * 6 / 2000, abs=1e-3)
        assert [p["hpa_target"] for p in series["reactive_sweep"]] == [60, 80]
        low, high = series["reactive_sweep"]
        # a lower target spends more replica-minutes
        assert low["replica_minutes"] > high["replica_minutes"]
        predictive = series["predictive"]
        at = series["frontier_overloaded_at_predictive_replica_minutes"]
        if at is not None:
            assert series["reduction_vs_frontier"] == pytest.approx(
                1 - predictive["overloaded_minutes"] / at
            )
    # the reactive replays do not depend on the parameters: reused, the figures are the same
    again = tmp_path / "again.json"
    reuse = ["--targets", "60,80", "--reuse-sweep", str(out), "--out", str(again)]
    assert bench.main([*argv, *reuse]) == 0
    assert json.loads(again.read_text())["series"] == document["series"]
    svg = chart.read_text()
    assert svg.startswith("<svg")
    assert svg.count("predictive</text>") == 2
    assert math.isfinite(document["seconds"])


def test_bench_reads_the_square_root_model_and_the_coverage_from_the_target(
    tmp_path: Path,
) -> None:
    path = tmp_path / "params.json"
    body: dict[str, Any] = {
        "tuned_on": ["a"],
        "hpa_target": 70,
        "lead_minutes": 5,
        "coverage": "from-target",
        "error_model": "sqrt",
    }
    path.write_text(json.dumps(body))
    params = bench.load_params(path, tuning=["a"], validation=["b"])
    # the HPA's 70 % target is the coverage: 0.7, not a searched number
    assert params.coverage == pytest.approx(0.7)
    assert params.error_model == "sqrt"
    # the committed file of the second attempt names the tuning series only
    committed = bench.load_params(
        bench.HERE / "hpa_predictive_params_sqrt.json",
        tuning=["worldcup98"],
        validation=["nasa-http-1995-07"],
    )
    assert committed.coverage == pytest.approx(0.7)
    assert committed.error_model == "sqrt"
    for field, value, message in (
        ("error_model", "log", "error_model: must be one of ratio, sqrt"),
        ("coverage", "median", 'coverage: must be in (0, 1) or "from-target"'),
    ):
        path.write_text(json.dumps({**body, field: value}))
        with pytest.raises(bench.ProtocolError, match=re.escape(message)) as caught:
            bench.load_params(path, tuning=["a"], validation=["b"])
        assert "\n" not in str(caught.value)
