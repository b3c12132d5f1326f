"""Inline SVG time charts for the HTML report, generated as text (no plotting library).

Every chart of one report shares one time axis (:class:`TimeAxis`: the whole run, ticks at
round wall-clock times — every 5 min, hour, 6 h … chosen so about eight labels fit), so a spike
in one container's usage lines up with a node being added or an event further down the page.

A series is a list of ``(t, value)`` samples, ``value`` ``None`` where it was not set (a missing
limit): the line breaks there and across gaps longer than 1.5 steps (a pod that was gone).
``step`` series (requests, limits, counts) hold each value until the next sample, as the
simulated cluster does; ``line`` series (usage) join the samples, and when there are more samples
than pixels they are reduced to each pixel column's minimum and maximum, so peaks survive.

Each chart carries its (reduced) data in a ``data-series`` attribute for the page's small
hover script (:mod:`kubescale.sim.scenario.html_page_assets`); markers carry a ``<title>``, which
browsers show as a tooltip without any script.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

__all__ = [
    "FULL_WIDTH",
    "ROW_HEIGHT",
    "LineSeries",
    "Marker",
    "TimeAxis",
    "nice_scale",
    "render_chart",
    "render_event_strip",
]

FULL_WIDTH: Final = 1300
"""A chart across the page (the page's content is 1,292 px wide; an SVG scales down to fit)."""
ROW_HEIGHT: Final = 120
"""The height of a full-width chart of a workload's section: charts stacked one per row read
at full width and keep the page short (issue 32 leftovers: the demo page was 17,188 px tall
with its charts at half width, two per row)."""

Unit = Literal["cores", "bytes", "count"]
Style = Literal["step", "line", "area"]

_TICK_INTERVALS: Final = (
    1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200,
    86400, 172800, 604800,
)  # fmt: skip
_BINARY_UNITS: Final = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))
_MARGIN_LEFT: Final = 60
_MARGIN_RIGHT: Final = 14
_MARGIN_TOP: Final = 26
_MARGIN_BOTTOM: Final = 24
_TOOLTIP_POINTS: Final = 240


@dataclass(frozen=True)
class TimeAxis:
    """The run's time span, shared by every chart; ``t`` is seconds since ``start``."""

    start: datetime
    duration: float
    step: float

    def ticks(self, target: int = 8) -> list[tuple[float, str]]:
        """Round wall-clock (UTC) times within the run and their labels."""
        duration = max(self.duration, self.step, 1.0)
        interval = next((i for i in _TICK_INTERVALS if duration / i <= target), _TICK_INTERVALS[-1])
        epoch = self.start.timestamp()
        first = math.ceil(epoch / interval) * interval - epoch
        multi_day = duration > 86400
        ticks: list[tuple[float, str]] = []
        t = first
        while t <= duration + 1e-9:
            moment = self.start + timedelta(seconds=t)
            if interval < 60:
                label = moment.strftime("%H:%M:%S")
            elif interval >= 86400 or (multi_day and moment.hour == 0 and moment.minute == 0):
                label = moment.strftime("%b %d")
            else:
                label = moment.strftime("%H:%M")
            ticks.append((t, label))
            t += interval
        return ticks


@dataclass(frozen=True)
class LineSeries:
    label: str
    color: str
    points: Sequence[tuple[float, float | None]]
    style: Style = "line"
    dash: str = ""


@dataclass(frozen=True)
class Marker:
    """A vertical mark at ``t`` (an event) with a tooltip."""

    t: float
    color: str
    title: str


@dataclass(frozen=True)
class _Frame:
    axis: TimeAxis
    width: int
    height: int
    top: float  # the value at the top of the plot
    plot_w: float = field(init=False)
    plot_h: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plot_w", self.width - _MARGIN_LEFT - _MARGIN_RIGHT)
        object.__setattr__(self, "plot_h", self.height - _MARGIN_TOP - _MARGIN_BOTTOM)

    def x(self, t: float) -> float:
        span = max(self.axis.duration, self.axis.step, 1.0)
        return _MARGIN_LEFT + min(max(t / span, 0.0), 1.0) * self.plot_w

    def y(self, value: float) -> float:
        return _MARGIN_TOP + self.plot_h * (1.0 - min(max(value / self.top, 0.0), 1.0))


def nice_scale(maximum: float, *, target: int = 4, integer: bool = False) -> tuple[float, float]:
    """``(top, tick step)``: the step a round 1, 2, 2.5 or 5 × 10^k giving about ``target``
    ticks, the top the first multiple of it at or above ``maximum``."""
    if maximum <= 0 or not math.isfinite(maximum):
        return (1.0, 1.0) if integer else (1.0, 0.25)
    raw = maximum / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * (1 - 1e-9))
    if integer:
        step = max(1.0, float(math.ceil(step)))
    return math.ceil(maximum / step - 1e-9) * step, step


def _value_scale(maximum: float, unit: Unit) -> tuple[float, float, Callable[[float], str]]:
    """Top of the value axis, tick step, and the tick label formatter — one unit for every
    tick of a chart (``0.5GiB`` and ``1GiB``, not ``512MiB`` and ``1GiB``)."""
    if unit == "count":
        top, tick = nice_scale(maximum, integer=True)
        return top, tick, lambda v: f"{v:g}"
    if unit == "cores":
        top, tick = nice_scale(maximum * 1.05)
        if top < 1:
            return top, tick, lambda v: f"{v * 1000:.4g}m" if v else "0"
        return top, tick, lambda v: f"{v:.4g}"
    name, size = next(((n, s) for n, s in _BINARY_UNITS if maximum >= s), ("B", 1))
    top, tick = nice_scale(maximum / size * 1.05)
    return top * size, tick * size, lambda v: f"{v / size:.4g}{name}" if v else "0"


def _segments(
    points: Sequence[tuple[float, float | None]], gap: float
) -> list[list[tuple[float, float]]]:
    segments: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    last_t: float | None = None
    for t, value in points:
        if value is None or (last_t is not None and t - last_t > gap):
            if current:
                segments.append(current)
            current = []
        if value is not None:
            current.append((t, value))
        last_t = t
    if current:
        segments.append(current)
    return segments


def _reduce(segment: list[tuple[float, float]], frame: _Frame) -> list[tuple[float, float]]:
    """At most two points (min and max, in time order) per pixel column."""
    if len(segment) <= frame.plot_w:
        return segment
    reduced: list[tuple[float, float]] = []
    column: list[tuple[float, float]] = []
    column_x = int(frame.x(segment[0][0]))
    for point in [*segment, (math.inf, 0.0)]:
        x = int(frame.x(point[0])) if math.isfinite(point[0]) else -1
        if x != column_x and column:
            low = min(column, key=lambda p: p[1])
            high = max(column, key=lambda p: p[1])
            reduced.extend(sorted({low, high}))
            column = []
            column_x = x
        column.append(point)
    return reduced


def _path(series: LineSeries, frame: _Frame) -> str:
    gap = 1.5 * frame.axis.step
    commands: list[str] = []
    for segment in _segments(series.points, gap):
        if series.style == "step":
            points: list[tuple[float, float]] = []
            for i, (t, value) in enumerate(segment):
                end = segment[i + 1][0] if i + 1 < len(segment) else t + frame.axis.step
                if points and points[-1][1] == value:
                    points[-1] = (end, value)  # a run of equal values is one horizontal line
                else:
                    points += [(t, value), (end, value)]
        else:
            points = _reduce(segment, frame)
            if len(points) == 1:  # a lone sample is drawn across its step
                points = [points[0], (points[0][0] + frame.axis.step, points[0][1])]
        xy = [f"{frame.x(t):.1f},{frame.y(v):.1f}" for t, v in points]
        if series.style == "area":
            base = f"{frame.y(0.0):.1f}"
            x0, x1 = f"{frame.x(points[0][0]):.1f}", f"{frame.x(points[-1][0]):.1f}"
            commands.append(f"M{x0},{base}L" + "L".join(xy) + f"L{x1},{base}Z")
        else:
            commands.append("M" + "L".join(xy))
    return "".join(commands)


def _time_ticks(
    frame: _Frame, *, top: float, bottom: float, shift: float, target: int
) -> list[str]:
    """Vertical tick lines and their labels; a label at the right end is right-aligned so it
    stays inside the picture."""
    parts = []
    right = _MARGIN_LEFT + frame.plot_w
    for t, label in frame.axis.ticks(target=target):
        x = frame.x(t)
        anchor = ' style="text-anchor:end"' if right - x < 3.5 * len(label) else ""
        parts.append(
            f'<line class="tick" x1="{x + shift:.1f}" x2="{x + shift:.1f}" y1="{top}" '
            f'y2="{bottom + 4}"/><text class="xlabel" x="{x + shift:.1f}" y="{bottom + 17}"'
            f"{anchor}>{html.escape(label)}</text>"
        )
    return parts


def _tooltip_data(series: Sequence[LineSeries], unit: Unit, step: float) -> str:
    """Up to _TOOLTIP_POINTS evenly picked samples per series, for the hover read-out, and per
    series how long a picked sample may be read after its time (beyond it: no value, the
    container was gone)."""
    data = []
    for s in series:
        stride = max(1, math.ceil(len(s.points) / _TOOLTIP_POINTS))
        picked = s.points[::stride]
        data.append(
            {
                "label": s.label,
                "color": s.color,
                "hold": round(1.5 * step * stride, 3),
                "t": [round(t, 3) for t, _ in picked],
                "v": [None if v is None else round(v, 6) for _, v in picked],
            }
        )
    return json.dumps({"unit": unit, "series": data}, separators=(",", ":"))


def render_chart(
    *,
    title: str,
    axis: TimeAxis,
    series: Sequence[LineSeries],
    unit: Unit,
    markers: Sequence[Marker] = (),
    spans: Sequence[tuple[float, float, str]] = (),
    width: int = 640,
    height: int = 190,
) -> str:
    """One ``<svg class="chart">``: gridlines, axes with labels, ``spans`` (shaded time ranges
    with a tooltip, e.g. throttling), the series, ``markers`` and a legend."""
    values = [v for s in series for _, v in s.points if v is not None]
    maximum = max(values, default=0.0)
    top, tick, tick_label = _value_scale(maximum, unit)
    frame = _Frame(axis=axis, width=width, height=height, top=top)
    bottom = _MARGIN_TOP + frame.plot_h
    right = _MARGIN_LEFT + frame.plot_w
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(title)}" data-x0="{_MARGIN_LEFT}" data-x1="{right}" '
        f'data-span="{max(axis.duration, axis.step, 1.0)}" '
        f"data-series='{html.escape(_tooltip_data(series, unit, axis.step), quote=True)}'>",
        f'<text class="title" x="{_MARGIN_LEFT}" y="16">{html.escape(title)}</text>',
    ]
    steps = round(top / tick)
    for i in range(steps + 1):
        value = i * tick
        y = frame.y(value)
        parts.append(
            f'<line class="grid" x1="{_MARGIN_LEFT}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="ylabel" x="{_MARGIN_LEFT - 6}" y="{y + 4:.1f}">'
            f"{html.escape(tick_label(value))}</text>"
        )
    parts += _time_ticks(frame, top=_MARGIN_TOP, bottom=bottom, shift=0.0, target=8)
    for start, end, span_title in spans:
        x0, x1 = frame.x(start), frame.x(end)
        parts.append(
            f'<rect class="span" x="{x0:.1f}" y="{_MARGIN_TOP}" width="{max(x1 - x0, 1.0):.1f}" '
            f'height="{frame.plot_h:.1f}"><title>{html.escape(span_title)}</title></rect>'
        )
    for s in series:
        d = _path(s, frame)
        if not d:
            continue
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        fill = f'fill="{s.color}" fill-opacity="0.18"' if s.style == "area" else 'fill="none"'
        parts.append(
            f'<path class="series" d="{d}" stroke="{s.color}" {fill}{dash}>'
            f"<title>{html.escape(s.label)}</title></path>"
        )
    for marker in markers:
        x = frame.x(marker.t)
        parts.append(
            f'<g class="marker"><line x1="{x:.1f}" x2="{x:.1f}" y1="{_MARGIN_TOP}" '
            f'y2="{bottom}" stroke="{marker.color}"/><path d="M{x - 4:.1f},{_MARGIN_TOP - 6}'
            f'L{x + 4:.1f},{_MARGIN_TOP - 6}L{x:.1f},{_MARGIN_TOP}Z" fill="{marker.color}"/>'
            f"<title>{html.escape(marker.title)}</title></g>"
        )
    parts.append(
        f'<line class="axis" x1="{_MARGIN_LEFT}" x2="{right}" y1="{bottom}" y2="{bottom}"/>'
        f'<line class="axis" x1="{_MARGIN_LEFT}" x2="{_MARGIN_LEFT}" y1="{_MARGIN_TOP}" '
        f'y2="{bottom}"/>'
    )
    x = right
    for s in reversed(series):
        text_width = 6.6 * len(s.label) + 30
        x -= text_width
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        parts.append(
            f'<line x1="{x:.1f}" x2="{x + 14:.1f}" y1="12" y2="12" stroke="{s.color}" '
            f'stroke-width="3"{dash}/><text class="legend" x="{x + 18:.1f}" y="16">'
            f"{html.escape(s.label)}</text>"
        )
    parts.append(
        f'<line class="cursor" x1="0" x2="0" y1="{_MARGIN_TOP}" y2="{bottom}" '
        'visibility="hidden"/></svg>'
    )
    return "".join(parts)


def render_event_strip(
    *, axis: TimeAxis, rows: Sequence[tuple[str, str, Sequence[Marker]]], width: int = 1300
) -> str:
    """Events on the shared time axis, one row per kind: ``rows`` = (label, colour, markers)."""
    row_height = 22
    height = _MARGIN_TOP + row_height * len(rows) + _MARGIN_BOTTOM
    # room for the longest kind name at the 11 px label font (about 6.5 px a character)
    left = max(110, 16 + round(6.5 * max((len(label) for label, _, _ in rows), default=0)))
    frame = _Frame(axis=axis, width=width - left + _MARGIN_LEFT, height=height, top=1.0)
    shift = left - _MARGIN_LEFT
    bottom = _MARGIN_TOP + row_height * len(rows)
    parts = [
        f'<svg class="strip" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" aria-label="events">',
        f'<text class="title" x="{left}" y="16">Events</text>',
    ]
    parts += _time_ticks(frame, top=_MARGIN_TOP, bottom=bottom, shift=shift, target=12)
    for index, (label, color, markers) in enumerate(rows):
        middle = _MARGIN_TOP + row_height * index + row_height / 2
        parts.append(
            f'<text class="ylabel" x="{left - 8}" y="{middle + 4:.1f}">{html.escape(label)}</text>'
            f'<path class="row" d="M{left},{middle:.1f}L{frame.x(axis.duration) + shift:.1f},'
            f'{middle:.1f}" stroke="#cbd5e1"/>'
        )
        for marker in markers:
            x = frame.x(marker.t) + shift
            parts.append(
                f'<rect class="event" x="{x - 1.5:.1f}" y="{middle - 7:.1f}" width="3" height="14"'
                f' fill="{color}"><title>{html.escape(marker.title)}</title></rect>'
            )
    parts.append("</svg>")
    return "".join(parts)
