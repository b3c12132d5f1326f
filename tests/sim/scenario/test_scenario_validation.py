"""Scenario validation: each bad field is reported with its path and a message saying what is
wanted, every problem of a document at once; a valid document becomes typed values."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.sim.scenario.scenario_format import (
    Amount,
    ApplyEvent,
    DeleteEvent,
    FaultEvent,
    ResourceList,
    ScenarioError,
    SetLoadEvent,
)
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario
from tests.conftest import component_names

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"


def valid() -> dict[str, Any]:
    return {
        "name": "table",
        "seed": 7,
        "duration": "2h",
        "step": "1m",
        "namespaces": ["shop"],
        "nodes": [
            {
                "name": "node-a",
                "allocatable": {"cpu": 4, "memory": "16Gi"},
                "labels": {"zone": "a"},
                "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
                "pricePerHour": 0.2,
            }
        ],
        "nodeGroups": [
            {
                "name": "pool",
                "min": 0,
                "max": 3,
                "replicas": 1,
                "template": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": 50}},
                "pricePerHour": 0.4,
                "provisioningDelay": "3m",
            }
        ],
        "workloads": [
            {
                "kind": "Deployment",
                "name": "web",
                "namespace": "shop",
                "replicas": 2,
                "containers": [
                    {
                        "name": "app",
                        "requests": {"cpu": "250m", "memory": "256Mi"},
                        "limits": {"memory": "512Mi"},
                        "usage": {
                            "type": "diurnal",
                            "mean": {"cpu": "200m", "memory": "200Mi"},
                            "amplitude": {"cpu": "100m"},
                        },
                    }
                ],
            },
            {
                "kind": "Job",
                "name": "batch",
                "parallelism": 2,
                "completions": 4,
                "duration": "20m",
                "containers": [{"name": "work", "usage": {"type": "constant", "cpu": 1}}],
            },
        ],
        "objects": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}},
        ],
        "events": [
            {
                "at": "1h",
                "action": "setLoad",
                "workload": "web",
                "container": "app",
                "usage": {"type": "constant", "cpu": "1", "memory": "300Mi"},
            },
            {"at": "30m", "action": "fault", "fault": "apiError", "verb": "list",
             "resource": "pods", "status": 503, "count": 2},
            {"at": "90m", "action": "delete", "apiVersion": "apps/v1", "kind": "Deployment",
             "name": "web", "namespace": "shop"},
            {"at": "10m", "action": "apply", "object": {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}}},
        ],
        "extenders": [
            {"urlPrefix": "https://127.0.0.1:9443", "filterVerb": "filter",
             "prioritizeVerb": "prioritize", "weight": 2, "httpTimeout": "5s"}
        ],
    }  # fmt: skip


def test_a_valid_document_becomes_typed_values() -> None:
    scenario = parse_scenario(valid(), base_dir=Path())
    assert (scenario.name, scenario.seed, scenario.duration, scenario.step) == (
        "table", 7, 7200.0, 60.0,
    )  # fmt: skip
    assert scenario.steps == 120
    node = scenario.nodes[0]
    assert node.allocatable == ResourceList(cpu="4", memory="16Gi", pods="110")  # kubelet default
    assert node.taints == ({"key": "dedicated", "value": "db", "effect": "NoSchedule"},)
    group = scenario.node_groups[0]
    assert (group.min_size, group.max_size, group.replicas, group.provisioning_delay) == (
        0, 3, 1, 180.0,
    )  # fmt: skip
    assert group.allocatable.pods == "50"
    web, batch = scenario.workloads
    assert web.containers[0].requests == ResourceList(cpu="250m", memory="256Mi")
    assert web.containers[0].usage.params["amplitude"] == Amount(cpu_cores=0.1, memory_bytes=0.0)
    assert web.containers[0].usage.params["period"] == 86400.0  # the default: one day
    assert (batch.namespace, batch.replicas, batch.completions, batch.run_duration) == (
        "default", 2, 4, 1200.0,
    )  # fmt: skip
    assert scenario.objects[0]["metadata"]["namespace"] == "default"  # as kubectl does
    # events come sorted by time
    assert [type(e) for e in scenario.events] == [ApplyEvent, FaultEvent, SetLoadEvent, DeleteEvent]
    assert [e.at for e in scenario.events] == [600.0, 1800.0, 3600.0, 5400.0]
    fault = scenario.events[1]
    assert isinstance(fault, FaultEvent)
    assert (fault.verb, fault.resource, fault.status, fault.count) == ("list", "pods", 503, 2)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting ``value`` at a dotted path (integers index lists)."""

    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        del target[last]

    return mutate


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("unknown top-level field", _set("replicas", 3),
     'replicas: unknown field "replicas" (want one of: name, seed, start, duration, step, nodes, '
     "nodeGroups, namespaces, workloads, objects, kubescale, events, extenders, compare, "
     "coordination, trace)"),
    ("missing name", _drop("name"), "name: required"),
    ("duration not a Go duration", _set("duration", "2 hours"),
     "duration: invalid duration '2 hours' (want e.g. 10s, 1m30s, 500ms)"),
    ("duration a bare number", _set("duration", 7200),
     'duration: want a duration string like "1m" or "24h", got number'),
    ("zero step", _set("step", "0s"), "step: must be > 0, got '0s'"),
    ("step longer than duration", _set("step", "3h"),
     "step: 10800s is longer than the duration (7200s)"),
    ("negative seed", _set("seed", -1), "seed: must be at least 0, got -1"),
    ("bad start", _set("start", "tomorrow"),
     "start: want an RFC 3339 time like \"2026-01-01T00:00:00Z\", got 'tomorrow'"),
    ("unknown usage model", _set("workloads.0.containers.0.usage.type", "sine"),
     'workloads[0].containers[0].usage.type: unknown usage model "sine" (want one of: '
     "constant, diurnal, step, randomWalk, bursts, linear, replay)"),
    ("usage parameter of another model", _set("workloads.0.containers.0.usage.volatility", {}),
     'workloads[0].containers[0].usage.volatility: unknown field "volatility" (want one of: '
     "type, shared, mean, amplitude, period, phase)"),
    ("missing usage parameter", _drop("workloads.0.containers.0.usage.mean"),
     "workloads[0].containers[0].usage.mean: required"),
    ("zero diurnal period", _set("workloads.0.containers.0.usage.period", "0s"),
     "workloads[0].containers[0].usage.period: must be > 0, got '0s'"),
    ("bad quantity", _set("workloads.0.containers.0.requests.cpu", "lots"),
     "workloads[0].containers[0].requests.cpu: invalid quantity 'lots': quantities must match "
     "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("negative quantity", _set("workloads.0.containers.0.requests.memory", "-1Gi"),
     "workloads[0].containers[0].requests.memory: must not be negative, got '-1Gi'"),
    ("request above limit", _set("workloads.0.containers.0.requests.memory", "1Gi"),
     "workloads[0].containers[0].requests.memory: must be less than or equal to memory limit "
     "of 512Mi"),
    ("unknown resource", _set("workloads.0.containers.0.requests.gpu", 1),
     'workloads[0].containers[0].requests.gpu: unknown field "gpu" (want one of: cpu, memory)'),
    ("unknown workload kind", _set("workloads.0.kind", "ReplicationController"),
     'workloads[0].kind: unknown workload kind "ReplicationController" (want one of: '
     "Deployment, StatefulSet, DaemonSet, Job)"),
    ("replicas on a Job", _set("workloads.1.replicas", 3),
     'workloads[1].replicas: unknown field "replicas" (want one of: kind, name, namespace, '
     "labels, podSpec, containers, parallelism, completions, backoffLimit, duration)"),
    ("Job without duration", _drop("workloads.1.duration"),
     "workloads[1].duration: required (how long each pod of the Job runs)"),
    ("undeclared namespace", _set("workloads.0.namespace", "nowhere"),
     "workloads[0].namespace: namespace 'nowhere' is not in namespaces"),
    ("duplicate workload name", _set("workloads.1.name", "web"),
     "workloads: workload name 'web' is used twice"),
    ("no containers", _set("workloads.0.containers", []),
     "workloads[0].containers: a pod needs at least one container"),
    ("bad label value", _set("nodes.0.labels", {"zone": "a b"}),
     "nodes[0].labels.zone: value: a valid label must be an empty string or consist of "
     "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
     "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
     "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ("bad taint effect", _set("nodes.0.taints.0.effect", "NoRun"),
     'nodes[0].taints[0].effect: unknown taint effect "NoRun" (want one of: NoSchedule, '
     "PreferNoSchedule, NoExecute)"),
    ("node without allocatable memory", _drop("nodes.0.allocatable.memory"),
     "nodes[0].allocatable.memory: required"),
    ("node group min above max", _set("nodeGroups.0.min", 5),
     "nodeGroups[0].min: min (5) is greater than max (3)"),
    ("node group replicas outside bounds", _set("nodeGroups.0.replicas", 4),
     "nodeGroups[0].replicas: 4 is outside [min, max] = [0, 3]"),
    ("node and group share a name", _set("nodeGroups.0.name", "node-a"),
     "nodes: node or node group name 'node-a' is used twice"),
    ("negative price", _set("nodes.0.pricePerHour", -1),
     "nodes[0].pricePerHour: must be a finite number ≥ 0, got -1"),
    ("kubescale component unknown", _set("kubescale", {"no-such-system": {}}),
     'kubescale.no-such-system: unknown kubescale component "no-such-system" '
     f"(want one of: {', '.join(sorted(component_names()))})"),
    ("object of an unserved kind", _set("objects.0.kind", "Widget"),
     'objects[0].kind: unknown kind "Widget" of apiVersion "v1" (not served by the simulated '
     "API server; a CustomResourceDefinition listed earlier in objects adds its kinds)"),
    ("object without a name", _set("objects.0.metadata", {}), "objects[0].metadata.name: required"),
    ("event after the end", _set("events.0.at", "3h"),
     "events[0].at: 10800s is not before the end of the run (7200s)"),
    ("unknown event action", _set("events.0.action", "scale"),
     'events[0].action: unknown event action "scale" (want one of: apply, delete, setLoad, '
     "setMetric, fault)"),
    ("load of an unknown container", _set("events.0.container", "sidecar"),
     "events[0]: workload 'web' has no container 'sidecar'"),
    ("unknown fault", _set("events.1.fault", "meteor"),
     'events[1].fault: unknown fault "meteor" (want one of: apiError, dropWatches, '
     "expireHistory, clear)"),
    ("fault status not an error", _set("events.1.status", 200),
     "events[1].status: want 0 (delay only) or 400-599, got 200"),
    ("fault verb unknown", _set("events.1.verb", "frobnicate"),
     'events[1].verb: unknown verb "frobnicate" (want one of: create, delete, deletecollection, '
     "get, list, patch, update, watch)"),
    ("delete of an unknown kind", _set("events.2.kind", "Gizmo"),
     'events[2].kind: unknown kind "Gizmo" of apiVersion "apps/v1"'),
    ("extender without a weight", _drop("extenders.0.weight"),
     "extenders[0].weight: must have a positive weight applied to it"),
    ("extender URL", _set("extenders.0.urlPrefix", "127.0.0.1:9443"),
     "extenders[0].urlPrefix: want an http:// or https:// URL, got '127.0.0.1:9443'"),
    ("extender timeout", _set("extenders.0.httpTimeout", "soon"),
     "extenders[0].httpTimeout: invalid duration 'soon' (want e.g. 10s, 1m30s, 500ms)"),
    ("replay file missing", _set("workloads.1.containers.0.usage",
                                 {"type": "replay", "file": "nope.csv", "workload": "vm-001"}),
     f"workloads[1].containers[0].usage.file: file 'nope.csv' not found (looked at "
     f"{Path('nope.csv')})"),
    ("random walk bounds inverted", _set("workloads.1.containers.0.usage",
                                         {"type": "randomWalk", "start": {"cpu": 1},
                                          "volatility": {"cpu": "100m"}, "min": {"cpu": 2},
                                          "max": {"cpu": 1}}),
     "workloads[1].containers[0].usage: maximum must not be below minimum"),
]  # fmt: skip


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_bad_field_is_named_with_what_is_wanted(
    mutate: Callable[[dict[str, Any]], None], expected: str
) -> None:
    document = copy.deepcopy(valid())
    mutate(document)
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document, base_dir=Path())
    assert expected in raised.value.problems, raised.value.problems


def test_every_problem_is_reported_at_once() -> None:
    document = valid()
    document["workloads"][0]["containers"][0]["usage"]["type"] = "sine"
    document["nodes"][0]["taints"][0]["effect"] = "Never"
    document["events"][1]["fault"] = "meteor"
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document, base_dir=Path())
    paths = [problem.split(":")[0] for problem in raised.value.problems]
    assert paths == [
        "nodes[0].taints[0].effect",
        "workloads[0].containers[0].usage.type",
        "events[1].fault",
    ]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([], "want a mapping, got list"),
        ({"duration": "1h"}, "name: required"),
    ],
)
def test_a_document_that_is_not_a_scenario(document: object, expected: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document, base_dir=Path())
    assert expected in raised.value.problems


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="is not valid YAML"):
        load_scenario(broken)


def test_replay_series_missing_from_the_trace_is_reported(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp,workload,container,cpu_cores,memory_bytes\n0,vm-1,main,0.5,1000\n")
    document = valid()
    document["workloads"][1]["containers"][0]["usage"] = {
        "type": "replay", "file": "trace.csv", "workload": "vm-1", "container": "sidecar",
    }  # fmt: skip
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document, base_dir=tmp_path)
    assert raised.value.problems == (
        "workloads[1].containers[0].usage: the trace has no samples for vm-1/sidecar",
    )


@pytest.mark.parametrize(
    "example", sorted(p.name for p in EXAMPLES.glob("*.yaml")) or ["(none yet)"]
)
def test_shipped_examples_are_valid(example: str) -> None:
    scenario = load_scenario(EXAMPLES / example)
    assert scenario.workloads
    assert scenario.duration >= scenario.step


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True)
    | st.text(max_size=8) | st.sampled_from(["1m", "2h", "100m", "1Gi", "constant", "apply"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip


def _field_paths(value: Any, prefix: str = "") -> list[str]:
    """Every dotted path of a document (list indexes as numbers)."""
    paths = [prefix] if prefix else []
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = [(str(i), item) for i, item in enumerate(value)]
    for key, item in items:
        paths += _field_paths(item, f"{prefix}.{key}" if prefix else key)
    return paths


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_value_anywhere_is_either_valid_or_a_scenario_error(data: st.DataObject) -> None:
    """Validation never fails with anything but a list of problems, whatever a field holds."""
    document = valid()
    path = data.draw(st.sampled_from(_field_paths(document)))
    _set(path, data.draw(_JSON_VALUES))(document)
    problems: tuple[str, ...] = ()
    try:
        parse_scenario(document, base_dir=Path())
    except ScenarioError as exc:
        problems = exc.problems
        assert problems, "a ScenarioError always says what is wrong"
    assert all(problem.strip() for problem in problems)


def test_compare_is_a_boolean() -> None:
    document = yaml.safe_load("name: c\nduration: 1h\ncompare: yes please\n")
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(document, base_dir=Path())
    assert list(caught.value.problems) == ["compare: want true or false, got string"]
    assert parse_scenario({"name": "c", "duration": "1h"}, base_dir=Path()).compare is False
