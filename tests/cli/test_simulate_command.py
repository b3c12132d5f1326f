"""``kubescale simulate`` end to end: the built-in demo in a subprocess prints the summary and
writes the reports; an invalid scenario exits 2 naming every bad field; progress output. The
entry point runs as a child in the demo's end-to-end and byte-identical tests; the other
commands' checks run ``main`` in this process (issue 32.7)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from kubescale.cli.main import build_parser
from kubescale.cli.simulate_command import ProgressReporter, demo_scenario_path
from tests.cli.in_process import Done, run_main

ROOT = Path(__file__).resolve().parents[2]
GUARD = 900.0
"""Seconds a child may take before the test fails: only a hung child gets there (no test bounds
elapsed time: the suite runs on loaded machines; issue 32.7)."""


def _simulate(
    *argv: str, cwd: Path, hash_seed: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    return subprocess.run(
        [sys.executable, "-m", "kubescale", "simulate", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=GUARD, check=False,
    )  # fmt: skip


def _simulate_here(
    *argv: str, cwd: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Done:
    """``kubescale simulate ARGV`` in this process from ``cwd``
    (:func:`tests.cli.in_process.run_main`); the entry point itself keeps its subprocess tests
    (the demo end to end and the byte-identical reports across interpreter hash seeds)."""
    monkeypatch.chdir(cwd)
    return run_main(["simulate", *argv], capsys)


DEMO_HASH_SEED = "2"
"""The end-to-end demo child's interpreter hash seed (the byte-identical test runs another)."""


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """The demo end to end in a child, once for the module: the end-to-end test reads its
    output and reports; the byte-identical test compares its JSON report with another child's
    (the report does not depend on ``--quiet`` or ``--report-html``: progress and the page are
    written beside it, from the same report)."""
    tmp_path = tmp_path_factory.mktemp("demo")
    # the demo compares three runs; 30 minutes of each keeps the test short
    json_file, html_file = tmp_path / "demo.json", tmp_path / "demo.html"
    done = _simulate(
        "--duration", "30m", "--report-json", str(json_file), "--report-html", str(html_file),
        cwd=tmp_path, hash_seed=DEMO_HASH_SEED,
    )  # fmt: skip
    return done, json_file, html_file


def test_the_demo_runs_end_to_end(
    demo_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    done, json_file, html_file = demo_run
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("Scenario 'demo', seed 42: 30m from 2026-01-05T06:00:00")
    assert "SAME SEED, THREE WAYS" in out
    assert "What kubescale did — components: cluster-autoscaler, descheduler, hpa-controller" in out
    for workload in ("data/reports", "shop/cache", "shop/web"):  # the batch starts at 1h
        assert workload in out
    assert "OOM KILLS" in out
    # not a terminal: one plain progress line per 10 % of the three runs' simulated time
    progress = done.stderr.splitlines()
    assert progress[0] == "simulated 10m of 1h30m (11%)"  # 45 steps of 2 minutes
    assert progress[-1] == "simulated 1h30m of 1h30m (100%)"
    assert len(progress) == 10
    report = json.loads(json_file.read_text())
    assert (report["scenario"], report["seed"]) == ("demo", 42)
    assert [v["variant"] for v in report["comparison"]] == ["none", "separate", "one-brain"]
    assert report["comparison"][0]["evictions"] == 0
    assert report["hpas"][0]["name"] == "web"
    assert {v["name"] for v in report["vpas"]} == {"batch", "cache", "reports", "web"}
    html = html_file.read_text()
    assert "<svg" in html
    assert "<h2>Comparison</h2>" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")


def test_overrides_and_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    json_file = tmp_path / "short.json"
    done = _simulate_here(
        str(demo_scenario_path()), "--seed", "9", "--duration", "30m", "--step", "5m",
        "--no-compare", "--quiet", "--report-json", str(json_file),
        cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("Scenario 'demo', seed 9: 30m from")
    assert "SAME SEED" not in done.stdout  # --no-compare: one run, with kubescale
    report = json.loads(json_file.read_text())
    assert (report["seed"], report["duration"], report["step"]) == (9, 1800.0, 300.0)


def test_an_invalid_scenario_exits_2_listing_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nduration: 1h\nworkloads:\n"
        "  - kind: Deployment\n    name: web\n    containers:\n"
        "      - name: app\n        usage: {type: sine}\n"
        "  - kind: CronJob\n    name: nightly\n    containers: []\n"
    )
    done = _simulate_here(str(bad), cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"kubescale simulate: {bad}: workloads[0].containers[0].usage.type: unknown usage "
        'model "sine" (want one of: constant, diurnal, step, randomWalk, bursts, linear, replay)',
        f'kubescale simulate: {bad}: workloads[1].kind: unknown workload kind "CronJob" (want '
        "one of: Deployment, StatefulSet, DaemonSet, Job)",
        f"kubescale simulate: {bad}: workloads[1].containers: a pod needs at least one container",
    ]


def test_a_bad_flag_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["simulate", "--step", "fast"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "kubescale simulate: error: argument --step: invalid duration 'fast' "
        "(want e.g. 10s, 1m30s, 500ms)\n"
    )


def test_progress_on_a_terminal_is_one_redrawn_bar() -> None:
    stream = io.StringIO()
    report = ProgressReporter(stream=stream, duration=3600.0, interactive=True)
    for step in range(1, 61):
        report(step / 60)
    text = stream.getvalue()
    assert text.count("\r") == 60  # one redraw per new percent (60 steps: 60 distinct values)
    assert text.endswith("\r[" + "#" * 30 + "] simulated 1h00m of 1h00m (100%)\n")
    assert "\r[###############---------------] simulated 30m of 1h00m (50%)" in text


def test_plain_progress_prints_each_tenth_once() -> None:
    stream = io.StringIO()
    report = ProgressReporter(stream=stream, duration=86400.0, interactive=False)
    for step in range(1, 1441):
        report(step / 1440)
    lines = stream.getvalue().splitlines()
    assert lines[:3] == [
        "simulated 2h24m of 1d00h00m (10%)",
        "simulated 4h48m of 1d00h00m (20%)",
        "simulated 7h12m of 1d00h00m (30%)",
    ]
    assert len(lines) == 10


def test_reports_are_byte_identical_across_processes(
    tmp_path: Path, demo_run: tuple[subprocess.CompletedProcess[str], Path, Path]
) -> None:
    """Same seed, different interpreter hash seeds: nothing may depend on set or dict hashing."""
    # One child here with hash seed 1 against the end-to-end test's child (hash seed 2, the
    # same 30 minutes of the demo's three runs): two processes, as before, but the second run
    # is shared with the end-to-end test (issue 32.7). 30 minutes: the property (nothing
    # depends on hashing) does not need the 3 h the test ran before.
    other, other_json, _ = demo_run
    assert other.returncode == 0, other.stderr
    out = tmp_path / "run-1.json"
    done = _simulate("--duration", "30m", "--quiet", "--report-json", str(out), cwd=tmp_path,
                     hash_seed="1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert DEMO_HASH_SEED != "1"
    assert out.read_bytes() == other_json.read_bytes()


def test_comparing_recommendation_policies_runs_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    example = ROOT / "examples" / "vpa-adaptive-policy.yaml"
    json_file = tmp_path / "cmp.json"
    done = _simulate_here(
        str(example), "--duration", "20m", "--quiet", "--compare-recommendation-policies",
        "--report-json", str(json_file), cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("== recommendation policy upstream ==") < out.index(
        "== recommendation policy adaptive =="
    )
    table = out[out.index("RECOMMENDATION POLICY") :].splitlines()
    assert [row.split()[0] for row in table[2:]] == ["upstream", "adaptive"]
    for policy in ("upstream", "adaptive"):
        report = json.loads((tmp_path / f"cmp.{policy}.json").read_text())
        # each row of the table is read from that policy's own report
        row = next(r for r in table[2:] if r.split()[0] == policy).split()
        assert int(row[1]) == report["cluster"]["oom_kills"]
        assert int(row[2]) == report["cluster"]["evictions"]
    assert not json_file.exists()


def test_comparing_policies_needs_the_recommender(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the built-in demo runs the recommender now: a scenario without one)
    scenario = tmp_path / "no-recommender.yaml"
    scenario.write_text(
        "name: plain\nduration: 10m\nnodes: [{name: n, allocatable: {cpu: '1', memory: 1Gi}}]\n"
    )
    done = _simulate_here(
        str(scenario), "--compare-recommendation-policies", "--quiet",
        cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"kubescale simulate: {scenario}: kubescale.vpa-recommender: comparing "
        "recommendation policies needs the VPA recommender in the scenario\n"
    )


def test_an_unwritable_report_path_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run would take the whole simulation; the path is checked first (exit 2, one line).
    target = tmp_path / "missing" / "x.html"
    here = partial(_simulate_here, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    done = here("--report-html", str(target), "--quiet")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"kubescale simulate: error: --report-html {target}: directory {target.parent} "
        "does not exist\n"
    )
    done = here("--report-json", str(tmp_path), "--quiet")
    assert done.stderr == f"kubescale simulate: error: --report-json {tmp_path}: is a directory\n"


def test_an_example_runs_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    here = partial(_simulate_here, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    done = here("vpa-webhook", "--duration", "10m", "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Scenario 'vpa-webhook'")
    done = here("no-such-example", "--quiet")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("kubescale simulate: error: no-such-example: no such scenario file")
    assert "vpa-updater" in line


def test_a_negative_duration_is_named_not_taken_for_a_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["simulate", "--duration", "-5m"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("kubescale simulate: error: argument --duration:")
    assert "expected one argument" not in error
    assert "-5m" in error
