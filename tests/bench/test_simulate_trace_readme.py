"""The README's real-usage table is the one ``bench/simulate_trace.py`` wrote.

``bench/results/simulate_trace_headline.json`` is the run of the Bitbrains trace three ways (its
``comparison``, scale and node group); the README's section shows that comparison as
``kubescale simulate`` prints it (:func:`~kubescale.sim.scenario.decision_log.comparison_rows`)
and says what was run. A rerun that changes a figure must change the README with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubescale.sim.scenario.decision_log import comparison_rows

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "simulate_trace_headline.json"
SECTION = "## Real usage: the Bitbrains trace, three ways"


def _section() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(SECTION)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return lines[start:end]


def _table(section: list[str]) -> list[list[str]]:
    rows = [line for line in section if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _results() -> dict[str, Any]:
    return dict(json.loads(RESULTS.read_text(encoding="utf-8")))


def test_the_table_is_the_runs_comparison() -> None:
    results = _results()
    table = _table(_section())
    header, rule, *rows = table
    variants = results["comparison"]
    assert header[1:] == [v["label"] for v in variants]
    assert all(set(cell) <= set("-:") for cell in rule)
    assert rows == [[label, *cells] for label, cells in comparison_rows(variants)]


def test_the_section_says_what_was_run() -> None:
    results = _results()
    text = " ".join(_section())
    hours = round(results["simulated_hours"])  # the window; the last sample adds seconds
    assert results["window"] == "global"
    assert f"first {hours} h" in text
    assert f"{results['workloads']} VMs" in text
    assert results["node_group"]["instance_type"] in text
