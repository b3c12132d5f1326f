"""The workload-controller actor against a real ApiServer, and the harness its other tests use.

The scheduler and kubelet are played by :class:`StandInKubelet` — a few lines that bind pods,
start them (Running, Ready), fail or finish them, and remove terminating ones — so the
``test_workload_controllers_*`` modules depend on the controllers alone and import
:class:`SimCluster` and its fixture from here. The tests here are about the actor as a whole: a
quiet cluster costs no write and no sync, creates go through the admission chain, owners' deletion
is followed by garbage collection, node changes wake DaemonSets only.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import (
    DEPLOYMENTS,
    NODES,
    PODS,
    REPLICA_SETS,
    ResourceType,
)
from kubescale.sim.apiserver.served_kinds import VALIDATING_WEBHOOK_CONFIGURATIONS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.storage import format_time
from kubescale.sim.apiserver.store import PreparedUpdate
from kubescale.sim.cluster.usage_models import POD_INDEX_ANNOTATION, RUN_SECONDS_ANNOTATION
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from kubescale.sim.cluster.workload_pods import controller_ref, is_active, parse_timestamp
from tests import builders
from tests.sim.apiserver.test_admission import (
    SERVICE,
    SERVICE_NAMESPACE,
    Review,
    WebhookServer,
    answer,
    ca,
    configuration,
    server_tls,
    webhook,
    webhook_server,
)

__all__ = ["ca", "server_tls", "webhook_server"]  # fixtures re-used from the admission tests

STEP = 60.0


# ------------------------------------------------------------------------------------ harness


@dataclass
class StandInKubelet:
    """Plays scheduler + kubelet for controller tests, once per step, after the controllers.

    Pending pods are bound (to the node their DaemonSet affinity names, else ``node``) and
    turned Running and Ready — unless their first container's image is in ``stuck`` (never
    ready) or ``failing`` (phase Failed). Running pods with ``RUN_SECONDS_ANNOTATION`` turn
    Succeeded after that long. Terminating pods are removed (grace over).
    """

    api: ApiServer
    node: str = "node-a"
    stuck: set[str] = field(default_factory=set)
    failing: set[str] = field(default_factory=set)
    paused: bool = False

    def step(self, now: datetime) -> None:
        if self.paused:
            return
        store = self.api.store
        stamp = format_time(now)
        for pod in list(store.snapshots(PODS)):
            meta = pod["metadata"]
            name, namespace = meta["name"], meta["namespace"]
            if meta.get("deletionTimestamp"):
                store.delete(PODS, name, namespace, grace_period_seconds=0)
                continue
            status = pod.get("status") or {}
            phase = status.get("phase")
            image = pod["spec"]["containers"][0].get("image", "")
            if phase == "Pending":
                if not pod["spec"].get("nodeName"):
                    self._bind(pod, _pinned_node(pod) or self.node)
                if image in self.failing:
                    exited = {"terminated": {"exitCode": 1, "finishedAt": stamp}}
                    self._set_status(
                        pod,
                        {
                            "phase": "Failed",
                            "startTime": stamp,
                            "containerStatuses": [
                                {"name": c["name"], "ready": False, "state": exited}
                                for c in pod["spec"]["containers"]
                            ],
                        },
                    )
                elif image not in self.stuck:
                    ready = {"type": "Ready", "status": "True", "lastTransitionTime": stamp}
                    self._set_status(
                        pod,
                        {
                            "phase": "Running",
                            "startTime": stamp,
                            "conditions": [ready],
                            "containerStatuses": [
                                {"name": c["name"], "ready": True, "restartCount": 0}
                                for c in pod["spec"]["containers"]
                            ],
                        },
                    )
            elif phase == "Running":
                run = (meta.get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
                started = parse_timestamp(status.get("startTime"))
                if (
                    run is not None
                    and started is not None
                    and (now - started).total_seconds() >= float(run)
                ):
                    self._set_status(pod, {"phase": "Succeeded", "startTime": status["startTime"]})

    def _bind(self, pod: dict[str, Any], node: str) -> None:
        store = self.api.store
        meta = pod["metadata"]
        bound = store.get(PODS, meta["name"], meta["namespace"])
        bound["spec"]["nodeName"] = node
        old = store.peek(PODS, meta["name"], meta["namespace"])
        store.commit_update(PODS, PreparedUpdate(old=old, new=bound), bump_generation=False)

    def _set_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        current = self.api.store.get(PODS, meta["name"], meta["namespace"])
        current["status"] = {**(current.get("status") or {}), **status}
        self.api.store.update_status(current)


def _pinned_node(pod: dict[str, Any]) -> str | None:
    required = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expression in term.get("matchFields") or []:
            return str(expression["values"][0])
    return None


@dataclass
class SimCluster:
    api: ApiServer
    clock: VirtualClock
    controllers: WorkloadControllers
    kubelet: StandInKubelet

    async def step(self, count: int = 1) -> None:
        """``count`` steps of a minute: controllers, then the stand-in kubelet."""
        for _ in range(count):
            await self.clock.advance(STEP)
            now = self.clock.now()
            await self.controllers.step(now)
            self.kubelet.step(now)

    async def controllers_only(self) -> None:
        """One step of the controllers alone (no kubelet afterwards)."""
        await self.clock.advance(STEP)
        await self.controllers.step(self.clock.now())

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.api.store.create(copy.deepcopy(obj))

    def get(self, rt: ResourceType, name: str, namespace: str | None = "default") -> dict[str, Any]:
        return self.api.store.get(rt, name, namespace)

    def pods(self, *, selector: str = "", namespace: str = "default") -> list[dict[str, Any]]:
        return self.api.store.list(PODS, namespace=namespace, label_selector=selector)

    def active_pods(self, *, selector: str = "") -> list[dict[str, Any]]:
        return [p for p in self.pods(selector=selector) if is_active(p)]

    def owned(self, owner: dict[str, Any], rt: ResourceType) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        return [
            o
            for o in self.api.store.list(rt, namespace=owner["metadata"]["namespace"])
            if (controller_ref(o) or {}).get("uid") == uid
        ]

    def add_node(
        self, name: str, *, labels: dict[str, str] | None = None, taints: Iterable[Any] = ()
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
        return self.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                },
                "spec": spec,
            }
        )


@pytest.fixture
async def cluster() -> AsyncIterator[SimCluster]:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[], seed=11) as api:
        controllers = WorkloadControllers(api=api)
        yield SimCluster(api=api, clock=clock, controllers=controllers, kubelet=StandInKubelet(api))
        controllers.close()


def web_deployment(
    name: str = "web",
    *,
    replicas: int = 3,
    image: str = "nginx:1",
    strategy: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """Deployment ``name`` of ``replicas`` pods labelled ``app: name`` (template annotated
    ``team: blue``, one container ``app`` running ``image``), ``strategy`` and further
    ``spec`` fields when given, over the shared builders."""
    labels = {"app": name}
    return builders.workloads.deployment(
        name=name,
        replicas=replicas,
        match_labels=labels,
        template=builders.workloads.pod_template(
            labels=labels,
            annotations={"team": "blue"},
            containers=[builders.pods.container(image=image)],
        ),
        spec={**spec, **({"strategy": strategy} if strategy is not None else {})},
    )


def with_image(obj: dict[str, Any], image: str) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return changed


def indexes(pods: Iterable[dict[str, Any]]) -> list[int]:
    return sorted(int(p["metadata"]["annotations"][POD_INDEX_ANNOTATION]) for p in pods)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in obj["status"].get("conditions") or [] if c["type"] == kind
    ]
    assert len(found) == 1, obj["status"]
    return found[0]


# -------------------------------------------------------------------------------------- tests


async def test_a_quiet_cluster_costs_no_writes_and_no_syncs(cluster: SimCluster) -> None:
    for name in ("a", "b", "c"):
        cluster.create(web_deployment(name, replicas=4))
    await cluster.step(3)
    revision, syncs = cluster.api.store.resource_version, cluster.controllers.syncs
    await cluster.step(30)
    assert cluster.api.store.resource_version == revision
    assert cluster.controllers.syncs == syncs


async def test_deleting_a_deployment_collects_its_replica_sets_and_pods(
    cluster: SimCluster,
) -> None:
    cluster.create(web_deployment(replicas=2))
    cluster.create(web_deployment("other", replicas=1))
    await cluster.step(2)
    cluster.api.store.delete(DEPLOYMENTS, "web", "default")
    await cluster.step()
    assert [
        rs["metadata"]["name"].split("-")[0] for rs in cluster.api.store.list(REPLICA_SETS)
    ] == ["other"]
    assert [p["metadata"]["labels"]["app"] for p in cluster.pods()] == ["other"]


async def test_pods_are_created_through_the_admission_chain(
    cluster: SimCluster, webhook_server: WebhookServer, ca: Any
) -> None:
    async def deny(review: Review) -> web.StreamResponse:
        return answer(review, allowed=False, status={"code": 403, "message": "no pods today"})

    webhook_server.behaviours["/deny"] = deny
    cluster.api.register_service(
        namespace=SERVICE_NAMESPACE, name=SERVICE, address=webhook_server.address
    )
    cluster.create(configuration("inject", webhook("inject.example.com", "/mutate", ca=ca)))
    cluster.create(
        configuration("deny", webhook("deny.example.com", "/deny", ca=ca), validating=True)
    )
    cluster.create(web_deployment(replicas=2))
    await cluster.step()
    assert cluster.pods() == []  # denied: retried next step
    cluster.api.store.delete(VALIDATING_WEBHOOK_CONFIGURATIONS, "deny")
    await cluster.step()
    pods = cluster.pods()
    assert len(pods) == 2
    assert all(p["metadata"]["labels"]["injected"] == "yes" for p in pods)  # the mutation


async def test_nodes_do_not_wake_deployments(cluster: SimCluster) -> None:
    cluster.create(web_deployment(replicas=1))
    await cluster.step(2)
    syncs = cluster.controllers.syncs
    cluster.add_node("node-b")
    await cluster.step()
    assert cluster.controllers.syncs == syncs
    assert cluster.api.store.list(NODES)[0]["metadata"]["name"] == "node-b"
