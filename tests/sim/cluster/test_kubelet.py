"""The simulated kubelet: starting pods, metering usage, OOM kills and CrashLoopBackOff.

Upstream facts checked: a started pod is Running and Ready with ``containerStatuses`` carrying
``started``/``ready``/``state.running.startedAt`` and the container's ``resources``; usage above
the memory limit is an OOM kill (exit code 137, reason OOMKilled, ``restartCount`` + 1,
``lastState.terminated``); restarts follow the kubelet's back-off (the first at once, then 10 s
doubling to 300 s, reset after 10 minutes without a crash); CPU above the limit is throttled to
it; metrics-server's view (pods, nodes = sum) is what the metrics API answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import connect
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import PODS, ResourceType
from kubescale.objects.quantities import Quantity
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.kubelet import ContainerSample, Kubelet
from kubescale.sim.cluster.node_templates import NodeTemplate, build_node
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.usage_models import (
    POD_INDEX_ANNOTATION,
    RUN_SECONDS_ANNOTATION,
    WORKLOAD_LABEL,
    ConstantUsage,
    StepUsage,
    Usage,
    UsageBook,
    UsageModel,
)

GI = 1024**3
MI = 1024**2
POD_METRICS = ResourceType(
    group="metrics.k8s.io", version="v1beta1", kind="PodMetrics", plural="pods", namespaced=True
)
NODE_METRICS = ResourceType(
    group="metrics.k8s.io", version="v1beta1", kind="NodeMetrics", plural="nodes", namespaced=False
)


class Cluster:
    """A node, the scheduler and the kubelet on a real ApiServer, stepped by hand."""

    def __init__(self, *, start_delay: float = 0.0, cpu: str = "4", memory: str = "8Gi") -> None:
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.api = ApiServer(clock=self.clock, crd_dirs=[])
        self.book = UsageBook(seed=7)
        self.scheduler = Scheduler(self.api)
        self.kubelet = Kubelet(self.api, usage=self.book, start=self.start, start_delay=start_delay)
        self.api.store.create(
            build_node(
                name="n1",
                template=NodeTemplate(instance_type="m", cpu=cpu, memory=memory),
                zone="zone-a",
                provider_id="sim://n1",
                address="10.0.0.7",
                ready_since="2026-01-01T00:00:00Z",
            )
        )

    def model(self, model: UsageModel, *, workload: str = "web", container: str = "app") -> None:
        self.book.set_model(workload=workload, container=container, model=model)

    def pod(
        self,
        name: str,
        *,
        index: int = 0,
        requests: dict[str, str] | None = None,
        limits: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        resources: dict[str, Any] = {}
        if requests:
            resources["requests"] = requests
        if limits:
            resources["limits"] = limits
        return self.api.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {WORKLOAD_LABEL: "web"},
                    "annotations": {POD_INDEX_ANNOTATION: str(index), **(annotations or {})},
                },
                "spec": {
                    "containers": [{"name": "app", "image": "web:1", "resources": resources}],
                    **spec,
                },
            }
        )

    async def step(self, seconds: float = 0.0) -> None:
        if seconds:
            await self.clock.advance(seconds)
        now = self.clock.now()
        await self.scheduler.step(now)
        await self.kubelet.step(now)

    @property
    def t(self) -> float:
        return (self.clock.now() - self.start).total_seconds()

    def get(self, name: str) -> dict[str, Any]:
        return self.api.store.get(PODS, name, "default")

    def sample(self, pod: str) -> ContainerSample:
        (found,) = [s for s in self.kubelet.samples() if s.pod == pod]
        return found

    def events(self, kind: str) -> list[tuple[float, str]]:
        return [(e.time, e.subject) for e in self.kubelet.events() if e.kind == kind]


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in pod["status"].get("conditions") or []:
        if found["type"] == kind:
            return dict(found)
    return None


async def test_a_bound_pod_runs_after_the_start_delay() -> None:
    cluster = Cluster(start_delay=5)
    cluster.model(ConstantUsage(0.1, 64 * MI))
    cluster.pod(
        "web-0",
        requests={"cpu": "250m", "memory": "128Mi"},
        limits={"cpu": "1"},
        initContainers=[{"name": "migrate", "image": "tools:1"}],
    )
    await cluster.step()
    assert cluster.get("web-0")["spec"]["nodeName"] == "n1"
    assert cluster.get("web-0")["status"]["phase"] == "Pending"
    assert not cluster.sample("web-0").running
    await cluster.step(3)
    assert cluster.get("web-0")["status"]["phase"] == "Pending"
    assert cluster.events("pod-started") == []
    await cluster.step(2)
    assert cluster.events("pod-started") == [(5.0, "default/web-0")]
    pod = cluster.get("web-0")
    status = pod["status"]
    assert status["phase"] == "Running"
    assert (status["podIP"], status["hostIP"]) == ("10.244.0.2", "10.0.0.7")
    assert status["startTime"] == "2026-01-01T00:00:05Z"
    assert status["qosClass"] == "Burstable"
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        found = condition(pod, kind)
        assert found is not None
        assert found["status"] == "True"
    (container,) = status["containerStatuses"]
    assert container["name"] == "app"
    assert (container["ready"], container["started"], container["restartCount"]) == (True, True, 0)
    assert container["state"] == {"running": {"startedAt": "2026-01-01T00:00:05Z"}}
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "128Mi"},
        "limits": {"cpu": "1"},
    }
    assert container["allocatedResources"] == {"cpu": "250m", "memory": "128Mi"}
    (init,) = status["initContainerStatuses"]
    assert init["state"]["terminated"]["reason"] == "Completed"
    sample = cluster.sample("web-0")
    assert sample.running
    assert (sample.cpu_request, sample.cpu_limit) == (0.25, 1.0)
    assert (sample.memory_request, sample.memory_limit) == (128 * MI, None)
    assert (sample.cpu_usage, sample.memory_usage) == (0.1, 64 * MI)


async def test_the_steady_state_writes_nothing() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.5, 100 * MI))
    for index in range(3):
        cluster.pod(f"web-{index}", index=index, limits={"cpu": "1", "memory": "1Gi"})
    await cluster.step()
    version = cluster.api.store.resource_version
    for _ in range(20):
        await cluster.step(60)
    assert cluster.api.store.resource_version == version
    assert len(cluster.kubelet.samples()) == 3


async def test_usage_is_published_per_pod_and_per_node(tmp_path: Path) -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.25, 100 * MI))
    cluster.model(ConstantUsage(0.05, 10 * MI), container="proxy")
    sidecar = {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
    cluster.pod("web-0", index=0, initContainers=[sidecar])
    cluster.pod("web-1", index=1)
    cluster.api.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bare", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )
    async with cluster.api:
        await cluster.step()
        cluster.api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig") as kube:
            pod = await kube.request(
                verb="get",
                method="GET",
                resource=POD_METRICS,
                path=POD_METRICS.object_path("web-0", "default"),
            )
            node = await kube.request(
                verb="get",
                method="GET",
                resource=NODE_METRICS,
                path=NODE_METRICS.object_path("n1"),
            )
    usage = {c["name"]: c["usage"] for c in pod["containers"]}
    assert Quantity.parse(usage["app"]["cpu"]) == Quantity.parse("250m")
    assert Quantity.parse(usage["app"]["memory"]) == Quantity.parse("100Mi")
    assert Quantity.parse(usage["proxy"]["cpu"]) == Quantity.parse("50m")
    assert pod["metadata"]["labels"] == {WORKLOAD_LABEL: "web"}
    # the node is the sum of its containers (a pod without a model uses nothing)
    assert Quantity.parse(node["usage"]["cpu"]) == Quantity.parse("550m")
    assert Quantity.parse(node["usage"]["memory"]) == Quantity.parse("210Mi")


async def test_a_shared_model_is_divided_among_the_running_replicas() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(1.5, 0.0, shared=True))
    for index in range(3):
        cluster.pod(f"web-{index}", index=index)
    await cluster.step()
    assert [s.cpu_usage for s in cluster.kubelet.samples()] == [0.5, 0.5, 0.5]


async def test_cpu_above_the_limit_is_throttled() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(2.0, 10 * MI))
    cluster.pod("web-0", limits={"cpu": "1", "memory": "1Gi"})
    await cluster.step()
    sample = cluster.sample("web-0")
    assert (sample.cpu_usage, sample.cpu_demand, sample.throttled) == (1.0, 2.0, True)
    ((_, name, usage),) = [
        (p["metadata"]["namespace"], p["metadata"]["name"], p["containers"][0]["usage"])
        for p in cluster.api.metrics.pod_metrics("default")
    ]
    assert name == "web-0"
    assert Quantity.parse(usage["cpu"]) == Quantity.parse("1")
    await cluster.step(60)
    assert cluster.kubelet.throttled_core_seconds() == {("default", "web-0", "app"): 60.0}


def _seconds(timestamp: str) -> float:
    hours, minutes, seconds = timestamp[11:19].split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def runs_and_waits(
    states: Sequence[dict[str, Any]],
) -> tuple[list[tuple[float, float]], list[float]]:
    """The container's finished runs (start, OOM kill) in order, read from ``lastState``, and
    the wait between each kill and the next start."""
    runs: list[tuple[float, float]] = []
    starts: list[float] = []
    for status in states:
        last = status["lastState"].get("terminated")
        if last is not None:
            run = (_seconds(last["startedAt"]), _seconds(last["finishedAt"]))
            if not runs or runs[-1] != run:
                runs.append(run)
        running = status["state"].get("running")
        if running is not None:
            starts.append(_seconds(running["startedAt"]))
    next_starts = [start for start, _ in runs[1:]] + starts[-1:]
    return runs, [start - kill for (_, kill), start in zip(runs, next_starts, strict=False)]


async def run_oom_loop(cluster: Cluster, until: float) -> list[dict[str, Any]]:
    """Step every second; the container status after each step."""
    states: list[dict[str, Any]] = []
    await cluster.step()
    while True:
        (status,) = cluster.get("web-0")["status"]["containerStatuses"]
        states.append(status)
        if cluster.t >= until:
            return states
        await cluster.step(1)


async def test_oom_kills_restart_with_the_kubelet_back_off() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.1, 2 * GI))
    cluster.pod("web-0", requests={"memory": "1Gi"}, limits={"memory": "1Gi"})
    states = await run_oom_loop(cluster, until=1300)
    # each run is killed in the step it starts or the next; the kubelet restarts the first
    # kill at once, then waits 10 s, doubling up to 300 s
    runs, waits = runs_and_waits(states)
    assert waits[:8] == [0, 10, 20, 40, 80, 160, 300, 300]
    assert runs[:4] == [(0, 0), (0, 1), (11, 11), (31, 31)]

    first = states[0]
    assert first["restartCount"] == 1
    assert first["state"] == {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    assert first["lastState"]["terminated"] == {
        "exitCode": 137,
        "reason": "OOMKilled",
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:00:00Z",
        "containerID": first["lastState"]["terminated"]["containerID"],
    }
    pod = cluster.get("web-0")
    waiting = states[1]
    assert waiting["state"]["waiting"] == {
        "reason": "CrashLoopBackOff",
        "message": "back-off 10s restarting failed container=app "
        f"pod=web-0_default({pod['metadata']['uid']})",
    }
    assert (waiting["ready"], waiting["started"], waiting["restartCount"]) == (False, False, 2)
    assert pod["status"]["phase"] == "Running"
    ready = condition(pod, "Ready")
    assert ready is not None
    assert ready["status"] == "False"
    assert states[-1]["restartCount"] == len(runs)
    assert "back-off 5m0s" in str(states[-1]["state"])


async def test_back_off_starts_over_after_ten_minutes_without_a_crash() -> None:
    cluster = Cluster()
    high, low = Usage(0.1, 2 * GI), Usage(0.1, 10 * MI)
    cluster.model(StepUsage([(0, high), (5, low), (800, high), (805, low)]))
    cluster.pod("web-0", limits={"memory": "1Gi"})
    states = await run_oom_loop(cluster, until=830)
    # the kill at 800 comes more than 600 s after the back-off last moved (at 1): the
    # container restarts at once and the next kill waits 10 s again
    runs, waits = runs_and_waits(states)
    assert runs == [(0, 0), (0, 1), (11, 800), (800, 801)]
    assert waits == [0, 10, 0, 10]


async def test_an_oom_kill_is_an_event_and_a_sample() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.1, 2 * GI))
    cluster.pod("web-0", limits={"memory": "1Gi"})
    await cluster.step()
    assert cluster.events("oom-kill") == [(0.0, "default/web-0")]
    sample = cluster.sample("web-0")
    assert (sample.oom_killed, sample.memory_usage, sample.running) == (True, GI, True)
    await cluster.step(1)
    sample = cluster.sample("web-0")
    assert (sample.oom_killed, sample.running) == (True, False)  # now in CrashLoopBackOff
    await cluster.step(1)
    assert cluster.events("oom-kill") == []
    assert cluster.sample("web-0").memory_usage == 0.0


async def test_restart_policy_never_fails_the_pod_on_oom() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.1, 2 * GI))
    cluster.pod("web-0", limits={"memory": "1Gi"}, restartPolicy="Never")
    await cluster.step()
    sample = cluster.sample("web-0")
    assert (sample.oom_killed, sample.running, sample.memory_usage) == (True, False, GI)
    pod = cluster.get("web-0")
    assert pod["status"]["phase"] == "Failed"
    (status,) = pod["status"]["containerStatuses"]
    assert status["state"]["terminated"]["reason"] == "OOMKilled"
    assert status["restartCount"] == 0
    assert cluster.api.metrics.pod_metrics("default") == []
    await cluster.step(60)
    assert cluster.kubelet.samples() == []


async def test_a_job_pod_succeeds_after_its_run_time() -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.5, 10 * MI))
    cluster.pod("job-0", annotations={RUN_SECONDS_ANNOTATION: "120"}, restartPolicy="Never")
    await cluster.step()
    await cluster.step(60)
    assert cluster.get("job-0")["status"]["phase"] == "Running"
    await cluster.step(60)
    pod = cluster.get("job-0")
    assert pod["status"]["phase"] == "Succeeded"
    (status,) = pod["status"]["containerStatuses"]
    assert status["state"]["terminated"]["exitCode"] == 0
    assert status["state"]["terminated"]["reason"] == "Completed"
    ready = condition(pod, "Ready")
    assert ready is not None
    assert ready["status"] == "False"


async def test_an_evicted_pod_stops_then_is_deleted_after_its_grace_period(tmp_path: Path) -> None:
    cluster = Cluster()
    cluster.model(ConstantUsage(0.5, 10 * MI))
    cluster.pod("web-0", index=0, terminationGracePeriodSeconds=30)
    cluster.pod("web-1", index=1)
    async with cluster.api:
        await cluster.step()
        cluster.api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig", clock=cluster.clock) as kube:
            await kube.evict("web-0", namespace="default")
            await cluster.step(10)
            assert cluster.get("web-0")["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
            assert not cluster.sample("web-0").running
            assert cluster.events("evicted") == []
            with pytest.raises(KubeApiError) as stopped:  # a stopped pod has no metrics
                await kube.request(
                    verb="get",
                    method="GET",
                    resource=POD_METRICS,
                    path=POD_METRICS.object_path("web-0", "default"),
                )
            assert stopped.value.code == 404
            await cluster.step(20)
            assert [p["metadata"]["name"] for p in cluster.api.store.list(PODS)] == ["web-1"]
            assert cluster.events("evicted") == [(30.0, "default/web-0")]
            await kube.delete(PODS, "web-1", namespace="default")
            await cluster.step(30)
    assert cluster.events("pod-deleted") == [(60.0, "default/web-1")]
    assert cluster.api.store.list(PODS) == []


async def test_a_pod_removed_behind_the_kubelets_back_is_reported_deleted() -> None:
    cluster = Cluster()
    cluster.pod("web-0")
    await cluster.step()
    cluster.api.store.delete(PODS, "web-0", "default", grace_period_seconds=0)
    await cluster.step(60)
    assert cluster.events("pod-deleted") == [(60.0, "default/web-0")]
    assert cluster.kubelet.samples() == []


async def test_a_pod_held_by_a_finalizer_is_reported_once_when_it_finally_goes() -> None:
    cluster = Cluster()
    cluster.pod("web-0")
    pod = cluster.get("web-0")
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.api.store.update(pod)
    await cluster.step()
    cluster.api.store.delete(PODS, "web-0", "default", grace_period_seconds=10)
    for _ in range(3):
        await cluster.step(30)
        assert cluster.events("pod-deleted") == []
    held = cluster.get("web-0")
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0
    held["metadata"]["finalizers"] = []
    cluster.api.store.update(held)
    await cluster.step(30)
    assert cluster.events("pod-deleted") == [(120.0, "default/web-0")]
    await cluster.step(30)
    assert cluster.events("pod-deleted") == []
