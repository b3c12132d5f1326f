"""The HTML report rendered by a real browser: headless Chromium (Debian's ``chromium``).

The synthetic run of :mod:`tests.sim.scenario.test_reports_synthetic_run` is rendered to a page,
which Chromium opens from disk with networking features off (one browser for the test session,
:mod:`tests.rendering.chromium`, a page per test). Checked: the screenshot is a real
picture (decoded here with zlib/struct — no imaging library — and its pixels vary, with the
chart colours present); the DOM after scripts ran holds every ``<svg>`` with drawn paths and
the page script's ready mark; and the browser logged no console message (a deliberately broken
page shows the check would catch an uncaught error).

The built-in demo's report (its three-way comparison at a reduced duration,
:mod:`tests.sim.scenario.demo_comparison`) is opened in a laptop-sized window (1280 px wide): the
page must not scroll sideways, and must draw the node count and cost, the HPA's replicas and metric
and each VPA's band. Its screenshot is kept in ``build/test-artifacts/demo-report.png``.
"""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kubescale.kube.client import connect
from kubescale.report.cluster_reading import read_cluster
from kubescale.report.html_page import render_html as render_live_html
from kubescale.report.report_assembly import assemble_report as assemble_report_of_cluster
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.html_report import render_html
from kubescale.sim.scenario.report_assembly import assemble_report
from tests.rendering.chromium import CHROMIUM, SKIP_REASON, Chromium
from tests.report.cluster_fixture import populate
from tests.sim.scenario.demo_comparison import DEMO_GROUP, demo_comparison_report
from tests.sim.scenario.test_reports_synthetic_run import synthetic_timeline

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)

WIDTH, HEIGHT = 1400, 2000


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows) of an 8-bit, non-interlaced RGB(A)/grey PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, compressed = 8, bytearray()
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, interlace) == (8, 0), "only 8-bit non-interlaced PNGs are decoded"
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            compressed += body
    raw = zlib.decompress(bytes(compressed))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        filter_type, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        # PNG filter types (ISO/IEC 15948 §9): 0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth
        if filter_type == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif filter_type == 2:
            line = bytearray((x + p) & 0xFF for x, p in zip(line, previous, strict=True))
        elif filter_type == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif filter_type == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                corner = previous[i - channels] if i >= channels else 0
                line[i] = (line[i] + _paeth(left, previous[i], corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


class _Svgs(HTMLParser):
    """Per <svg>: its class and the drawing data of its <path>/<polyline> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.svgs: list[tuple[str, list[str]]] = []
        self.body: dict[str, str | None] = {}
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "body":
            self.body = values
        elif tag == "svg":
            self.svgs.append((values.get("class") or "", []))
            self._depth += 1
        elif tag in {"path", "polyline"} and self._depth:
            self.svgs[-1][1].append((values.get("d") or values.get("points") or "").strip())

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._depth -= 1


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(assemble_report(synthetic_timeline())), encoding="utf-8")
    return path


def test_screenshot_is_a_picture_with_the_charts_in_it(page: Path, browser: Chromium) -> None:
    result = browser.render(page, width=WIDTH, height=HEIGHT, screenshot=True)
    assert result.console == []
    assert result.screenshot is not None
    width, height, channels, rows = decode_png(result.screenshot)
    assert (width, height) == (WIDTH, HEIGHT)
    assert channels >= 3
    # luminance over a grid of pixels: a blank or single-colour page has no variance
    lum = [
        0.299 * row[x * channels] + 0.587 * row[x * channels + 1] + 0.114 * row[x * channels + 2]
        for row in rows[::7]
        for x in range(0, width, 5)
    ]
    mean = sum(lum) / len(lum)
    variance = sum((v - mean) ** 2 for v in lum) / len(lum)
    assert variance > 100, f"screenshot looks blank (luminance variance {variance:.1f})"
    assert len(set(lum)) > 50

    def pixels_near(rgb: tuple[int, int, int], tolerance: int = 30) -> int:
        return sum(
            1
            for row in rows
            for x in range(0, width * channels, 2 * channels)
            if abs(row[x] - rgb[0]) + abs(row[x + 1] - rgb[1]) + abs(row[x + 2] - rgb[2])
            <= tolerance
        )

    # drawn series (every other column counted): requests (#2563eb) and node count (#0f766e)
    assert pixels_near((0x25, 0x63, 0xEB)) > 200
    assert pixels_near((0x0F, 0x76, 0x6E)) > 200


def test_rendered_dom_has_every_chart_drawn_and_the_script_ran(
    page: Path, browser: Chromium
) -> None:
    result = browser.render(page, width=WIDTH, height=HEIGHT)
    assert result.console == []
    parsed = _Svgs()
    parsed.feed(result.dom)
    report = assemble_report(synthetic_timeline())
    charts = 2 + len(report["workloads"]) + 2 * len(report["containers"])
    assert [cls for cls, _ in parsed.svgs].count("chart") == charts
    assert [cls for cls, _ in parsed.svgs].count("strip") == 1
    for cls, drawings in parsed.svgs:
        assert any(d for d in drawings), f"an <svg class={cls}> drew nothing"
    assert parsed.body.get("data-charts-ready") == str(charts)


def test_a_page_error_would_be_caught(tmp_path: Path, browser: Chromium) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><p>x</p><script>notDefined();</script></body></html>",
        encoding="utf-8",
    )
    result = browser.render(broken, width=WIDTH, height=HEIGHT)
    assert any("Uncaught ReferenceError" in line for line in result.console)


# Moves the pointer over chart ``hover[0]`` at ``hover[1]`` of the run and stores the tooltip's
# lines in the body's data-tip-<position in the list> attribute, for --dump-dom to show.
_HOVER = """
<script>
(function () {
  [[HOVERS]].forEach(function (hover, position) {
    var svg = document.querySelectorAll("svg.chart")[hover[0]];
    var box = svg.getBoundingClientRect();
    var x0 = Number(svg.getAttribute("data-x0")), x1 = Number(svg.getAttribute("data-x1"));
    var x = x0 + hover[1] * (x1 - x0);
    svg.dispatchEvent(new MouseEvent("mousemove", {
      bubbles: true,
      clientX: box.left + x * box.width / svg.viewBox.baseVal.width,
      clientY: box.top + box.height / 2
    }));
    var lines = Array.prototype.map.call(
      document.getElementById("tooltip").children, function (row) { return row.textContent; });
    document.body.setAttribute("data-tip-" + position, lines.join(" | "));
  });
})();
</script>
"""


def _seconds(clock: str) -> int:
    hours, minutes, seconds = (int(part) for part in clock.removesuffix(" UTC").split(":"))
    return hours * 3600 + minutes * 60 + seconds


def test_hovering_a_chart_reads_out_the_values_at_that_time(
    page: Path, tmp_path: Path, browser: Chromium
) -> None:
    # chart 0: node count (1: cost accrued); chart 3: the batch job's CPU (the first
    # workload's first container, after its pods chart)
    hovers = [(0, 3 / 6), (3, 5700 / 21600), (3, 4 / 6)]
    text = page.read_text(encoding="utf-8")
    hover_script = _HOVER.replace("[[HOVERS]]", str([list(h) for h in hovers]))
    hovered = tmp_path / "hovered.html"
    hovered.write_text(text.replace("</body>", hover_script + "</body>"), encoding="utf-8")
    result = browser.render(hovered, width=WIDTH, height=HEIGHT)
    assert result.console == []
    parsed = _Svgs()
    parsed.feed(result.dom)
    tips = [str(parsed.body.get(f"data-tip-{i}")).split(" | ") for i in range(len(hovers))]
    # the pointer lands on whole pixels: a pixel is 18 s of a six-hour run 1226 px wide
    for tip, wanted in zip(tips, ["09:00:00", "07:35:00", "10:00:00"], strict=True):
        assert abs(_seconds(tip[0]) - _seconds(wanted)) < 60, tip
    # three hours in (09:00) the group node exists (08:10-11:00)
    assert tips[0][1:] == ["nodes: 3"]
    # 07:35: the job's quiet ten minutes (0.6 of 0.6 wanted) under its 0.5 request, 1 limit
    assert tips[1][1:] == [
        "usage: 0.600 cores",
        "demand: 0.600 cores",
        "request: 0.500 cores",
        "limit: 1.000 cores",
    ]
    # 10:00: the job finished at 09:00; its container has no values any more
    assert tips[2][1:] == ["usage: none", "demand: none", "request: none", "limit: none"]


# --- the demo's report on a laptop screen --------------------------------------------------

LAPTOP_WIDTH, LAPTOP_HEIGHT = 1280, 3200
SCREENSHOT = Path(__file__).resolve().parents[3] / "build" / "test-artifacts" / "demo-report.png"
"""Where the demo report's screenshot is kept for a person to look at (``build/`` is ignored)."""

# Records on the body what a person would notice: sideways overflow (page wider than the
# window) and which autoscaling charts were drawn.
_LAYOUT = """
<script>
(function () {
  var page = document.documentElement;
  document.body.setAttribute("data-overflow", String(page.scrollWidth - window.innerWidth));
  var labels = Array.prototype.map.call(document.querySelectorAll("svg.chart"),
    function (svg) { return svg.getAttribute("aria-label"); });
  document.body.setAttribute("data-chart-labels", labels.join("|"));
})();
</script>
"""


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.html"
    path.write_text(render_html(demo_comparison_report()), encoding="utf-8")
    return path


@DEMO_GROUP
def test_the_demo_report_fits_a_laptop_screen_and_shows_the_autoscalers(
    demo_page: Path, tmp_path: Path, browser: Chromium
) -> None:
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    result = browser.render(demo_page, width=LAPTOP_WIDTH, height=LAPTOP_HEIGHT, screenshot=True)
    assert result.console == []
    assert result.screenshot is not None
    SCREENSHOT.write_bytes(result.screenshot)
    width, height, channels, rows = decode_png(result.screenshot)
    assert (width, height) == (LAPTOP_WIDTH, LAPTOP_HEIGHT)
    lum = [
        0.299 * row[x * channels] + 0.587 * row[x * channels + 1] + 0.114 * row[x * channels + 2]
        for row in rows[::9]
        for x in range(0, width, 7)
    ]
    mean = sum(lum) / len(lum)
    assert sum((v - mean) ** 2 for v in lum) / len(lum) > 100, "the screenshot looks blank"

    probed = tmp_path / "probed.html"
    text = demo_page.read_text(encoding="utf-8")
    probed.write_text(text.replace("</body>", _LAYOUT + "</body>"), encoding="utf-8")
    result = browser.render(probed, width=LAPTOP_WIDTH, height=LAPTOP_HEIGHT)
    assert result.console == []
    parsed = _Svgs()
    parsed.feed(result.dom)
    # no sideways scrolling at 1280 px
    assert int(str(parsed.body.get("data-overflow"))) <= 0
    labels = str(parsed.body.get("data-chart-labels")).split("|")
    # the cluster's node count and cost, the HPA's replicas and metric, each VPA's band
    assert {"nodes", "cost accrued"} <= set(labels)
    assert "HPA web · replicas (2–12)" in labels
    assert "HPA web · cpu utilization (%)" in labels
    for vpa, container in (("cache", "redis"), ("reports", "api")):
        for resource in ("cpu", "memory"):
            assert f"{vpa}/{container} {resource}" in labels
    for cls, drawings in parsed.svgs:
        assert any(d for d in drawings), f"an <svg class={cls}> drew nothing"
    page = result.dom
    assert "<h2>Comparison</h2>" in page
    assert "<h2>What kubescale did</h2>" in page
    assert "<h2>Decisions (" in page


async def test_live_report_page_screenshot(tmp_path: Path, browser: Chromium) -> None:
    """``kubescale report -o html`` of the simulated shop cluster (tests/report), read through
    the real client from the in-process API server, rendered by Chromium: a real picture with
    the verdict colours and the node bars in it, and no console message."""
    async with ApiServer() as server:
        populate(server)
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        async with await connect(kubeconfig=kubeconfig) as client:
            reading = await read_cluster(client, namespace=None)
    report = assemble_report_of_cluster(
        reading, now=datetime(2026, 1, 1, tzinfo=UTC), namespace=None, all_workloads=False
    )
    page = tmp_path / "live.html"
    page.write_text(render_live_html(report), encoding="utf-8")
    result = browser.render(page, width=WIDTH, height=900, screenshot=True)
    assert result.console == []
    assert result.screenshot is not None
    shot = tmp_path / "live.png"  # kept by pytest under its basetemp for a look
    shot.write_bytes(result.screenshot)
    width, _, channels, rows = decode_png(result.screenshot)

    def pixels_near(rgb: tuple[int, int, int], tolerance: int = 24) -> int:
        return sum(
            1
            for row in rows
            for x in range(0, width * channels, channels)
            if abs(row[x] - rgb[0]) + abs(row[x + 1] - rgb[1]) + abs(row[x + 2] - rgb[2])
            <= tolerance
        )

    assert pixels_near((0xB4, 0x53, 0x09)) > 5  # the "over" verdict text (web's CPU)
    assert pixels_near((0x15, 0x80, 0x3D)) > 5  # the "ok" verdict text (web's memory)
    assert pixels_near((0x25, 0x63, 0xEB)) > 100  # the node's requested-CPU/memory bars
    assert pixels_near((0x16, 0xA3, 0x4A)) > 100  # the node's usage bars
