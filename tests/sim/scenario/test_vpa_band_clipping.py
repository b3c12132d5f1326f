"""The VPA band chart's upper bound (issue 32.6): upstream's first bound is all but unbounded
(100 G cores, 90 TiB) — drawn as is it set the axis and flattened target and usage; left out,
it was drawn nowhere. It is clipped at 4× the largest other value and marked where it is."""

from __future__ import annotations

from datetime import UTC, datetime

from kubescale.sim.scenario.html_autoscaling import clip_upper
from kubescale.sim.scenario.svg_charts import LineSeries, Marker, TimeAxis, render_chart

GI = 2**30
START = datetime(2026, 1, 1, tzinfo=UTC)


def _series(upper: list[float | None], usage: float, target: float) -> list[LineSeries]:
    times = [0.0, 60.0, 120.0, 180.0]
    return [
        LineSeries("usage (max pod)", "#0", [(t, usage) for t in times], "area"),
        LineSeries("target", "#1", [(t, target) for t in times], "step"),
        LineSeries("upper", "#2", list(zip(times, upper, strict=True)), "step", "4 3"),
    ]


def test_a_huge_upper_bound_is_drawn_at_the_ceiling_with_a_marker() -> None:
    # largest other value 0.5 cores (target): ceiling 4 × 0.5 = 2 cores; 1e11 (100G) is drawn
    # at 2 with a marker at 0 s; 1.5 cores (below the ceiling) as is
    series, markers = clip_upper(_series([1e11, 1e11, 1.5, 1.5], usage=0.3, target=0.5), "cores")
    (upper,) = [s for s in series if s.label == "upper"]
    assert upper.points == [(0.0, 2.0), (60.0, 2.0), (120.0, 1.5), (180.0, 1.5)]
    assert markers == [Marker(0.0, "#2", "upper bound 100G cores, above the chart")]
    # the other series are untouched
    assert [s.points for s in series if s.label != "upper"] == [
        s.points for s in _series([None] * 4, 0.3, 0.5) if s.label != "upper"
    ]


def test_each_clipped_stretch_gets_its_marker() -> None:
    # memory: target 1 GiB, ceiling 4 GiB; 90 TiB at 0 s, 2 GiB at 60 s, 90 TiB again at 120 s
    huge = 90 * 2**40
    series, markers = clip_upper(_series([huge, 2 * GI, huge, None], 0.5 * GI, GI), "bytes")
    (upper,) = [s for s in series if s.label == "upper"]
    assert upper.points == [(0.0, 4 * GI), (60.0, 2 * GI), (120.0, 4 * GI), (180.0, None)]
    assert [(m.t, m.title) for m in markers] == [
        (0.0, "upper bound 90.0Ti, above the chart"),
        (120.0, "upper bound 90.0Ti, above the chart"),
    ]


def test_the_chart_shows_the_clipped_bound_and_its_marker() -> None:
    series, markers = clip_upper(_series([1e11, 1e11, 1.5, 1.5], usage=0.3, target=0.5), "cores")
    svg = render_chart(
        title="web/app cpu", axis=TimeAxis(start=START, duration=180.0, step=60.0),
        series=series, unit="cores", markers=markers,
    )  # fmt: skip
    assert "upper bound 100G cores, above the chart" in svg
    assert "100G" not in svg.replace("upper bound 100G cores", "")  # the axis is not 100G
