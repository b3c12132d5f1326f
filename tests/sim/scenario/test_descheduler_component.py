"""The ``descheduler`` and ``scheduler-extender`` components in simulated runs (the three
``examples/descheduler-*.yaml`` scenarios).

1. ``descheduler-low-node-utilization.yaml``: LowNodeUtilization evicts two web pods from the
   over-utilized ``hot-0``; with the extender their replacements land on the under-utilized
   cache nodes and nothing more is evicted; without it (the section set to ``false``) the
   replacements land back on hot-0 and every cycle evicts two again (upstream's ping-pong).
2. ``descheduler-node-taint.yaml``: ``a-1`` tainted NoSchedule at 3m is emptied of the web pods
   (the tolerating agent stays) and none returns to it.
3. ``descheduler-dry-run.yaml``: each cycle reports what it would evict; nothing is evicted and
   no pod moves.

Every run is reproducible: the extender's cache is settled before each scheduler call.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubescale.cli.main import main
from kubescale.components import by_name
from kubescale.kube.resources import PODS
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_format import Scenario, ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario
from tests.sim.scenario.shared_runs import shared_run

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"
POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: default
    pluginConfig:
      - name: DefaultEvictor
      - name: RemovePodsViolatingNodeTaints
    plugins:
      deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"""


def _document(kubescale: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "flags",
        "duration": "5m",
        "nodes": [{"name": "n", "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "kubescale": kubescale,
    }


def test_both_are_registered_components() -> None:
    assert by_name("descheduler") is not None
    assert by_name("scheduler-extender") is not None


@pytest.mark.parametrize(
    "kubescale",
    [
        {"descheduler": {"descheduler-policy": POLICY}},
        {"descheduler": {"descheduler-policy": POLICY, "dry-run": True}},
        {
            "descheduler": {"descheduler-policy": POLICY, "descheduling-interval": "1m"},
            "scheduler-extender": {
                "descheduler-policy": POLICY,
                "extender-eviction-memory": "5m",
                "extender-url-prefix": "/deschedule",
            },
        },
    ],
)
def test_valid_flags(kubescale: dict[str, Any]) -> None:
    assert set(parse_scenario(_document(kubescale), base_dir=Path()).kubescale) == set(kubescale)


@pytest.mark.parametrize(
    ("kubescale", "message"),
    [
        (
            {"descheduler": {}},
            "kubescale.descheduler: --descheduler true needs --policy-config-file "
            "(or --descheduler-policy)",
        ),
        (
            {"scheduler-extender": True},
            "kubescale.scheduler-extender: --scheduler-extender true needs "
            "--policy-config-file (or --descheduler-policy)",
        ),
        (
            {"descheduler": {"descheduler-policy": POLICY.replace("Taints]", "Taintz]")}},
            "kubescale.descheduler: --descheduler-policy: profiles[default].plugins.deschedule."
            "enabled[0]: ",
        ),
        (
            {"descheduler": {"descheduler-policy": POLICY, "descheduling-interval": "soon"}},
            "kubescale.descheduler: --descheduling-interval: invalid duration",
        ),
        (
            {"descheduler": {"descheduler-policy": POLICY, "descheduler": True}},
            "kubescale.descheduler: descheduler: unknown descheduler flag",
        ),
    ],
)
def test_invalid_flags_name_the_field(kubescale: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(_document(kubescale), base_dir=Path())
    assert any(problem.startswith(message) for problem in raised.value.problems), (
        raised.value.problems
    )


def _events(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [event for event in report["events"] if event["kind"] == kind]


def _placement(run: SimulationRun, app: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in run.api.store.snapshots(PODS):
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if (meta.get("labels") or {}).get("app") != app or meta.get("deletionTimestamp"):
            continue
        node = spec.get("nodeName") or ""
        counts[node] = counts.get(node, 0) + 1
    return dict(sorted(counts.items()))


async def _run(scenario: Scenario) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    async with SimulationRun(scenario) as run:
        report = await run.run()
        placement = {app: _placement(run, app) for app in ("web", "cache", "agent")}
    return report, placement


def _cache_nodes(placement: dict[str, int]) -> dict[str, int]:
    return {node: n for node, n in placement.items() if node.startswith("cache-")}


async def test_lnu_with_the_extender_replacements_go_to_the_under_utilized_nodes() -> None:
    # the example as written: the run the reproducibility test below compares with a fresh one
    report, placement = await shared_run(
        _run, load_scenario(EXAMPLES / "descheduler-low-node-utilization.yaml")
    )
    evictions = _events(report, "descheduler-eviction")
    assert [e["time"] for e in evictions] == [120.0, 120.0]
    assert all(
        e["detail"].startswith("from hot-0: triggered by default/LowNodeUtilization")
        for e in evictions
    )
    web = placement["web"]
    assert web["hot-0"] == 4
    assert sorted(_cache_nodes(web).values()) == [1, 1]
    # the replacements started on the cache nodes
    started = [e for e in _events(report, "pod-started") if e["time"] > 120.0]
    assert len(started) == 2
    assert all(e["detail"].startswith("on node cache-") for e in started)


async def test_lnu_without_the_extender_the_replacements_land_back() -> None:
    scenario = load_scenario(EXAMPLES / "descheduler-low-node-utilization.yaml")
    kubescale = {k: v for k, v in scenario.kubescale.items() if k != "scheduler-extender"}
    report, placement = await _run(replace(scenario, kubescale=kubescale))
    evictions = _events(report, "descheduler-eviction")
    # every cycle from 2m on evicts two web pods from hot-0 ...
    assert [e["time"] for e in evictions] == [t for t in (120.0, 240.0, 360.0, 480.0) for _ in "ab"]
    # ... and every replacement starts on hot-0 again
    started = [e for e in _events(report, "pod-started") if e["time"] > 120.0]
    assert len(started) == 8
    assert {e["detail"] for e in started} == {"on node hot-0"}
    assert placement["web"] == {"hot-0": 6}


async def test_a_node_tainted_mid_run_is_emptied_and_nothing_returns() -> None:
    scenario = load_scenario(EXAMPLES / "descheduler-node-taint.yaml")
    async with SimulationRun(scenario) as run:
        agents_on_a1: int | None = None
        while not run.done:
            await run.step()
            if run.elapsed > 180.0:  # the taint is applied at 3m
                # after the cycle that saw the taint, no web pod is ever on a-1 again
                assert _placement(run, "web").get("a-1", 0) == 0
            elif agents_on_a1 is None and _placement(run, "agent").get("a-1"):
                agents_on_a1 = _placement(run, "agent")["a-1"]
        report = run.report()
        web, agent = _placement(run, "web"), _placement(run, "agent")
    evictions = _events(report, "descheduler-eviction")
    assert len(evictions) == 2
    assert all(e["time"] == 180.0 and e["detail"].startswith("from a-1: ") for e in evictions)
    assert web == {"a-0": 3, "a-2": 3}
    assert agents_on_a1 == 1
    assert agent == {"a-0": 1, "a-1": 1, "a-2": 1}


async def test_dry_run_reports_and_evicts_nothing() -> None:
    scenario = load_scenario(EXAMPLES / "descheduler-dry-run.yaml")
    async with SimulationRun(scenario) as run:
        before: dict[str, str] | None = None
        while not run.done:
            await run.step()
            if run.elapsed == 90.0:
                before = _web_pods(run)
        report = run.report()
        after = _web_pods(run)
        extender = next(c for c in run.components if c.name == "scheduler-extender")
    would = _events(report, "descheduler-dry-run")
    assert [e["time"] for e in would] == [120.0, 120.0, 240.0, 240.0]
    assert len({e["subject"] for e in would}) == 2
    assert all(e["detail"].startswith("would evict from hot-0: ") for e in would)
    assert _events(report, "descheduler-eviction") == []
    assert report["cluster"]["evictions"] == 0
    assert before == after
    assert len(extender.memory) == 0  # type: ignore[attr-defined]


def _web_pods(run: SimulationRun) -> dict[str, str]:
    return {
        p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or ""
        for p in run.api.store.snapshots(PODS)
        if (p["metadata"].get("labels") or {}).get("app") == "web"
    }


async def test_the_runs_are_reproducible() -> None:
    scenario = load_scenario(EXAMPLES / "descheduler-low-node-utilization.yaml")
    # the first is the run the test above read (made once, tests.sim.scenario.shared_runs),
    # the second a fresh one
    first, _ = await shared_run(_run, scenario)
    second, _ = await _run(scenario)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


@pytest.mark.parametrize(
    ("example", "evictions"),
    [
        ("descheduler-low-node-utilization.yaml", 2),
        ("descheduler-node-taint.yaml", 2),
        ("descheduler-dry-run.yaml", 0),
    ],
)
def test_kubescale_simulate_runs_the_example(
    example: str, evictions: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_file = tmp_path / "report.json"
    argv = ["simulate", str(EXAMPLES / example), "--quiet", "--report-json", str(report_file)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Scenario '{example.removesuffix('.yaml')}', seed ")
    assert f" {evictions} evictions," in out
    report = json.loads(report_file.read_text())
    assert len(_events(report, "descheduler-eviction")) == evictions
    assert report["cluster"]["evictions"] == evictions
    if example == "descheduler-dry-run.yaml":
        assert len(_events(report, "descheduler-dry-run")) == 4


async def test_interval_zero_runs_one_cycle_only() -> None:
    # upstream's run-once (a Job): with --descheduling-interval 0 the one cycle runs at t = 0,
    # when hot-0 is the only node (the cache nodes come at 1m), so it is skipped (≤ 1 node) —
    # and no later iteration runs another cycle, though hot-0 is over-utilized from 1m on
    scenario = load_scenario(EXAMPLES / "descheduler-low-node-utilization.yaml")
    flags = {**scenario.kubescale["descheduler"], "descheduling-interval": "0"}
    document = {**scenario.kubescale, "descheduler": flags}
    report, placement = await _run(replace(scenario, kubescale=document))
    skipped = _events(report, "descheduler-skipped")
    assert [e["time"] for e in skipped] == [0.0]
    assert _events(report, "descheduler-eviction") == []
    assert placement["web"] == {"hot-0": 6}
