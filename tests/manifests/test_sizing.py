"""Sizing (issue 32.4, issue 29): the README's table of requests and limits per cluster size,
held to the measured curve (``bench/results/scale_cluster_sizing.json``, the runs of
``bench/scale_cluster.py`` with projected caches), and the defaults the chart and the kustomize
base ship — the table's 10k-pod row, which fits the measured use at 10k pods with room."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

import yaml

from kubescale.objects.quantities import parse_quantity

from .manifest_files import MANIFESTS, find, render

ROOT: Final = Path(__file__).resolve().parents[2]
README: Final = ROOT / "README.md"
VALUES: Final = ROOT / "charts" / "kubescale" / "values.yaml"
MEASURED: Final = ROOT / "bench" / "results" / "scale_cluster_sizing.json"
COLUMNS: Final = (
    "pods", "nodes", "measured RSS (MiB)", "steady CPU-s / min", "memory request",
    "memory limit", "CPU request",
)  # fmt: skip
MIB: Final = 1024 * 1024


def _sizing_rows() -> dict[str, dict[str, str]]:
    """The README's Sizing table, by its ``pods`` cell."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Sizing", 1)[1].split("\n#", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert tuple(header) == COLUMNS
    rows: dict[str, dict[str, str]] = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def _resources(row: dict[str, str]) -> dict[str, Any]:
    return {
        "requests": {"cpu": row["CPU request"], "memory": row["memory request"]},
        "limits": {"memory": row["memory limit"]},
    }


def test_the_chart_and_the_base_ship_the_10k_row() -> None:
    expected = _resources(_sizing_rows()["10k"])
    values = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
    assert values["resources"] == expected
    deployment = find(render(), "Deployment", "kubescale")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == expected
    # the comment table in values.yaml marks the same row
    marked = [line for line in VALUES.read_text().splitlines() if "<- these defaults" in line]
    assert len(marked) == 1
    assert marked[0].split()[1:7] == ["10k", "333", "246", "MiB", "384Mi", "768Mi"]
    assert (MANIFESTS / "base" / "deployment.yaml").is_file()


def test_every_row_leaves_room_above_the_measured_use() -> None:
    """Request ≥ measured peak (× 1.3 room at least), limit ≥ request, CPU ≥ steady use."""
    for pods, row in _sizing_rows().items():
        measured = re.findall(r"[\d,]+", row["measured RSS (MiB)"])
        peak_mib = max(int(m.replace(",", "")) for m in measured)
        request = parse_quantity(row["memory request"]).as_float()
        limit = parse_quantity(row["memory limit"]).as_float()
        assert request >= peak_mib * MIB * 1.3, pods
        assert limit >= request * 2, pods
        # e.g. 10k: 9.16 CPU-s per minute = 153m; 350m requested
        steady = float(row["steady CPU-s / min"]) / 60
        assert parse_quantity(row["CPU request"]).as_float() >= steady * 2, pods


def _measured_runs() -> dict[str, dict[str, Any]]:
    """The runs of ``bench/scale_cluster.py`` the table is taken from, by the table's ``pods``
    cell (1000 -> "1k")."""
    runs: dict[str, dict[str, Any]] = {}
    for result in json.loads(MEASURED.read_text(encoding="utf-8")).values():
        for run in result["runs"]:
            runs[f"{run['pods'] // 1000}k"] = run
    return runs


def _thousands(value: float) -> str:
    return f"{round(value):,}"


def test_the_table_is_the_measured_curve_with_projected_caches() -> None:
    """Every row is a measured run (and every run a row, 150k included): nodes, RSS when
    measured (its peak beside it when higher), steady CPU-seconds per minute, as recorded."""
    rows, runs = _sizing_rows(), _measured_runs()
    assert list(rows) == ["1k", "10k", "50k", "150k"]
    assert set(rows) == set(runs)
    for pods, row in rows.items():
        run = runs[pods]["all"]
        assert row["nodes"] == _thousands(runs[pods]["objects"]["nodes"]), pods
        rss, peak = _thousands(run["rss_mib"]), _thousands(run["peak_rss_mib"])
        assert row["measured RSS (MiB)"] == (rss if rss == peak else f"{rss} (peak {peak})"), pods
        assert row["steady CPU-s / min"] == f"{run['cpu_seconds_per_minute']:.2f}", pods


def test_the_values_comment_table_repeats_the_readme_table() -> None:
    rows = _sizing_rows()
    lines = VALUES.read_text(encoding="utf-8").splitlines()
    start = lines.index(
        "#   pods  nodes   measured RSS        memory request  memory limit  CPU request"
    )
    comment: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if not re.match(r"#\s+\d+k\s", line):
            break
        cells = line.removeprefix("#").split()
        comment[cells[0]] = cells
    assert list(comment) == list(rows)
    for pods, cells in comment.items():
        row = rows[pods]
        assert cells[1] == row["nodes"], pods
        # the last three cells before an optional "<- these defaults" marker
        tail = cells[: cells.index("<-")] if "<-" in cells else cells
        assert tail[-3:] == [row["memory request"], row["memory limit"], row["CPU request"]]
