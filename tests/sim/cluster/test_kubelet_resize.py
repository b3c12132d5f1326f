"""In-place resize through ``pods/resize``, as the simulated kubelet carries it out.

Upstream (``canResizePod``, Kubernetes 1.33): a resize whose requests exceed the node's
allocatable is Infeasible (``Node didn't have enough capacity: cpu, requested: 8000, capacity:
4000``); one that fits the node but not next to its other pods is Deferred (``Node didn't have
enough resource: cpu, requested: 2000, used: 2500, capacity: 4000``) and is retried; otherwise
the container's status resources follow the spec. The scheduler counts a pod being resized at
the larger of its old and new requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.resources import PODS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.kubelet import Kubelet
from kubescale.sim.cluster.node_templates import NodeTemplate, build_node
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.usage_models import WORKLOAD_LABEL, ConstantUsage, UsageBook
from tests import builders


class ResizeCluster:
    def __init__(self, api: ApiServer, clock: VirtualClock) -> None:
        self.api = api
        self.clock = clock
        book = UsageBook(seed=1)
        book.set_model(workload="web", container="app", model=ConstantUsage(1.5, 0.0))
        self.scheduler = Scheduler(api)
        self.kubelet = Kubelet(api, usage=book, start=clock.now(), start_delay=0)
        api.store.create(
            build_node(
                name="n1",
                template=NodeTemplate(instance_type="m", cpu="4", memory="8Gi"),
                zone="zone-a",
                provider_id="sim://n1",
                address="10.0.0.1",
                ready_since="2026-01-01T00:00:00Z",
            )
        )

    async def step(self, seconds: float = 60) -> None:
        await self.clock.advance(seconds)
        await self.scheduler.step(self.clock.now())
        await self.kubelet.step(self.clock.now())

    def status_resources(self, name: str) -> dict[str, Any]:
        (status,) = self.api.store.get(PODS, name, "default")["status"]["containerStatuses"]
        return dict(status["resources"])

    def pending(self, name: str) -> tuple[str, str] | None:
        for condition in self.api.store.get(PODS, name, "default")["status"]["conditions"]:
            if condition["type"] == "PodResizePending":
                return str(condition["reason"]), str(condition["message"])
        return None


async def resize(kube: KubeClient, name: str, cpu: str, *, limit: str | None = None) -> None:
    resources: dict[str, Any] = {"requests": {"cpu": cpu}}
    if limit:
        resources["limits"] = {"cpu": limit}
    await kube.patch(
        PODS,
        name,
        {"spec": {"containers": [{"name": "app", "resources": resources}]}},
        namespace="default",
        patch_type="strategic",
        subresource="resize",
    )


async def test_a_resize_the_node_has_room_for_is_applied(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[]) as api:
        cluster = ResizeCluster(api, clock)
        api.store.create(
            builders.pods.pod(
                name="web-0",
                labels={WORKLOAD_LABEL: "web"},
                containers=[
                    builders.pods.container(
                        image="web:1",
                        requests={"cpu": "500m", "memory": "256Mi"},
                        limits={"cpu": "1"},
                    )
                ],
            )
        )
        await cluster.step(0)
        (throttled,) = cluster.kubelet.samples()
        assert (throttled.cpu_usage, throttled.throttled) == (1.0, True)
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock) as kube:
            await resize(kube, "web-0", "2", limit="2")
        version = api.store.resource_version
        await cluster.step()
        assert api.store.resource_version == version + 1  # one status write
        assert cluster.status_resources("web-0") == {
            "requests": {"cpu": "2", "memory": "256Mi"},
            "limits": {"cpu": "2"},
        }
        (status,) = api.store.get(PODS, "web-0", "default")["status"]["containerStatuses"]
        assert status["allocatedResources"] == {"cpu": "2", "memory": "256Mi"}
        assert status["restartCount"] == 0
        assert cluster.pending("web-0") is None
        (sample,) = cluster.kubelet.samples()
        assert (sample.cpu_request, sample.cpu_limit) == (2.0, 2.0)
        assert (sample.cpu_usage, sample.throttled) == (1.5, False)  # the new limit applies


async def test_a_resize_beyond_the_node_is_infeasible(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[]) as api:
        cluster = ResizeCluster(api, clock)
        api.store.create(
            builders.pods.pod(
                name="web-0",
                labels={WORKLOAD_LABEL: "web"},
                containers=[
                    builders.pods.container(image="web:1", requests={"cpu": "1", "memory": "256Mi"})
                ],
            )
        )
        await cluster.step(0)
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock) as kube:
            await resize(kube, "web-0", "8")
        await cluster.step()
        assert cluster.pending("web-0") == (
            "Infeasible",
            "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000",
        )
        assert cluster.status_resources("web-0")["requests"]["cpu"] == "1"
        version = api.store.resource_version
        await cluster.step()
        assert api.store.resource_version == version  # the same verdict is not rewritten
        # an Infeasible resize holds only what the pod runs with: 3 cpus are left
        api.store.create(
            builders.pods.pod(
                name="fits",
                labels={WORKLOAD_LABEL: "web"},
                containers=[
                    builders.pods.container(image="web:1", requests={"cpu": "3", "memory": "256Mi"})
                ],
            )
        )
        await cluster.step()
        assert api.store.get(PODS, "fits", "default")["spec"]["nodeName"] == "n1"


async def test_a_deferred_resize_is_applied_once_room_frees_up(tmp_path: Path) -> None:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[]) as api:
        cluster = ResizeCluster(api, clock)
        api.store.create(
            builders.pods.pod(
                name="web-0",
                labels={WORKLOAD_LABEL: "web"},
                containers=[
                    builders.pods.container(image="web:1", requests={"cpu": "1", "memory": "256Mi"})
                ],
            )
        )
        api.store.create(
            builders.pods.pod(
                name="web-1",
                labels={WORKLOAD_LABEL: "web"},
                containers=[
                    builders.pods.container(
                        image="web:1", requests={"cpu": "2500m", "memory": "256Mi"}
                    )
                ],
            )
        )
        await cluster.step(0)
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock) as kube:
            await resize(kube, "web-0", "2")
        await cluster.step()
        assert cluster.pending("web-0") == (
            "Deferred",
            "Node didn't have enough resource: cpu, requested: 2000, used: 2500, capacity: 4000",
        )
        assert cluster.status_resources("web-0")["requests"]["cpu"] == "1"
        # while the resize waits, the scheduler counts web-0 at its new size: 4 - 2 - 2.5 < 0
        api.store.create(
            builders.pods.pod(
                name="small",
                labels={WORKLOAD_LABEL: "web"},
                containers=[
                    builders.pods.container(
                        image="web:1", requests={"cpu": "100m", "memory": "256Mi"}
                    )
                ],
            )
        )
        await cluster.step()
        assert not api.store.get(PODS, "small", "default")["spec"].get("nodeName")
        api.store.delete(PODS, "web-1", "default", grace_period_seconds=0)
        api.store.delete(PODS, "small", "default")
        await cluster.step()
        assert cluster.pending("web-0") is None
        assert cluster.status_resources("web-0")["requests"]["cpu"] == "2"
