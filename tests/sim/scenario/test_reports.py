"""The report renderers: JSON text, the stdout summary table, the HTML page and its SVG charts."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from kubescale.sim.scenario.html_report import render_html
from kubescale.sim.scenario.json_report import dumps_report, write_json_report
from kubescale.sim.scenario.report_assembly import assemble_report
from kubescale.sim.scenario.summary_table import WIDTH, format_duration, render_summary
from kubescale.sim.scenario.svg_charts import LineSeries, TimeAxis, nice_scale, render_chart
from kubescale.sim.scenario.timeline import TimelineEvent
from tests.sim.scenario.test_reports_synthetic_run import synthetic_timeline
from tests.sim.scenario.test_timeline import GIB, run, sample

# --- time axis and value scale ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "duration", "expected"),
    [
        # six hours: hourly wall-clock ticks
        (
            datetime(2026, 3, 2, 6, 0, tzinfo=UTC),
            21600.0,
            [(3600.0 * i, f"{6 + i:02d}:00") for i in range(7)],
        ),
        # ten minutes starting 30 s past midnight: every 2 minutes, on the round minute
        (
            datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC),
            600.0,
            [
                (90.0, "00:02"),
                (210.0, "00:04"),
                (330.0, "00:06"),
                (450.0, "00:08"),
                (570.0, "00:10"),
            ],
        ),
        # ninety seconds: every 15 s with seconds in the label
        (
            datetime(2026, 1, 1, 0, 0, tzinfo=UTC),
            90.0,
            [
                (0.0, "00:00:00"),
                (15.0, "00:00:15"),
                (30.0, "00:00:30"),
                (45.0, "00:00:45"),
                (60.0, "00:01:00"),
                (75.0, "00:01:15"),
                (90.0, "00:01:30"),
            ],
        ),
        # two days from noon: every 6 h, midnights labelled with the date
        (
            datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
            172800.0,
            [
                (0.0, "12:00"),
                (21600.0, "18:00"),
                (43200.0, "Jan 02"),
                (64800.0, "06:00"),
                (86400.0, "12:00"),
                (108000.0, "18:00"),
                (129600.0, "Jan 03"),
                (151200.0, "06:00"),
                (172800.0, "12:00"),
            ],
        ),
    ],
)
def test_time_ticks(start: datetime, duration: float, expected: list[tuple[float, str]]) -> None:
    assert TimeAxis(start=start, duration=duration, step=60.0).ticks() == expected


@pytest.mark.parametrize(
    ("maximum", "integer", "expected"),
    [
        (10, True, (12.0, 3.0)),
        (3, True, (3.0, 1.0)),
        (0.7, False, (0.8, 0.2)),
        (1.0, False, (1.0, 0.25)),
        (1.05, False, (1.5, 0.5)),
        (0, False, (1.0, 0.25)),
        (0, True, (1.0, 1.0)),
    ],
)
def test_nice_scale(maximum: float, integer: bool, expected: tuple[float, float]) -> None:
    top, step = nice_scale(maximum, integer=integer)
    assert (top, step) == pytest.approx(expected)


def _path_points(svg: str, color: str) -> list[tuple[float, float]]:
    match = re.search(rf'<path class="series" d="([^"]+)" stroke="{color}"', svg)
    assert match is not None
    return [(float(x), float(y)) for x, y in re.findall(r"(-?[\d.]+),(-?[\d.]+)", match.group(1))]


def test_long_series_are_reduced_to_pixel_columns_and_keep_their_peaks() -> None:
    axis = TimeAxis(start=datetime(2026, 1, 1, tzinfo=UTC), duration=86400.0, step=10.0)
    points: list[tuple[float, float | None]] = [(10.0 * i, 0.2) for i in range(8640)]
    points[4321] = (43210.0, 3.0)  # one ten-second spike in a day
    svg = render_chart(
        title="cpu",
        axis=axis,
        series=[LineSeries("usage", "#00aa00", points, "line")],
        unit="cores",
    )
    xy = _path_points(svg, "#00aa00")
    assert len(xy) <= 2 * 640
    top_y = min(y for _, y in xy)
    # the spike is the highest point drawn: 3 cores on a 4-core axis (3 x 1.05 rounded up to a
    # whole step of 1), in a plot 140 px high starting 26 px from the top
    assert top_y == pytest.approx(26 + 140 * (1 - 3.0 / 4.0), abs=0.1)


def test_step_series_break_at_gaps_and_missing_values() -> None:
    axis = TimeAxis(start=datetime(2026, 1, 1, tzinfo=UTC), duration=600.0, step=60.0)
    points: list[tuple[float, float | None]] = [
        (0.0, 1.0), (60.0, 1.0), (120.0, None), (180.0, 2.0), (480.0, 2.0),
    ]  # fmt: skip
    svg = render_chart(
        title="limit", axis=axis, series=[LineSeries("limit", "#ff0000", points, "step")],
        unit="cores",
    )  # fmt: skip
    match = re.search(r'd="([^"]+)" stroke="#ff0000"', svg)
    assert match is not None
    # three pieces: [0, 120) at 1, [180, 240) at 2, and [480, 540) at 2 after the gap
    assert match.group(1).count("M") == 3


# --- JSON ----------------------------------------------------------------------------------------


def test_json_text_is_sorted_valid_and_ends_with_a_newline(tmp_path: Path) -> None:
    report = {"b": [1.5, None, True], "a": {"z": [], "y": [{"k": "v"}]}, "c": "é"}
    text = dumps_report(report)
    assert json.loads(text) == report
    assert text.index('"a"') < text.index('"b"') < text.index('"c"')
    assert text.endswith("}\n")
    assert '"b": [1.5, null, true]' in text
    path = tmp_path / "r.json"
    write_json_report(report, path)
    assert path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    "bad",
    [{"x": float("nan")}, {"x": [float("inf")]}, {"x": {1: 2}}, {"x": object()}],
)
def test_json_refuses_what_is_not_plain_json(bad: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        dumps_report(bad)


# --- summary table -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(45, "45s"), (330, "5m30s"), (300, "5m"), (9000, "2h30m"), (93780, "1d02h03m"), (0, "0s")],
)
def test_format_duration(seconds: float, expected: str) -> None:
    assert format_duration(seconds) == expected


def test_summary_table_values() -> None:
    usage = [0.1, 0.3, 0.5, 0.7]
    report = run(
        [[sample(cpu_usage=u, memory_usage=GIB / 4)] for u in usage],
        nodes=[["n1"]] * 4,
        prices={"n1": 0.25},
    )
    lines = render_summary(report).splitlines()
    assert lines[0] == (
        "Scenario 't', seed 1: 1h00m from 2026-01-01T00:00:00.000000Z at a 900 s step"
    )
    assert lines[1] == (
        # one wording and unit for time summed over pods (pod-time, a duration), cost in $
        "Cluster: 1-1 nodes (avg 1.0), 1.00 node-hours, cost $0.25, 0 OOM kills, 0 evictions, "
        "pending pod-time 0s"
    )
    app = next(line for line in lines if line.strip().startswith("app"))
    # request 0.5; p50 0.3, p95 0.7, max 0.7; slack 0.1 core-h; 1024 MiB request,
    # 256 MiB usage; (0.75 GiB x 1 h) slack
    assert app.split() == [
        "app", "0.500", "0.300", "0.700", "0.700", "0.100",
        "1024.0", "256.0", "256.0", "256.0", "0.750",
    ]  # fmt: skip
    web = next(line for line in lines if line.startswith("default/web "))
    assert web.split() == ["default/web", "0/0.0/0", "0s", "0s", "0", "0", "0s", "0.0"]
    assert "pod-s" not in "\n".join(lines)


def test_summary_table_shortens_long_names_to_the_width() -> None:
    name = "a-very-long-workload-name-" * 5
    report = run([[sample(workload=name, pod=f"{name}-0", container="c" * 80)]])
    text = render_summary(report)
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "…" in text


def test_summary_of_an_empty_run() -> None:
    report = run([])
    assert "No workloads ran." in render_summary(report)


# --- HTML ----------------------------------------------------------------------------------------


class _Structure(HTMLParser):
    """Collects tags, attributes and whether every element was closed."""

    VOID = frozenset({"meta", "br", "img", "hr", "input"})  # HTML void elements used or abused

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
            return
        self.stack.pop()


def _structure(page: str) -> _Structure:
    parser = _Structure()
    parser.feed(page)
    parser.close()
    return parser


def test_page_is_self_contained_and_well_formed() -> None:
    page = render_html(assemble_report(synthetic_timeline()))
    parsed = _structure(page)
    assert parsed.errors == []
    assert parsed.stack == []
    # nothing is fetched: no external resources, scripts or styles
    for tag, attrs in parsed.tags:
        assert "src" not in attrs, tag
        assert "href" not in attrs, tag
    assert "<link" not in page
    assert "@import" not in page
    assert "url(" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace name, never fetched


def test_page_has_every_chart_and_event() -> None:
    report = assemble_report(synthetic_timeline())
    page = render_html(report)
    charts = page.count('<svg class="chart"')
    # the node and cost charts, a pods chart per workload, CPU and memory per container
    assert charts == 2 + len(report["workloads"]) + 2 * len(report["containers"])
    assert page.count('<svg class="strip"') == 1
    for event in report["events"]:
        assert f'<td class="name">{event["subject"]}</td>' in page
    assert page.count('<rect class="event"') == len(report["events"])
    # cluster summary in the header
    assert "<b>14.8</b><span>node-hours</span>" in page
    assert "<b>3.22</b><span>cost ($)</span>" in page
    assert '<div class="card alert"><b>6</b><span>OOM kills</span>' in page
    # OOM kills of the cache marked on its memory chart, throttling shaded on the job's CPU
    assert page.count("OOM kill of cache") == 6
    assert page.count('<rect class="span"') == 6


def test_page_escapes_names() -> None:
    hostile = '<img src=x onerror="alert(1)">'
    report = run(
        [[sample(workload=hostile, pod="p<1>", container="c&d")]],
        events=[[TimelineEvent(0.0, "evicted", "default/p<1>", hostile)]],
    )
    page = render_html(report)
    assert hostile not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "p&lt;1&gt;" in page
    assert _structure(page).errors == []


def test_page_of_an_empty_run() -> None:
    page = render_html(run([]))
    assert "No events." in page
    assert _structure(page).errors == []


def test_page_tooltip_data_is_json() -> None:
    page = render_html(assemble_report(synthetic_timeline()))
    parsed = _structure(page)
    charts = [attrs for tag, attrs in parsed.tags if tag == "svg" and attrs.get("class") == "chart"]
    for attrs in charts:
        data = json.loads(attrs["data-series"] or "")
        assert data["unit"] in {"cores", "bytes", "count"}
        for series in data["series"]:
            assert len(series["t"]) == len(series["v"]) <= 240
            assert all(v is None or math.isfinite(v) for v in series["v"])
