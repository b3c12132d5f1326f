"""Trace replay: a CSV trace (plain or xz) is reproduced exactly at its sample times and held
between them; the Bitbrains month's first rows replay as read directly through lzma."""

from __future__ import annotations

import csv
import io
import lzma
from pathlib import Path

import pytest

from kubescale.sim.cluster.trace_replay import Trace, TraceReplay, load_trace
from kubescale.sim.cluster.usage_models import Usage, UsageBook

BITBRAINS = Path("/work/shared/traces/bitbrains-rnd-2013-07.csv.xz")

ROWS = """\
workload,timestamp,container,cpu_cores,memory_bytes,cpu_provisioned_cores,memory_provisioned_bytes,note
vm-b,1000,main,0.5,1000000,2,8415870976,x
vm-a,1600,main,0.25,3000000,1.5,1073741824,
vm-a,1000,main,0.125,2000000,1.5,1073741824,
vm-a,1300,main,0.0625,2500000,1.5,1073741824,
vm-a,1300,main,0.75,2600000,1.5,1073741824,later duplicate wins
vm-b,1900,main,1.5,4000000,2,8415870976,
vm-a,1000,sidecar,0.01,500000,,,
"""


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.csv"
    path.write_text(ROWS)
    return path


def replay_at(model: TraceReplay, t: float, *, replicas: int = 1) -> Usage:
    return model.usage(t=t, pod_index=0, replicas=replicas, since_start=t)


def test_the_trace_is_read_sorted_with_the_later_duplicate_winning(trace_file: Path) -> None:
    trace = load_trace(trace_file)
    assert (trace.start, trace.end) == (1000.0, 1900.0)
    assert trace.workloads() == ["vm-a", "vm-b"]
    assert trace.containers("vm-a") == ["main", "sidecar"]
    series = trace.get("vm-a", "main")
    assert series.times == (1000.0, 1300.0, 1600.0)
    assert series.cpu_cores == (0.125, 0.75, 0.25)
    assert series.memory_bytes == (2000000.0, 2600000.0, 3000000.0)


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (0.0, Usage(0.125, 2e6)),  # = trace time 1000, a sample
        (299.0, Usage(0.125, 2e6)),  # held until the next sample
        (300.0, Usage(0.75, 2.6e6)),
        (599.999, Usage(0.75, 2.6e6)),
        (600.0, Usage(0.25, 3e6)),
        (5000.0, Usage(0.25, 3e6)),  # after the last: the last
    ],
)
def test_replay_is_exact_at_samples_and_holds_between(
    trace_file: Path, t: float, expected: Usage
) -> None:
    model = TraceReplay(load_trace(trace_file), "vm-a", "main")
    assert replay_at(model, t) == expected


def test_linear_hold_interpolates_and_still_hits_the_samples(trace_file: Path) -> None:
    model = TraceReplay(load_trace(trace_file), "vm-a", "main", hold="linear")
    assert replay_at(model, 0.0) == Usage(0.125, 2e6)
    assert replay_at(model, 300.0) == Usage(0.75, 2.6e6)
    assert replay_at(model, 150.0) == Usage(0.4375, 2.3e6)
    assert replay_at(model, 9999.0) == Usage(0.25, 3e6)


def test_offsets_a_late_series_and_shared_division(trace_file: Path) -> None:
    trace = load_trace(trace_file)
    late = TraceReplay(trace, "vm-b", "main")
    assert replay_at(late, 0.0) == Usage(0.5, 1e6)
    assert replay_at(late, 900.0) == Usage(1.5, 4e6)  # vm-b keeps its place in the trace
    shifted = TraceReplay(trace, "vm-b", "main", time_offset=900.0)
    assert replay_at(shifted, 0.0) == Usage(1.5, 4e6)
    shared = TraceReplay(trace, "vm-b", "main", shared=True)
    assert replay_at(shared, 900.0, replicas=4) == Usage(0.375, 1e6)


def test_filters_by_workload_and_time(trace_file: Path) -> None:
    trace = load_trace(trace_file, workloads={"vm-a"}, start=1300.0, end=1600.0)
    assert trace.workloads() == ["vm-a"]
    assert trace.start == 1300.0
    assert trace.get("vm-a", "main").times == (1300.0, 1600.0)
    model = TraceReplay(trace, "vm-a", "main")
    assert replay_at(model, 0.0) == Usage(0.75, 2.6e6)
    with pytest.raises(KeyError, match="vm-b/main"):
        TraceReplay(trace, "vm-b", "main")
    with pytest.raises(ValueError, match="no samples"):
        load_trace(trace_file, workloads={"vm-z"})


def test_provisioned_amounts_become_exact_quantities(trace_file: Path) -> None:
    trace = load_trace(trace_file)
    assert trace.provisioned("vm-b", "main") == Usage(2.0, 8415870976.0)
    assert trace.initial_resources("vm-b", "main") == {"cpu": "2", "memory": "8026Mi"}
    assert trace.initial_resources("vm-a", "main") == {"cpu": "1500m", "memory": "1Gi"}
    assert trace.provisioned("vm-a", "sidecar") is None
    assert trace.initial_resources("vm-a", "sidecar") is None


def test_xz_files_and_bad_input(trace_file: Path, tmp_path: Path) -> None:
    packed = tmp_path / "small.csv.xz"
    packed.write_bytes(lzma.compress(trace_file.read_bytes()))
    plain, compressed = load_trace(trace_file), load_trace(packed)
    assert plain.series == compressed.series
    broken = tmp_path / "broken.csv"
    broken.write_text("timestamp,workload,container,cpu_cores\n1,a,b,0.1\n")
    with pytest.raises(ValueError, match="memory_bytes"):
        load_trace(broken)
    broken.write_text("timestamp,workload,container,cpu_cores,memory_bytes\n1,a,b,lots,1\n")
    with pytest.raises(ValueError, match=r"broken\.csv:2"):
        load_trace(broken)
    broken.write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_trace(broken)


def test_a_trace_model_through_the_usage_book(trace_file: Path) -> None:
    book = UsageBook(seed=5)
    book.set_model(
        workload="vm-a", container="main", model=TraceReplay(load_trace(trace_file), "vm-a", "main")
    )
    got = book.usage(
        workload="vm-a", container="main", pod_index=2, t=300.0, replicas=3, since_start=0
    )
    assert got == Usage(0.75, 2.6e6)


@pytest.mark.skipif(not BITBRAINS.exists(), reason=f"{BITBRAINS} is not on this machine")
def test_the_first_bitbrains_rows_replay_exactly(tmp_path: Path) -> None:
    with lzma.open(BITBRAINS, "rt", newline="") as text:
        head = [next(text) for _ in range(301)]  # the header and 300 samples of vm-001
    rows = list(csv.DictReader(io.StringIO("".join(head))))
    assert {row["workload"] for row in rows} == {"vm-001"}
    sample = tmp_path / "head.csv.xz"
    sample.write_bytes(lzma.compress("".join(head).encode()))
    trace: Trace = load_trace(sample)
    model = TraceReplay(trace, "vm-001", "main")
    start = float(rows[0]["timestamp"])
    assert trace.start == start
    for row, following in zip(rows, [*rows[1:], None], strict=True):
        t = float(row["timestamp"]) - start
        expected = Usage(float(row["cpu_cores"]), float(row["memory_bytes"]))
        assert replay_at(model, t) == expected
        if following is not None:  # held until just before the next sample
            gap = float(following["timestamp"]) - float(row["timestamp"])
            assert replay_at(model, t + gap - 0.001) == expected
    first = rows[0]
    assert trace.provisioned("vm-001", "main") == Usage(
        float(first["cpu_provisioned_cores"]), float(first["memory_provisioned_bytes"])
    )
