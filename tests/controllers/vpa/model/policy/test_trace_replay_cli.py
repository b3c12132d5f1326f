"""``bench/vpa_trace_replay.py``: either policy, the reference only for the replay it belongs to,
and a failing exit status when the upstream policy misses it (on a small synthetic trace)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench import vpa_trace_replay as replay
from kubescale.controllers.vpa.model.policy.adaptive_config import AdaptivePolicyConfig

HEADER = (
    "timestamp,workload,container,cpu_cores,memory_bytes,cpu_provisioned_cores,"
    "memory_provisioned_bytes\n"
)
START = 1704067200  # 2024-01-01T00:00:00Z


def _trace(path: Path) -> Path:
    """Two workloads, two days of 5-minute samples: a steady one and one whose memory doubles
    every 12 h (OOMs at each step)."""
    rows = []
    for workload, base in (("vm-001", 200 << 20), ("vm-002", 300 << 20)):
        for step in range(2 * 288):
            memory = base << (step // 144) if workload == "vm-002" else base
            cpu = 0.2 + 0.1 * (step % 12 == 0)
            rows.append(f"{START + 300 * step},{workload},main,{cpu:.4f},{memory},1,{1 << 31}\n")
    path.write_text(HEADER + "".join(rows))
    return path


def _upstream_totals(trace: Path) -> replay.PolicyTotals:
    totals = replay.PolicyTotals()
    for workload, samples in replay.read_workloads(trace):
        totals.add(replay.replay_workload(workload, samples).recommender)
    return totals


def _with_reference(
    monkeypatch: pytest.MonkeyPatch, totals: replay.PolicyTotals, *, workloads: int = 2
) -> None:
    reference = replay.Reference(
        dataset="tiny", month="2024-01", workloads=workloads, totals={"upstream": totals}
    )
    monkeypatch.setattr(replay, "REFERENCES", (reference,))


def test_the_reference_is_checked_only_for_its_own_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    _with_reference(monkeypatch, _upstream_totals(trace))
    assert replay.main(["--trace", str(trace)]) == 0
    assert "upstream policy reproduces the reference" in capsys.readouterr().out
    # A subset of the workloads, another dataset or another workload count: no reference.
    assert replay.main(["--trace", str(trace), "--workloads", "vm-001"]) == 0
    assert "no published reference" in capsys.readouterr().out
    other = _trace(tmp_path / "other-2024-01.csv")
    assert replay.main(["--trace", str(other)]) == 0
    assert "no published reference" in capsys.readouterr().out
    _with_reference(monkeypatch, _upstream_totals(trace), workloads=3)
    assert replay.main(["--trace", str(trace)]) == 0
    assert "no published reference" in capsys.readouterr().out


def test_missing_the_reference_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    ours = _upstream_totals(trace)
    assert ours.oom_samples > 0
    assert ours.updates > 0
    _with_reference(monkeypatch, replace(ours, updates=ours.updates + 1))
    assert replay.main(["--trace", str(trace)]) == 1
    assert "does NOT reproduce the reference: updates" in capsys.readouterr().out
    # Hour totals: within 1e-6 relative passes, beyond fails.
    slack = ours.memory_slack_gib_h
    _with_reference(monkeypatch, replace(ours, memory_slack_gib_h=slack * (1 + 5e-7)))
    assert replay.main(["--trace", str(trace)]) == 0
    _with_reference(monkeypatch, replace(ours, memory_slack_gib_h=slack * (1 + 2e-6)))
    assert replay.main(["--trace", str(trace)]) == 1


def test_both_policies_and_their_updates_in_the_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    _with_reference(monkeypatch, _upstream_totals(trace))
    out = tmp_path / "out.json"
    args = ["--trace", str(trace), "--policy", "both", "--out", str(out)]
    assert replay.main([*args, "--policy-param", "oom_hold_ns=2h"]) == 0
    result = json.loads(out.read_text())
    assert result["month"] == "2024-01"
    assert result["reference_reproduced"] is True
    assert set(result["totals"]) == {"provisioned", "upstream", "adaptive"}
    assert result["adaptive_policy"]["oom_hold_ns"] == 2 * 3600 * 10**9
    upstream, adaptive = result["totals"]["upstream"], result["totals"]["adaptive"]
    assert upstream["updates"] > 0
    assert adaptive["updates"] > 0
    # The growing workload: the adaptive policy's OOM floor (x2) ends the OOMs sooner.
    assert adaptive["oom_samples"] < upstream["oom_samples"]


def test_policy_params() -> None:
    policy = replay.policy_from_params(
        ["oom_hold_ns=90m", "memory_rungs=0.9:0.1,1.0:0.2", "cpu_percentiles=0.9", "cpu_margin=0"]
    )
    assert policy == replace(
        AdaptivePolicyConfig(),
        oom_hold_ns=90 * 60 * 10**9,
        memory_rungs=((0.9, 0.1), (1.0, 0.2)),
        cpu_percentiles=(0.9,),
        cpu_margin=0.0,
    )
    with pytest.raises(ValueError, match="want NAME=VALUE"):
        replay.policy_from_params(["oom_hold=1h"])
    with pytest.raises(ValueError, match="percentile must be within"):
        replay.policy_from_params(["cpu_percentiles=1.5"])


def test_dataset_and_month() -> None:
    assert replay.dataset_name(Path("bitbrains-rnd-2013-07.csv.xz")) == "bitbrains-rnd"
    assert replay.dataset_name(Path("tiny.csv")) == "tiny"
    # Bitbrains' month starts 2013-06-30T22:03Z (Amsterdam midnight): the middle decides.
    assert replay.data_month(1372629804, 1372629804 + 31 * 86400) == "2013-07"


def test_per_workload_totals_sum_to_the_policy_totals(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    out, rows_file = tmp_path / "out.json", tmp_path / "rows.csv"
    argv = ["--trace", str(trace), "--policy", "both", "--out", str(out)]
    assert replay.main([*argv, "--out-workloads", str(rows_file)]) == 0
    totals = json.loads(out.read_text())["totals"]
    lines = rows_file.read_text().splitlines()
    header = lines[0].split(",")
    assert header[:2] == ["workload", "policy"]
    # one row per workload and policy (2 workloads x upstream, adaptive, provisioned)
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    assert sorted((r["workload"], r["policy"]) for r in rows) == [
        (w, p) for w in ("vm-001", "vm-002") for p in ("adaptive", "provisioned", "upstream")
    ]
    for policy, expected in totals.items():
        mine = [r for r in rows if r["policy"] == policy]
        for name in ("oom_samples", "updates", "throttled_samples"):
            assert sum(int(r[name]) for r in mine) == expected[name]
        assert sum(float(r["memory_slack_gib_h"]) for r in mine) == pytest.approx(
            expected["memory_slack_gib_h"], rel=1e-12
        )
