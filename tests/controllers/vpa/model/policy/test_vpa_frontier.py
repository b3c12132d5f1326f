"""``bench/vpa_frontier.py`` and the upstream flags of ``bench/vpa_trace_replay.py`` (issue 31):
the tuning/validation split cannot be crossed, the frontier is the Pareto set, the goal check
compares with the best upstream setting at no more memory slack (tiny synthetic traces)."""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import vpa_frontier as vf
from bench import vpa_trace_replay as replay

HEADER = (
    "timestamp,workload,container,cpu_cores,memory_bytes,cpu_provisioned_cores,"
    "memory_provisioned_bytes\n"
)
START = 1704067200  # 2024-01-01T00:00:00Z


def _trace(path: Path, workloads: tuple[str, ...] = ("vm-001", "vm-002", "vm-251")) -> Path:
    """A day of 5-minute samples per workload; memory steps up every 6 h (OOMs at the steps)
    and CPU spikes every hour."""
    rows = []
    for index, workload in enumerate(workloads):
        base = (200 + 100 * index) << 20
        for step in range(288):
            memory = base * (1 + step // 72)
            cpu = 0.2 + 0.3 * (step % 12 == 0)
            rows.append(f"{START + 300 * step},{workload},main,{cpu:.4f},{memory},1,{1 << 31}\n")
    path.write_text(HEADER + "".join(rows))
    return path


def _spec(path: Path, tuning: str, points: list[dict[str, object]] | None = None) -> Path:
    points = points or [
        {"name": vf.DEFAULT_POINT, "kind": "upstream"},
        {"name": "p100", "flags": {"--target-memory-percentile": "1.0"}},
        {"name": "adaptive", "kind": "adaptive", "params": ["oom_hold_ns=12h"]},
    ]
    path.write_text(json.dumps({"tuning": tuning, "points": points}))
    return path


@pytest.mark.parametrize(
    ("tuning", "named"),
    [
        ("vm-251", "vm-251"),  # a validation workload alone
        ("vm-001-vm-260", "vm-251"),  # a range running into the validation part
        ("vm-010,vm-499", "vm-499"),
        ("vm-001-vm-250,vm-300", "vm-300"),
    ],
)
def test_a_sweep_naming_validation_workloads_as_its_tuning_set_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tuning: str, named: str
) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    spec = _spec(tmp_path / "sweep.json", tuning)
    out = tmp_path / "out.json"
    status = vf.main(["sweep", str(spec), "--trace", str(trace), "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2
    assert "tuning: names" in err
    assert "outside the tuning part" in err
    assert named in err
    assert "Traceback" not in err
    assert not out.exists()  # nothing replayed


def test_all_workloads_as_the_tuning_set_is_refused(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "sweep.json", "all")
    with pytest.raises(vf.SweepError, match="'all' would include the validation part"):
        vf.load_sweep(spec)


def test_validation_refuses_results_tuned_on_validation_workloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tuning results file edited (or produced elsewhere) to hold validation workloads."""
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    out = tmp_path / "tuning.json"
    spec = _spec(tmp_path / "sweep.json", "vm-001-vm-002")
    assert vf.main(["sweep", str(spec), "--trace", str(trace), "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    results["workload_names"].append("vm-251")
    out.write_text(json.dumps(results))
    capsys.readouterr()
    status = vf.main(["validate", str(out), "--trace", str(trace), "--workloads", "vm-251"])
    assert status == 2
    assert "tuning results: names 1 workload(s) outside the tuning part" in capsys.readouterr().err
    # And the validation run itself stays in the validation part.
    results["workload_names"].remove("vm-251")
    out.write_text(json.dumps(results))
    assert vf.main(["validate", str(out), "--trace", str(trace), "--workloads", "vm-002"]) == 2
    assert "not in the validation part" in capsys.readouterr().err


def test_sweep_validate_report_on_a_tiny_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    spec = _spec(tmp_path / "sweep.json", "vm-001-vm-002")
    tuning, validation = tmp_path / "tuning.json", tmp_path / "validation.json"
    assert vf.main(["sweep", str(spec), "--trace", str(trace), "--out", str(tuning)]) == 0
    t = json.loads(tuning.read_text())
    assert t["workload_names"] == ["vm-001", "vm-002"]
    # Each point equals a plain replay of the same flags (the bench adds nothing of its own).
    plain = replay.PolicyTotals()
    config = replay.model_config_from_flags({"--target-memory-percentile": "1.0"})
    for workload, samples in replay.read_workloads(trace, only={"vm-001", "vm-002"}):
        plain.add(replay.replay_workload(workload, samples, config=config).recommender)
    assert t["points"]["p100"]["totals"] == asdict(plain)
    assert (
        vf.main(
            [
                "validate",
                str(tuning),
                "--trace",
                str(trace),
                "--workloads",
                "vm-251",
                "--out",
                str(validation),
            ]
        )
        == 0
    )
    v = json.loads(validation.read_text())
    assert v["workload_names"] == ["vm-251"]
    assert "adaptive" in v["points"]
    assert vf.DEFAULT_POINT in v["points"]
    svg = tmp_path / "chart.svg"
    capsys.readouterr()
    assert vf.main(["report", str(tuning), str(validation), "--svg", str(svg)]) == 0
    report = capsys.readouterr().out
    assert "| tuning | adaptive |" in report
    assert "| validation | adaptive |" in report
    root = ElementTree.fromstring(svg.read_text())  # well-formed
    assert root.tag.endswith("svg")
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 4  # 2 parts × 2 axes


def test_upstream_flags_reach_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "tiny-2024-01.csv")
    out_default, out_flags = tmp_path / "d.json", tmp_path / "f.json"
    assert replay.main(["--trace", str(trace), "--out", str(out_default)]) == 0
    assert (
        replay.main(
            [
                "--trace",
                str(trace),
                "--out",
                str(out_flags),
                "--target-memory-percentile",
                "1.0",
                "--recommendation-margin-fraction",
                "1.0",
                "--oom-bump-up-ratio",
                "4",
            ]
        )
        == 0
    )
    d = json.loads(out_default.read_text())["totals"]["upstream"]
    f = json.loads(out_flags.read_text())["totals"]["upstream"]
    # P100 with a 100 % margin requests at least twice the highest peak (P90 + 15 % before).
    assert f["memory_requested_gib_h"] > d["memory_requested_gib_h"]
    assert f["oom_samples"] < d["oom_samples"]
    assert json.loads(out_flags.read_text())["upstream_flags"] == {
        "--target-memory-percentile": "1.0",
        "--recommendation-margin-fraction": "1.0",
        "--oom-bump-up-ratio": "4",
    }
    capsys.readouterr()
    with pytest.raises(SystemExit):
        replay.main(["--trace", str(trace), "--target-memory-percentile", "1.5"])
    err = capsys.readouterr().err
    assert "--target-memory-percentile: must be within [0, 1], got 1.5" in err
    assert "Traceback" not in err


def _t(slack: float, oom: int, throttled: int = 0, updates: int = 0) -> replay.PolicyTotals:
    return replay.PolicyTotals(
        memory_slack_gib_h=slack, oom_samples=oom, throttled_samples=throttled, updates=updates
    )


def test_the_frontier_table() -> None:
    points = {
        "a": _t(100, 50),  # least slack: on it
        "b": _t(120, 60),  # more slack and more OOMs than a: dominated
        "c": _t(150, 20),  # on it
        "d": _t(150, 25),  # same slack as c, more OOMs: dominated
        "e": _t(300, 20),  # same OOMs as c, more slack: dominated
        "f": _t(400, 5),  # on it
    }
    assert vf.frontier(points, vf.MEMORY_AXES) == ["a", "c", "f"]
    # Linear between neighbours: at 125 GiB-h, half-way from a (50) to c (20) → 35.
    assert vf.interpolate(points, ["a", "c", "f"], 125.0) == pytest.approx(35.0)
    assert vf.interpolate(points, ["a", "c", "f"], 90.0) is None


@pytest.mark.parametrize(
    ("policy", "reference", "met", "reason"),
    [
        # slack 160: best upstream within it is c (150 GiB-h, 20 OOMs); 10 ≤ 20/2 → met.
        (_t(160, 10, throttled=7, updates=9), "c", True, ""),
        # 11 > 20/2 = 10 → not met.
        (_t(160, 11, throttled=7, updates=9), "c", False, "OOM samples 11 > half of 20"),
        # at slack 410 the reference is f (5 OOMs): 2 ≤ 2.5 but updates 12 > 10.
        (_t(410, 2, throttled=7, updates=12), "f", False, "updates 12 > 10"),
        (_t(160, 10, throttled=9, updates=9), "c", False, "throttled 9 > 8"),
        # below the least-slack upstream setting: nothing to compare with at equal slack.
        (_t(90, 0), None, False, "less slack than any"),
    ],
)
def test_the_goal_check_table(
    policy: replay.PolicyTotals, reference: str | None, met: bool, reason: str
) -> None:
    points = {
        "a": _t(100, 50, 10, 10),
        "c": _t(150, 20, 8, 9),
        "f": _t(400, 5, 6, 10),
        "ours": policy,
    }
    check = vf.goal_check("ours", points, ["a", "c", "f"])
    assert (check.reference, check.met) == (reference, met)
    assert reason in "; ".join(check.reasons)


@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3),
        st.tuples(st.integers(0, 50), st.integers(0, 50)),
        min_size=1,
        max_size=25,
    )
)
def test_the_frontier_is_the_set_of_undominated_points(
    raw: dict[str, tuple[int, int]],
) -> None:
    points = {n: _t(float(x), y) for n, (x, y) in raw.items()}
    front = vf.frontier(points, vf.MEMORY_AXES)

    def dominates(a: tuple[int, int], b: tuple[int, int]) -> bool:
        return a[0] <= b[0] and a[1] <= b[1] and a != b

    for name, value in raw.items():
        dominated = any(dominates(other, value) for other in raw.values())
        if dominated:
            assert name not in front
        else:
            # Undominated: on the frontier unless an identical point represents it.
            assert name in front or any(raw[f] == value for f in front)
    # Along the frontier slack rises and OOMs fall strictly.
    pairs = [raw[n] for n in front]
    assert all(a[0] <= b[0] and a[1] > b[1] for a, b in itertools.pairwise(pairs))
