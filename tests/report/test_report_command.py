"""``kubescale report`` against the in-process API server with a simulated workload: the real
CLI as a subprocess (the table; JSON and HTML from ``main`` in this process), and the report's
arithmetic worked out by hand.

Worked out (tests/report/cluster_fixture.py): web runs 2 replicas requesting 500m / 512Mi; its
VPA says lower 100m/200Mi, target 200m/300Mi, upper 400m/600Mi.
- CPU: 500m > upper 400m → ``over``; savings (500 − 200) × 2 = 600m; risk 0.
- memory: 200Mi ≤ 512Mi ≤ 600Mi → ``ok``; savings (512 − 300) Mi × 2 = 424Mi; risk 0.
api (1 × 100m, no memory request) has no VPA: only with --all-workloads, from the model.
node-a: requests 2 × 500m + 100m = 1100m of 4000m (27%), 2 × 512Mi = 1024Mi of 8Gi (12%);
usage 1000m (25%), 2048Mi (25%).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.sim.apiserver.server import ApiServer
from tests.cli.in_process import run_main
from tests.report.cluster_fixture import MIB, populate

TIMEOUT = 120.0


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    async with ApiServer() as server:
        populate(server)
        path = tmp_path / "kubeconfig"
        server.write_kubeconfig(path)
        yield server, path


async def run_cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubescale", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": "/nonexistent", "KUBECONFIG": ""},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_report_table_json_and_html(
    kubeconfig: tuple[ApiServer, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, path = kubeconfig
    page = tmp_path / "report.html"
    base = ("report", "--kubeconfig", str(path))
    # The table from the real CLI in a child (the entry point; a pipe, so the 120-column
    # table whatever terminal runs the tests); JSON and HTML meanwhile from main in this
    # process, one after the other on a thread (main runs its own event loop; this one serves
    # the API server): a child each cost an interpreter start and the imports (issue 32.7).
    table_child = asyncio.create_task(run_cli(*base))
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("KUBECONFIG", "")
    as_json = await asyncio.to_thread(run_main, [*base, "-o", "json", "--all-workloads"], capsys)
    as_html = await asyncio.to_thread(run_main, [*base, "-o", "html", "--out", str(page)], capsys)
    code_t, table, err_t = await table_child
    code_j, text, err_j = as_json.returncode, as_json.stdout, as_json.stderr
    code_h, err_h = as_html.returncode, as_html.stderr
    assert (code_t, err_t) == (0, "")
    assert (code_j, err_j) == (0, "")
    assert (code_h, err_h) == (0, "")

    report: dict[str, Any] = json.loads(text)
    web, api = sorted(report["workloads"], key=lambda w: w["name"], reverse=True)
    assert (web["name"], web["source"], web["replicas"], web["pods"]) == ("web", "vpa", 2, 2)
    (container,) = web["containers"]
    assert container["cpu"] == {
        "request": 500, "limit": 1000, "lower": 100, "target": 200, "upper": 400,
        "verdict": "over", "savings": 600, "risk": 0,
    }  # fmt: skip
    assert container["memory"] == {
        "request": 512 * MIB, "limit": None, "lower": 200 * MIB, "target": 300 * MIB,
        "upper": 600 * MIB, "verdict": "ok", "savings": 424 * MIB, "risk": 0,
    }  # fmt: skip
    assert web["vpa"] == {"name": "web-vpa", "update_mode": "Off"}
    assert web["hpa"]["targets"] == "cpu: 30%/70%"
    assert web["hpa"]["conditions"]["ScalingLimited"] == {
        "status": "True", "reason": "TooFewReplicas"}  # fmt: skip

    # api: the recommender's model on one live sample of 300m / 100Mi. The target is at least
    # the sample plus the 15 % margin (the histogram's percentile is a bucket's end, ≥ the
    # sample): 300 × 1.15 = 345m; memory has no request → unset, all of the target at risk.
    assert api["source"] == "model"
    cpu, memory = api["containers"][0]["cpu"], api["containers"][0]["memory"]
    assert cpu["target"] >= 345
    assert cpu["lower"] <= cpu["target"] <= cpu["upper"]
    assert cpu["risk"] == cpu["target"] - 100
    assert memory["verdict"] == "unset"
    assert memory["risk"] == memory["target"] >= 250 * 10**6  # the 250 MB pod minimum
    assert report["model"]["live_samples"] == 6  # 3 pods × (cpu, memory)

    (node,) = report["nodes"]
    assert node["cpu"] == {"allocatable": 4000, "requested": 1100, "usage": 1000}
    assert node["memory"] == {"allocatable": 8192 * MIB, "requested": 1024 * MIB,
                              "usage": 2048 * MIB}  # fmt: skip
    assert report["missing"] == []
    # web's VPA is in mode Off: the updater's plan (its own decision, a dry run) is empty
    assert report["updater_plan"] == []

    lines = table.splitlines()
    assert any(line.split()[:3] == ["shop/Deployment/web", "vpa", "2"] for line in lines)
    row = next(line.split() for line in lines if line.startswith("  app"))
    assert row == ["app", "500m", "100m", "200m", "400m", "over",
                   "512Mi", "200Mi", "300Mi", "600Mi", "ok"]  # fmt: skip
    assert not any("api" in line.split()[0] for line in lines if line.strip())  # no VPA
    node_row = next(line.split() for line in lines if line.startswith("node-a"))
    assert node_row == ["node-a", "3", "4000m", "1100m", "27%", "1000m", "25%",
                        "8192Mi", "1024Mi", "12%", "2048Mi", "25%"]  # fmt: skip
    assert "VPA updater plan now (dry run, nothing written): nothing to evict or resize." in lines
    assert all(len(line) <= 120 for line in lines)

    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "shop/Deployment/web" in html
    assert '<td class="over">over</td>' in html
    assert "<h2>VPA updater plan</h2>" in html
    assert "http://" not in html
    assert "https://" not in html  # self-contained: nothing fetched

    # read-only: the report made no request but get/list (the updater's plan included: it
    # reads ReplicaSets and LimitRanges and writes nothing)
    counts = server.requests.counts()
    verbs = {record.verb for record in counts}
    assert verbs
    assert verbs <= {"get", "list"}
    assert {"replicasets", "limitranges"} <= {record.resource for record in counts}
