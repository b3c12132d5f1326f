"""The scenario runner: determinism, timed events at their time, faults a client can observe,
and kubescale loops run at their interval through a real ``kubernetes.aio`` KubeClient."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import CONFIG_MAPS, DEPLOYMENTS, MACHINE_DEPLOYMENTS, NODES, PODS
from kubescale.runtime.component import BaseComponent, Component, LoopSpec, Runtime
from kubescale.sim.scenario.json_report import dumps_report
from kubescale.sim.scenario.runner import (
    _INFORMER_TASK,
    SimulationError,
    SimulationRun,
    run_scenario,
)
from kubescale.sim.scenario.scenario_format import Scenario
from kubescale.sim.scenario.scenario_validation import load_scenario, parse_scenario

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"


def _container(usage: dict[str, Any], **resources: Any) -> dict[str, Any]:
    return {
        "name": "app",
        "requests": resources.get("requests", {"cpu": "100m", "memory": "64Mi"}),
        "usage": usage,
    }


def scenario(**overrides: Any) -> Scenario:
    document: dict[str, Any] = {
        "name": "runner-test",
        "seed": 5,
        "duration": "1h",
        "step": "1m",
        "nodes": [{"name": "node", "count": 2, "allocatable": {"cpu": "4", "memory": "8Gi"},
                   "pricePerHour": 0.1}],
        "workloads": [
            {"kind": "Deployment", "name": "web", "replicas": 2,
             "containers": [_container({"type": "constant", "cpu": "100m", "memory": "50Mi"})]},
        ],
    }  # fmt: skip
    document.update(overrides)
    return parse_scenario(document, base_dir=Path())


def _container_series(report: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    return [c for c in report["containers"] if c["workload"] == workload]


# ----------------------------------------------------------------------------- determinism

RANDOM_WORKLOADS = [
    {"kind": "Deployment", "name": "walker", "replicas": 3,
     "containers": [_container({"type": "randomWalk", "start": {"cpu": "500m", "memory": "200Mi"},
                                "volatility": {"cpu": "100m", "memory": "20Mi"}})]},
    {"kind": "Deployment", "name": "bursty", "replicas": 2,
     "containers": [_container({"type": "bursts", "base": {"cpu": "100m"},
                                "burst": {"cpu": "900m"}, "probability": 0.2})]},
]  # fmt: skip


async def test_the_same_seed_gives_a_byte_identical_report() -> None:
    first = dumps_report(await run_scenario(scenario(workloads=RANDOM_WORKLOADS)))
    second = dumps_report(await run_scenario(scenario(workloads=RANDOM_WORKLOADS)))
    assert first == second
    assert '"walker"' in first


async def test_another_seed_gives_another_report_when_models_are_random() -> None:
    base = await run_scenario(scenario(workloads=RANDOM_WORKLOADS))
    other = await run_scenario(scenario(workloads=RANDOM_WORKLOADS, seed=6))
    usage = [c["cpu_usage"] for c in _container_series(base, "walker")]
    other_usage = [c["cpu_usage"] for c in _container_series(other, "walker")]
    assert usage != other_usage
    pods = sorted(c["pod"] for c in base["containers"])
    other_pods = sorted(c["pod"] for c in other["containers"])
    assert pods != other_pods  # generated name suffixes come from the seed too


# --------------------------------------------------------------------------- timed events


async def test_a_load_change_applies_at_its_time() -> None:
    run_scenario_ = scenario(
        events=[{"at": "30m", "action": "setLoad", "workload": "web", "container": "app",
                 "usage": {"type": "constant", "cpu": "700m", "memory": "50Mi"}}],
    )  # fmt: skip
    report = await run_scenario(run_scenario_)
    for series in _container_series(report, "web"):
        by_time = dict(zip(series["t"], series["cpu_usage"], strict=True))
        assert by_time[1740.0] == pytest.approx(0.1)
        assert by_time[1800.0] == pytest.approx(0.7)
        assert by_time[3540.0] == pytest.approx(0.7)
    [event] = [e for e in report["events"] if e["kind"] == "set-load"]
    assert (event["time"], event["subject"]) == (1800.0, "web/app")


async def test_apply_scales_a_deployment_at_its_time() -> None:
    scaled = scenario(
        events=[{"at": "10m", "action": "apply", "object": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 4}}}],
    )  # fmt: skip
    async with SimulationRun(scaled) as run:
        counts: dict[float, int] = {}
        while run.elapsed < 900:
            t = run.elapsed
            await run.step()
            counts[t] = len(run.api.store.snapshots(PODS))
    assert counts[540.0] == 2
    assert counts[600.0] == 4
    deployment = run.api.store.get(DEPLOYMENTS, "web", "default")
    # kubectl-apply semantics: the fields the manifest left out are kept
    assert deployment["spec"]["template"]["spec"]["containers"][0]["name"] == "app"


async def test_a_node_group_scaled_by_an_event_adds_a_node_after_its_delay() -> None:
    grown = scenario(
        nodeGroups=[{"name": "pool", "min": 0, "max": 2, "replicas": 0, "pricePerHour": 1.5,
                     "provisioningDelay": "5m",
                     "template": {"allocatable": {"cpu": "8", "memory": "16Gi"}}}],
        events=[{"at": "10m", "action": "apply", "object": {
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": "pool"}, "spec": {"replicas": 1}}}],
    )  # fmt: skip
    async with SimulationRun(grown) as run:
        nodes: dict[float, int] = {}
        while not run.done:
            t = run.elapsed
            await run.step()
            nodes[t] = len(run.api.store.snapshots(NODES))
        group = run.api.store.get(MACHINE_DEPLOYMENTS, "pool", "default")
        report = run.report()
    assert group["spec"]["replicas"] == 1
    assert nodes[840.0] == 2  # 10m + 5m provisioning: not yet
    assert nodes[900.0] == 3
    added = [e for e in report["events"] if e["kind"] == "node-added" and e["time"] > 0]
    assert [e["time"] for e in added] == [900.0]
    # the new node is priced from its group: 45 minutes at 1.5/h on top of 2 × 1 h at 0.1/h
    assert report["cluster"]["cost"] == pytest.approx(2 * 0.1 + 0.75 * 1.5)


async def test_delete_removes_the_workload_and_its_pods() -> None:
    deleted = scenario(
        events=[{"at": "20m", "action": "delete", "apiVersion": "apps/v1",
                 "kind": "Deployment", "name": "web"}],
    )  # fmt: skip
    report = await run_scenario(deleted)
    for series in _container_series(report, "web"):
        running = dict(zip(series["t"], series["running"], strict=True))
        assert running[1140.0] == 1
        assert not any(flag for t, flag in running.items() if t >= 1260.0)
    [event] = [e for e in report["events"] if e["kind"] == "delete"]
    assert (event["time"], event["subject"]) == (1200.0, "default/Deployment/web")


# ----------------------------------------------------------------------------------- loops


@dataclass
class PodCounter:
    """A test loop: lists pods through the real client, remembers what it saw and when."""

    client: KubeClient
    name: str = "pod-counter"
    seen: list[tuple[datetime, int]] = field(default_factory=list)
    errors: list[tuple[datetime, int]] = field(default_factory=list)

    async def run_once(self, now: datetime) -> None:
        try:
            listed = await self.client.list(PODS, namespace="default")
        except KubeApiError as exc:
            self.errors.append((now, exc.code))
            raise
        self.seen.append((now, len(listed["items"])))


class _CounterComponent(BaseComponent):
    """A test component whose one loop is a :class:`PodCounter`."""

    name = "pod-counter"

    def __init__(self, runtime: Runtime, interval: float, built: list[PodCounter]) -> None:
        self.counter = PodCounter(runtime.client)
        self.interval = interval
        built.append(self.counter)

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self.counter, interval=self.interval)]


def _counter_loop(interval: float, built: list[PodCounter]) -> Callable[[Runtime], Component]:
    return lambda runtime: _CounterComponent(runtime, interval, built)


async def test_a_loop_runs_at_its_interval_through_a_real_client() -> None:
    built: list[PodCounter] = []
    test_scenario = scenario(duration="10m")
    async with SimulationRun(test_scenario, extra_components=[_counter_loop(150.0, built)]) as run:
        await run.run()
        state = run.loops["pod-counter"]
        tokens = run.api.tokens
    [counter] = built
    # due at 0, then 150 s after each start, checked at 60 s steps: 0, 180, 360, 540
    assert state.started_at == [0.0, 180.0, 360.0, 540.0]
    assert (state.iterations, state.failures) == (4, 0)
    start = test_scenario.start
    assert [(now - start).total_seconds() for now, _ in counter.seen] == state.started_at
    # loops run after the actors of their step: the pods exist from the first step on
    assert [count for _, count in counter.seen] == [2, 2, 2, 2]
    assert tokens  # the requests really went over HTTP with the kubeconfig's token


@dataclass
class _Stamp:
    """A test loop writing or reading one ConfigMap's ``data.at`` (seconds since the start)."""

    client: KubeClient
    name: str
    start: datetime
    writes: bool
    ages: list[tuple[float, float | None]] = field(default_factory=list)
    """Reader: ``(t, seconds since the stamp was written)`` at each iteration."""

    async def run_once(self, now: datetime) -> None:
        t = (now - self.start).total_seconds()
        if self.writes:
            body = {"metadata": {"name": "stamp", "namespace": "default"}, "data": {"at": str(t)}}
            try:
                current = await self.client.get(CONFIG_MAPS, "stamp", namespace="default")
                await self.client.update(CONFIG_MAPS, {**current, "data": body["data"]})
            except KubeApiError:
                await self.client.create(CONFIG_MAPS, body)
            return
        try:
            stamp = await self.client.get(CONFIG_MAPS, "stamp", namespace="default")
        except KubeApiError:
            self.ages.append((t, None))
            return
        self.ages.append((t, t - float(stamp["data"]["at"])))


class _StampComponent(BaseComponent):
    def __init__(self, runtime: Runtime, stamp: _Stamp, interval: float) -> None:
        self.stamp = stamp
        self.interval = interval

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self.stamp, interval=self.interval)]


async def test_a_loop_shorter_than_the_step_runs_before_the_loops_due_at_the_step() -> None:
    """A 10 s loop's effect is read by a 60 s loop built before it, at 60 s steps: a real
    process would have run the 10 s loop five times between two steps and once more at the
    step, so the reader must see a stamp of this step (age 0), never one a step old. At t = 0
    both fall due together and run in build order: the stamp does not exist yet."""
    test = scenario(duration="5m")
    made: dict[str, _Stamp] = {}

    def build(name: str, *, writes: bool, interval: float) -> Callable[[Runtime], Component]:
        def component(runtime: Runtime) -> Component:
            made[name] = _Stamp(runtime.client, name, test.start, writes)
            return _StampComponent(runtime, made[name], interval)

        return component

    readers_first = [
        build("reader", writes=False, interval=60.0),
        build("writer", writes=True, interval=10.0),
    ]
    async with SimulationRun(test, extra_components=readers_first) as run:
        await run.run()
        writer_starts = run.loops["writer"].started_at
    assert made["reader"].ages == [(0.0, None), *((t, 0.0) for t in (60.0, 120.0, 180.0, 240.0))]
    assert writer_starts == [0.0, 60.0, 120.0, 180.0, 240.0]


async def test_an_injected_fault_is_observed_by_the_loop_and_the_run_goes_on() -> None:
    built: list[PodCounter] = []
    faulty = scenario(
        duration="30m",
        events=[
            {"at": "10m", "action": "fault", "fault": "apiError", "verb": "list",
             "resource": "pods", "status": 503, "count": 0},
            {"at": "20m", "action": "fault", "fault": "clear"},
        ],
    )  # fmt: skip
    async with SimulationRun(faulty, extra_components=[_counter_loop(300.0, built)]) as run:
        report = await run.run()
        state = run.loops["pod-counter"]
    [counter] = built
    start = faulty.start
    failed_at = [(now - start).total_seconds() for now, _ in counter.errors]
    assert failed_at == [600.0, 900.0]
    assert {code for _, code in counter.errors} == {503}
    assert [(now - start).total_seconds() for now, _ in counter.seen] == [0, 300, 1200, 1500]
    assert (state.iterations, state.failures) == (6, 2)
    faults = [(e["time"], e["detail"]) for e in report["events"] if e["kind"] == "fault"]
    assert faults == [(600.0, "list pods → 503 until cleared"), (1200.0, "faults cleared")]


# ------------------------------------------------------------------------------- refusals

_BAD_CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_A_Name"}}


async def test_an_event_the_api_server_refuses_is_reported_and_the_run_goes_on() -> None:
    refused = scenario(
        duration="5m", events=[{"at": "1m", "action": "apply", "object": _BAD_CONFIG_MAP}]
    )
    report = await run_scenario(refused)
    [event] = [e for e in report["events"] if e["kind"] == "apply"]
    assert event["subject"] == "default/ConfigMap/Not_A_Name"
    assert event["detail"].startswith('failed: ConfigMap "Not_A_Name" is invalid: metadata.name')
    assert report["times"][-1] == 240.0  # every step ran


async def test_an_object_refused_at_start_names_its_place_in_the_scenario() -> None:
    refused = scenario(objects=[_BAD_CONFIG_MAP])
    with pytest.raises(
        SimulationError, match=r"^objects\[0\]: cannot create ConfigMap Not_A_Name: "
    ):
        async with SimulationRun(refused):
            pass


@pytest.mark.parametrize("example", ["demo", "diurnal-web", "memory-leak-job", "csv-replay"])
async def test_each_shipped_example_runs(example: str) -> None:
    shortened = load_scenario(EXAMPLES / f"{example}.yaml").with_overrides(duration=7200.0)
    report = await run_scenario(shortened)
    running: dict[str, int] = {}
    for series in report["containers"]:
        running[series["workload"]] = running.get(series["workload"], 0) + sum(series["running"])
    # in the first two hours every workload runs, except the demo's analytics, which waits
    # for the node group scaled at 2h
    waiting = {"analytics"} if example == "demo" else set()
    assert {name for name, steps in running.items() if steps > 0} == {
        w.name for w in shortened.workloads
    } - waiting


async def _burst_report(*, slow_list: str | None) -> dict[str, Any]:
    shortened = load_scenario(EXAMPLES / "cluster-autoscaler-burst.yaml").with_overrides(
        duration=30.0
    )
    async with SimulationRun(shortened) as run:
        if slow_list is not None:
            # a server slower to answer this list than to run the event loop's next callbacks:
            # what uvloop's callback order did to the first list of the Cluster API informers
            run.api.faults.add(verb="list", resource=slow_list, status=0, delay=0.05)
        return await run.run()


@pytest.mark.parametrize("resource", ["machinedeployments", "machinesets", "machines"])
async def test_a_collection_declared_by_a_loop_is_synced_before_the_loop_decides(
    resource: str,
) -> None:
    """Issue 30: the cluster autoscaler declares the Cluster API informers at its first
    iteration and waits for them on the client's clock, whose sleeps take no simulated time; the
    report must not depend on whether their first list answers before the event loop's next
    callbacks (it did: a late answer made the first iteration stop at CloudProviderNotReady)."""
    plain = await _burst_report(slow_list=None)
    slow = await _burst_report(slow_list=resource)
    # the autoscaler writes its status ConfigMap at 0 s (its first iteration decided), 10 s, 20 s
    written = [
        entry["time"]
        for entry in slow["plans"]["entries"]
        if entry["actor"] == "cluster-autoscaler" and entry["intent"] == "WriteConfigMap"
    ]
    assert written[0] == 0.0
    assert slow["plans"] == plain["plans"]
    assert dumps_report(slow) == dumps_report(plain)


async def test_the_informer_tasks_are_named_as_the_wait_hook_expects() -> None:
    """``SimulationRun.sync_declared`` tells an informer's own back-off (which must not wait
    for the caches) by its task's name, ``informer:<name>`` (``Informer.start``)."""
    burst = load_scenario(EXAMPLES / "cluster-autoscaler-burst.yaml")
    async with SimulationRun(burst) as run:
        informers = run.runtime.cache.informers.informers
        tasks = {task.get_name() for task in asyncio.all_tasks()}
        assert informers
        assert {f"{_INFORMER_TASK}{informer.name}" for informer in informers} <= tasks
