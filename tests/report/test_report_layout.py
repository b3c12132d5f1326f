"""``kubescale report`` fits its reader (issue 32.6): the text fits the terminal's width with
every column shown (it used to cut every line at 120 characters, losing the last columns), the
HTML page fits a 1,280 px window and never prints ``None``."""

from __future__ import annotations

import asyncio
import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.kube.client import connect
from kubescale.rendering.text_table import WIDTH, Column, fit_table
from kubescale.report.cluster_reading import read_cluster
from kubescale.report.html_page import render_html
from kubescale.report.report_assembly import assemble_report
from kubescale.report.text_report import render_text
from kubescale.sim.apiserver.server import ApiServer
from tests.rendering.chromium import CHROMIUM, SKIP_REASON, Chromium
from tests.report.cluster_fixture import populate

LONG = "checkout-payments-reconciliation-worker-with-a-long-name-" * 2
WORKLOAD_TITLES = ("WORKLOAD / CONTAINER", "SOURCE", "REPLICAS", "CPU REQ", "MEM REQ", "MEM")


async def _report(tmp_path: Path) -> dict[str, Any]:
    async with ApiServer() as server:
        populate(server)
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        async with await connect(kubeconfig=kubeconfig) as client:
            reading = await read_cluster(client, namespace=None)
    report = assemble_report(
        reading, now=datetime(2026, 1, 1, tzinfo=UTC), namespace=None, all_workloads=True
    )
    return dict(report)


def _long_names(report: dict[str, Any]) -> dict[str, Any]:
    """The report with a workload, its container, its HPA and a node named at length."""
    changed = copy.deepcopy(report)
    for workload in changed["workloads"]:
        workload["name"] = LONG + workload["name"]
        for container in workload["containers"]:
            container["name"] = LONG[:40] + container["name"]
        if workload["hpa"] is not None:
            workload["hpa"]["name"] = LONG + workload["hpa"]["name"]
            workload["hpa"]["current_replicas"] = None  # an HPA that has not acted yet
            workload["hpa"]["desired_replicas"] = None
    for node in changed["nodes"]:
        node["name"] = LONG + node["name"]
    return changed


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _long_names(asyncio.run(_report(tmp_path_factory.mktemp("report"))))


@pytest.mark.parametrize("width", [None, 80, 100, 200])
def test_the_text_fits_the_width_and_shows_every_column(
    report: dict[str, Any], width: int | None
) -> None:
    text = render_text(report) if width is None else render_text(report, width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= (width or WIDTH)
    for title in (*WORKLOAD_TITLES, "CONDITIONS", "TARGETS", "MEM USE", "USE%"):
        assert re.search(rf"(^|  ){re.escape(title)}(  |$)", text, re.MULTILINE), title
    # every container's verdicts, CPU and memory, are there (the memory one was cut off)
    verdicts = [c[r]["verdict"] for w in report["workloads"] for c in w["containers"]
                for r in ("cpu", "memory")]  # fmt: skip
    shown = re.findall(r"\b(ok|over|under|unset|none)\b", text)
    assert len(shown) >= len(verdicts)


def test_the_html_never_prints_none(report: dict[str, Any]) -> None:
    page = render_html(report)
    assert "None" not in re.sub(r"<[^>]*>", " ", page)
    assert "<td>–</td><td>–</td>" in page  # the HPA's unknown current and desired replicas


@settings(max_examples=60, deadline=None)
@given(
    widths=st.lists(st.integers(min_value=1, max_value=12), min_size=3, max_size=14),
    name=st.integers(min_value=1, max_value=60),
    width=st.integers(min_value=40, max_value=160),
)
def test_a_fitted_table_keeps_every_column_within_the_width(
    widths: list[int], name: int, width: int
) -> None:
    columns = [Column("NAME", numeric=False)] + [
        Column(f"C{i}", numeric=True) for i in range(1, len(widths))
    ]
    row = ["n" * name] + [str(i % 10) * w for i, w in enumerate(widths[1:], start=1)]
    lines = fit_table(columns, [row], width=width)
    assert max(len(line) for line in lines) <= width
    text = "\n".join(lines)
    for column, cell in zip(columns[1:], row[1:], strict=True):
        assert re.search(rf"\b{column.title}\b", text), column.title
        assert cell in text  # numbers are never cut


_OVERFLOW_PROBE = """<script>
document.body.setAttribute("data-overflow",
  String(document.documentElement.scrollWidth - window.innerWidth));
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
def test_the_html_fits_a_laptop_window(
    report: dict[str, Any], tmp_path: Path, browser: Chromium
) -> None:
    """Opened by Chromium in a 1,280 px window, the page does not scroll sideways."""
    page = tmp_path / "report.html"
    page.write_text(
        render_html(report).replace("</body>", _OVERFLOW_PROBE + "</body>"), encoding="utf-8"
    )
    result = browser.render(page, width=1280, height=900)
    assert result.console == []
    found = re.search(r'data-overflow="(-?\d+)"', result.dom)
    assert found is not None, result.dom[:500]
    assert int(found.group(1)) <= 0
