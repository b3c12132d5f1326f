"""The HTML report's layout, read from its structure (issue 32 leftovers: the demo page was
17,188 px tall with its charts at half width, two per row): every chart on the page spans its
width, one per row, and a workload shows the charts of its first containers only, the others
folded into a closed ``<details>`` (which adds no height until opened).

Measured once in Chromium on the full demo's report (not a test: a browser's timing is no
assertion): 18,366 px tall before, 8,923 px after."""

from __future__ import annotations

from html.parser import HTMLParser

from kubescale.sim.scenario.html_report import render_html
from kubescale.sim.scenario.report_assembly import assemble_report
from kubescale.sim.scenario.svg_charts import FULL_WIDTH, ROW_HEIGHT

from .test_reports_synthetic_run import synthetic_timeline


class _Visible(HTMLParser):
    """Each ``<svg class="chart">`` outside a closed ``<details>``: its section (the ``<h2>``
    before it), title, width and height; and the summaries of the closed ``<details>``."""

    def __init__(self) -> None:
        super().__init__()
        self.charts: list[tuple[str, str, int, int]] = []
        self.folded: list[str] = []
        self._section = ""
        self._closed: list[bool] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "details":
            self._closed.append("open" not in attributes)
        elif tag in ("h2", "summary"):
            self._text = []
        elif tag == "svg" and attributes.get("class") == "chart" and not any(self._closed):
            width, height = int(attributes["width"] or 0), int(attributes["height"] or 0)
            self.charts.append((self._section, attributes["aria-label"] or "", width, height))

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self._closed.pop()
        elif tag in ("h2", "summary") and self._text is not None:
            text = "".join(self._text)
            if tag == "h2":
                self._section = text
            elif any(self._closed):
                self.folded.append(f"{self._section}: {text}")
            self._text = None


def _page() -> _Visible:
    parsed = _Visible()
    parsed.feed(render_html(assemble_report(synthetic_timeline())))
    return parsed


def test_every_chart_spans_the_page() -> None:
    charts = _page().charts
    assert charts
    assert [c for c in charts if c[2] != FULL_WIDTH] == []  # none at half width (640 px)


def test_a_workload_shows_its_first_two_containers_and_folds_the_rest() -> None:
    page = _page()
    # default/web ran 8 pods of one container: CPU and memory of the first 2 shown, one chart
    # per row at ROW_HEIGHT (2 containers x 2 charts = 4 rows, 4 x 120 = 480 px), 6 folded
    web = [(title, height) for section, title, _, height in page.charts if section == "default/web"]
    row = [("CPU", ROW_HEIGHT), ("memory", ROW_HEIGHT)]
    assert web == [("pods", 150), *row, *row]
    assert "default/web: 6 more containers" in page.folded
    # the single-pod workloads show theirs, nothing folded
    for section in ("default/cache", "batch/report"):
        assert [title for s, title, _, _ in page.charts if s == section] == [
            "pods",
            "CPU",
            "memory",
        ]
        assert not [f for f in page.folded if f.startswith(f"{section}:")]
