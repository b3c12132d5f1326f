"""``bench/simulate_trace.py``'s global window: the trace's first hours, every workload in them."""

from __future__ import annotations

import asyncio
import csv
import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from bench import simulate_trace
from bench.simulate_trace import cut_window
from kubescale.sim.scenario.comparison import run_variants

HEADER = "timestamp,workload,container,cpu_cores,memory_bytes\n"
T0 = 1372629804


def test_the_window_starts_at_the_trace_start_and_keeps_every_workload_in_it(
    tmp_path: Path,
) -> None:
    # sorted by workload then time, as the Bitbrains file is: vm-001 from T0, vm-002 from
    # T0 + 1 h (the window's last hour), vm-003 from T0 + 3 h (after a 2 h window)
    rows = [
        *(f"{T0 + 300 * i},vm-001,main,0.5,100\n" for i in range(30)),
        *(f"{T0 + 3600 + 300 * i},vm-002,main,0.5,100\n" for i in range(30)),
        *(f"{T0 + 3 * 3600 + 300 * i},vm-003,main,0.5,100\n" for i in range(5)),
    ]
    source = tmp_path / "trace.csv.xz"
    with lzma.open(source, "wt", encoding="utf-8") as text:
        text.write(HEADER + "".join(rows))
    target = tmp_path / "slice.csv"
    assert cut_window(source, target, workloads=500, hours=2) == 2
    with target.open(encoding="utf-8") as text:
        kept = list(csv.DictReader(text))
    # 2 h = 7200 s: vm-001's samples at 0, 300, ..., 6900 (24), vm-002's at 3600 ... 6900 (12)
    assert [r["workload"] for r in kept] == ["vm-001"] * 24 + ["vm-002"] * 12
    assert max(int(r["timestamp"]) for r in kept) == T0 + 6900
    # a workload limit keeps the first ones
    assert cut_window(source, target, workloads=1, hours=2) == 1


def test_the_runs_go_on_the_event_loop_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --event-loop uvloop: the uvloop experiment of docs/simulate-speed.md, measured by the same
    # bench (the three runs on uvloop), asyncio's loop otherwise; the result says which
    header = HEADER.rstrip("\n") + ",cpu_provisioned_cores,memory_provisioned_bytes\n"
    rows = [f"{T0 + 300 * i},vm-001,main,0.5,{100 << 20},1,{1 << 30}\n" for i in range(3)]
    source = tmp_path / "trace.csv.xz"
    with lzma.open(source, "wt", encoding="utf-8") as text:
        text.write(header + "".join(rows))
    monkeypatch.setattr(simulate_trace, "TRACE", source)
    loops: list[str] = []

    async def recording(scenario: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
        loops.append(type(asyncio.get_running_loop()).__module__.split(".")[0])
        return await run_variants(scenario, **kwargs)

    monkeypatch.setattr(simulate_trace, "run_variants", recording)
    for chosen in ("uvloop", "asyncio"):
        out = tmp_path / f"{chosen}.json"
        argv = ["--workloads", "1", "--hours", "0.25", "--event-loop", chosen, "--out", str(out)]
        assert simulate_trace.main([*argv, "--node-cpu", "4", "--node-memory", "8Gi"]) == 0
        assert json.loads(out.read_text())["event_loop"] == chosen
    assert loops == ["uvloop", "asyncio"]
