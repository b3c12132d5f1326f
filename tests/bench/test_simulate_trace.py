"""``bench/simulate_trace.py``'s global window: the trace's first hours, every workload in them."""

from __future__ import annotations

import csv
import lzma
from pathlib import Path

from bench.simulate_trace import cut_window

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
