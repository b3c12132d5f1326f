"""A cluster built from a usage trace (issue 30): the rules that turn a trace of replay protocol
v1 into workloads, VPAs, HPAs and a node group, the replica-scaled replay, each bad input as one
line naming the file and line, and ``kubescale simulate --trace`` end to end."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.cli.main import main
from kubescale.sim.cluster.trace_replay import load_trace
from kubescale.sim.scenario.scenario_format import ScenarioError
from kubescale.sim.scenario.scenario_validation import load_scenario
from kubescale.sim.scenario.trace_cluster import _Pod, expand_trace, pack_nodes
from kubescale.sim.scenario.usage_specs import build_usage_model, load_traces

ROOT = Path(__file__).resolve().parents[3]
T0 = 1372636800  # 2013-07-01T00:00:00Z
GI = 1 << 30
HEADER = (
    "timestamp,workload,container,cpu_cores,memory_bytes,"
    "cpu_provisioned_cores,memory_provisioned_bytes\n"
)
# three workloads, 5-minute samples; db has two containers, batch's CPU rounds up to 3001m
TRACE = HEADER + "".join(
    f"{T0 + 300 * i},{w},{c},{cpu},{mem},{pcpu},{pmem}\n"
    for w, c, pcpu, pmem, cpus in (
        ("web", "main", 0.5, GI, (0.2, 0.3, 0.25)),
        ("db", "main", 1.5, 3 * GI, (1.0, 1.1, 1.2)),
        ("db", "sidecar", 0.25, GI // 2, (0.01, 0.01, 0.01)),
        ("batch", "main", 3.0001, 2 * GI, (2.0, 2.5, 2.9)),
    )
    for i, cpu in enumerate(cpus)
    for mem in (300_000_000,)
)
REPLICAS = f"timestamp,workload,replicas\n{T0},web,3\n{T0 + 300},web,5\n{T0 + 600},web,2\n"
NODE_GROUP = {"instanceType": "m5.xlarge", "allocatable": {"cpu": "4", "memory": "8Gi"}}


def _write(tmp_path: Path, trace: str = TRACE, replicas: str | None = REPLICAS) -> Path:
    (tmp_path / "usage.csv").write_text(trace)
    section: dict[str, Any] = {"file": "usage.csv", "nodeGroup": dict(NODE_GROUP)}
    if replicas is not None:
        (tmp_path / "replicas.csv").write_text(replicas)
        section["replicas"] = "replicas.csv"
    scenario = tmp_path / "cluster.yaml"
    scenario.write_text(yaml.safe_dump({"name": "from-trace", "trace": section}))
    return scenario


def _problems(scenario: Path) -> tuple[str, ...]:
    with pytest.raises(ScenarioError) as caught:
        load_scenario(scenario)
    return caught.value.problems


def _section(tmp_path: Path, **changes: Any) -> Path:
    scenario = _write(tmp_path)
    document = yaml.safe_load(scenario.read_text())
    document["trace"].update(changes)
    scenario.write_text(yaml.safe_dump(document))
    return scenario


# ------------------------------------------------------------------------------------ rules


def test_the_trace_becomes_workloads_autoscalers_and_a_node_group(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path))
    by_name = {w.name: w for w in scenario.workloads}
    assert sorted(by_name) == ["batch", "db", "web"]
    # requests = limits = the first provisioned amounts (protocol v1 step 1), rounded up to the
    # millicore: 3.0001 cores -> 3001m; 0.5 GiB -> 512Mi
    sizes = {
        (w.name, c.name): (c.requests.as_dict(), c.limits.as_dict())
        for w in scenario.workloads
        for c in w.containers
    }
    assert sizes == {
        ("batch", "main"): ({"cpu": "3001m", "memory": "2Gi"},) * 2,
        ("db", "main"): ({"cpu": "1500m", "memory": "3Gi"},) * 2,
        ("db", "sidecar"): ({"cpu": "250m", "memory": "512Mi"},) * 2,
        ("web", "main"): ({"cpu": "500m", "memory": "1Gi"},) * 2,
    }
    # web is in the replica series: it starts at its first count (3); the others run one
    assert {w.name: (w.kind, w.replicas) for w in scenario.workloads} == {
        "batch": ("Deployment", 1),
        "db": ("Deployment", 1),
        "web": ("Deployment", 3),
    }
    vpas = [o for o in scenario.objects if o["kind"] == "VerticalPodAutoscaler"]
    assert sorted(v["metadata"]["name"] for v in vpas) == ["batch", "db", "web"]
    assert all(v["spec"]["updatePolicy"] == {"updateMode": "Auto", "minReplicas": 1} for v in vpas)
    (hpa,) = [o for o in scenario.objects if o["kind"] == "HorizontalPodAutoscaler"]
    # between the fewest (2) and the most (5) replicas recorded, upstream's default 80 % CPU
    assert hpa["metadata"]["name"] == "web"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80
    # initial pods on 4-core / 8 GiB nodes, first-fit-decreasing by the larger share of a node:
    # batch 3001m (0.75) -> node 1 (999m, 6Gi left); db 1750m/3.5Gi (0.4375) -> node 2 (2250m,
    # 4.5Gi left); web 500m/1Gi x3: node 1 (499m left), then node 2 twice (1250m left): 2 nodes
    (group,) = scenario.node_groups
    assert (group.replicas, group.min_size, group.max_size) == (2, 0, 4)  # max: twice that
    assert group.instance_type == "m5.xlarge"
    assert group.allocatable.as_dict() == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    # the run: from the first sample, at the 300 s sampling period, to the last sample + a step
    assert scenario.start.isoformat() == "2013-07-01T00:00:00+00:00"
    assert (scenario.step, scenario.duration, scenario.compare) == (300.0, 900.0, True)
    assert set(scenario.kubescale) == {
        "webhook",
        "vpa-recommender",
        "vpa-updater",
        "cluster-autoscaler",
        "hpa-controller",
    }


def test_without_a_replica_series_no_hpa_and_no_hpa_controller(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path, replicas=None))
    assert [o["kind"] for o in scenario.objects] == ["VerticalPodAutoscaler"] * 3
    assert "hpa-controller" not in scenario.kubescale
    assert all(w.replicas == 1 for w in scenario.workloads)
    # 1 + 1 + 1 pods: batch (3001m) and db (1750m) cannot share a 4-core node: 2 nodes
    assert scenario.node_groups[0].replicas == 2


def test_the_section_overrides_the_rules(tmp_path: Path) -> None:
    scenario = load_scenario(
        _section(
            tmp_path,
            namespace="replay",
            kind="StatefulSet",
            workloads=["web", "db"],
            vpa={"mode": "Initial", "minReplicas": 2},
            hpa={"targetCPUUtilization": 60, "maxReplicas": 8},
        )
    )
    assert [(w.kind, w.name, w.namespace) for w in scenario.workloads] == [
        ("StatefulSet", "db", "replay"),
        ("StatefulSet", "web", "replay"),
    ]
    assert scenario.namespaces == ("replay",)
    vpa = next(o for o in scenario.objects if o["kind"] == "VerticalPodAutoscaler")
    assert vpa["spec"]["updatePolicy"] == {"updateMode": "Initial", "minReplicas": 2}
    hpa = next(o for o in scenario.objects if o["kind"] == "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    other = tmp_path / "no-vpa"
    other.mkdir()
    no_vpa = load_scenario(_section(other, vpa=False))
    assert [o["kind"] for o in no_vpa.objects] == ["HorizontalPodAutoscaler"]


def test_defaults_size_a_trace_without_provisioned_columns(tmp_path: Path) -> None:
    bare = "timestamp,workload,container,cpu_cores,memory_bytes\n" + "".join(
        f"{T0 + 300 * i},svc,main,0.1,1000000\n" for i in range(3)
    )
    (tmp_path / "usage.csv").write_text(bare)
    document = {
        "name": "bare",
        "trace": {
            "file": "usage.csv",
            "nodeGroup": NODE_GROUP,
            "defaults": {"requests": {"cpu": "200m", "memory": "256Mi"}},
        },
    }
    expanded = expand_trace(document, base_dir=tmp_path)
    (workload,) = expanded["workloads"]
    container = workload["containers"][0]
    assert container["requests"] == container["limits"] == {"cpu": "200m", "memory": "256Mi"}
    assert expanded["nodeGroups"][0]["replicas"] == 1


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        # 3 x 2100m on 4000m nodes: the sum (6300m) fits in 2, but no two share a node: 3
        ([(2100, 1), (2100, 1), (2100, 1)], 3),
        # 3000m + 1000m fill a node exactly; 2000m + 2000m the next: 2 (decreasing order)
        ([(1000, 1), (2000, 1), (3000, 1), (2000, 1)], 2),
        # memory decides: 3 x 5 GiB on 8 GiB nodes: 3
        ([(100, 5 * GI), (100, 5 * GI), (100, 5 * GI)], 3),
        ([], 0),
    ],
)
def test_first_fit_decreasing_packing(pods: list[tuple[int, int]], expected: int) -> None:
    listed = [_Pod(f"p{i}", cpu, memory) for i, (cpu, memory) in enumerate(pods)]
    assert pack_nodes(listed, millicores=4000, memory=8 * GI, pods_per_node=110) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4000), st.integers(1, 8 * GI)), max_size=40),
    st.integers(1, 5),
)
def test_packing_is_between_the_lower_bounds_and_one_node_per_pod(
    pods: list[tuple[int, int]], per_node: int
) -> None:
    listed = [_Pod(f"p{i}", cpu, memory) for i, (cpu, memory) in enumerate(pods)]
    nodes = pack_nodes(listed, millicores=4000, memory=8 * GI, pods_per_node=per_node)
    lower = max(
        math.ceil(sum(c for c, _ in pods) / 4000),
        math.ceil(sum(m for _, m in pods) / (8 * GI)),
        math.ceil(len(pods) / per_node),
    )
    assert lower <= nodes <= len(pods)


def test_a_replica_series_scales_the_replayed_usage(tmp_path: Path) -> None:
    _write(tmp_path)
    expanded = expand_trace(
        yaml.safe_load((tmp_path / "cluster.yaml").read_text()), base_dir=tmp_path
    )
    scenario = load_scenario(tmp_path / "cluster.yaml")
    web = next(w for w in scenario.workloads if w.name == "web")
    spec = web.containers[0].usage
    assert spec.shared
    assert spec.params["replicas"] == str((tmp_path / "replicas.csv").resolve())
    assert next(w for w in expanded["workloads"] if w["name"] == "web")["containers"][0]["usage"][
        "shared"
    ]
    model = build_usage_model(spec, traces=load_traces([spec]))
    # t = 300 s: one replica used 0.3 cores while 5 ran: 1.5 cores in all, over 3 running pods
    usage = model.usage(t=300.0, pod_index=0, replicas=3, since_start=300.0)
    assert usage.cpu_cores == pytest.approx(0.3 * 5 / 3)
    assert usage.memory_bytes == pytest.approx(300_000_000 * 5 / 3)
    # t = 600 s: 0.25 x 2 recorded replicas, over 2 running pods: 0.25 each
    assert model.usage(t=600.0, pod_index=0, replicas=2, since_start=0.0).cpu_cores == 0.25
    plain = load_trace(tmp_path / "usage.csv", workloads={"web"})
    assert plain.replicas == {}


# -------------------------------------------------------------------------------- bad input


def test_a_missing_column_names_the_file_and_header_line(tmp_path: Path) -> None:
    broken = TRACE.replace(",memory_bytes,", ",mem,", 1)
    scenario = _write(tmp_path, trace=broken)
    assert _problems(scenario) == (
        f"trace: {tmp_path / 'usage.csv'}:1: missing column(s) memory_bytes "
        "(want timestamp, workload, container, cpu_cores, memory_bytes)",
    )


def test_unsorted_rows_name_the_line(tmp_path: Path) -> None:
    lines = TRACE.splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]  # web's second sample before its first
    scenario = _write(tmp_path, trace="".join(lines))
    assert _problems(scenario) == (
        f"trace: {tmp_path / 'usage.csv'}:3: timestamp {T0} of web/main is not after its "
        "previous sample (line 2): rows must be in time order",
    )


def test_negative_usage_names_the_line(tmp_path: Path) -> None:
    lines = TRACE.splitlines(keepends=True)
    lines[5] = lines[5].replace(",1.1,", ",-1.1,")  # db/main's second sample (line 6)
    scenario = _write(tmp_path, trace="".join(lines))
    assert _problems(scenario) == (
        f"trace: {tmp_path / 'usage.csv'}:6: cpu_cores -1.1 is negative",
    )


def test_a_number_that_is_not_one_names_the_line(tmp_path: Path) -> None:
    lines = TRACE.splitlines(keepends=True)
    lines[2] = lines[2].replace(",300000000,", ",lots,")
    scenario = _write(tmp_path, trace="".join(lines))
    assert _problems(scenario) == (
        f"trace: {tmp_path / 'usage.csv'}:3: memory_bytes 'lots' is not a number",
    )


def test_an_unknown_workload_in_the_replica_series_names_the_line(tmp_path: Path) -> None:
    scenario = _write(tmp_path, replicas=REPLICAS + f"{T0 + 900},api,4\n")
    assert _problems(scenario) == (
        f"trace: {tmp_path / 'replicas.csv'}:5: workload 'api' is not in "
        f"{(tmp_path / 'usage.csv').resolve()}",
    )


def test_replica_series_rows_out_of_order_or_not_counts(tmp_path: Path) -> None:
    unsorted = f"timestamp,workload,replicas\n{T0 + 300},web,3\n{T0},web,5\n"
    assert _problems(_write(tmp_path, replicas=unsorted)) == (
        f"trace: {tmp_path / 'replicas.csv'}:3: timestamp {T0} of web is not after its previous "
        "entry (line 2): rows must be in time order",
    )
    fractional = f"timestamp,workload,replicas\n{T0},web,2.5\n"
    assert _problems(_write(tmp_path, replicas=fractional)) == (
        f"trace: {tmp_path / 'replicas.csv'}:2: replicas '2.5' is not an integer ≥ 0",
    )


def test_no_provisioned_amounts_and_no_defaults(tmp_path: Path) -> None:
    bare = "timestamp,workload,container,cpu_cores,memory_bytes\n" + f"{T0},svc,main,0.1,1\n"
    scenario = _write(tmp_path, trace=bare, replicas=None)
    assert _problems(scenario) == (
        "trace.defaults.requests: required: "
        f"{(tmp_path / 'usage.csv').resolve()} has no provisioned CPU and memory (> 0) for "
        "svc/main",
    )


def test_a_pod_larger_than_a_node_names_the_workload(tmp_path: Path) -> None:
    scenario = _section(
        tmp_path, nodeGroup={"instanceType": "small", "allocatable": {"cpu": "2", "memory": "8Gi"}}
    )
    assert _problems(scenario) == (
        "trace.nodeGroup.allocatable: a pod of batch asks {'cpu': '3001m', 'memory': '2Gi'}, "
        "more than a node holds ({'cpu': '2', 'memory': '8Gi'})",
    )


def test_section_fields_are_checked_together(tmp_path: Path) -> None:
    scenario = _section(tmp_path, kind="Job", workloads=["nope"], flavour=1)
    assert _problems(scenario) == (
        'trace.flavour: unknown field "flavour" (want one of: file, replicas, namespace, kind, '
        "workloads, limit, defaults, vpa, hpa, nodeGroup)",
        'trace.kind: unknown workload kind "Job" (want one of: Deployment, StatefulSet)',
    )


# ------------------------------------------------------------------------------------ CLI


def _simulate(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "kubescale", "simulate", "--quiet", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_one_line_form_runs_the_three_way_comparison(tmp_path: Path) -> None:
    _write(tmp_path)
    html, report = tmp_path / "r.html", tmp_path / "r.json"
    done = _simulate(
        "--trace", "usage.csv", "--trace-replicas", "replicas.csv",
        "--node-group", "instanceType=m5.xlarge,cpu=4,memory=8Gi,price=0.192",
        "--report-html", str(html), "--report-json", str(report), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("Scenario 'trace usage.csv', seed 1: 15m from 2013-07-01T00:00:00")
    assert "SAME SEED, THREE WAYS" in out
    for workload in ("default/batch", "default/db", "default/web"):
        assert workload in out
    assert "<h2>Comparison</h2>" in html.read_text()
    assert report.is_file()


def _simulate_here(*argv: str) -> int:
    """``kubescale simulate --quiet ARGV`` in this process (``python -m kubescale`` is
    ``sys.exit(main())``): its exit code, from ``main``'s return or argparse's exit. The bad
    input tests need no process of their own (a child costs an interpreter start and the whole
    simulator's imports); the end-to-end run above keeps its subprocess (issue 32.7)."""
    try:
        return main(["simulate", "--quiet", *argv])
    except SystemExit as exit_:
        code = exit_.code
    assert isinstance(code, int)
    return code


def test_bad_input_on_the_command_line_is_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, trace=TRACE.replace(",0.3,", ",-0.3,"))
    monkeypatch.chdir(tmp_path)
    html = tmp_path / "r.html"
    returncode = _simulate_here(
        "--trace", "usage.csv", "--node-group", "instanceType=m5.xlarge,cpu=4,memory=8Gi",
        "--report-html", str(html),
    )  # fmt: skip
    assert returncode == 2
    assert capsys.readouterr().err == (
        f"kubescale simulate: usage.csv: trace: {(tmp_path / 'usage.csv').resolve()}:3: "
        "cpu_cores -0.3 is negative\n"
    )
    assert not html.exists()
    returncode = _simulate_here("--trace", "usage.csv", "--node-group", "cpu=4,gpus=1")
    assert returncode == 2
    assert capsys.readouterr().err == (
        "kubescale simulate: error: --node-group: 'gpus=1' is not KEY=VALUE with KEY one of "
        "instanceType, cpu, memory, price, min, max, pods\n"
    )
