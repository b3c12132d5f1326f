"""The recommender's ``RunOnce`` against the in-process API server, through the real client.

Pods, their controllers, PodMetrics and VPAs are put in the API server; the loop reads them
through its informers and the metrics API and writes VPA statuses and checkpoints back. Expected
numbers come from upstream's documented rules (reference §2.3-2.4, worked example: a constant
1.0 core → target 1168m, 1e9 bytes → 1168723596) and the status rules of §2.8.

The builders here are shared by the other ``test_recommender_*``/``test_checkpoint_store``/
``test_oom_observer``/``test_cluster_feeder`` modules.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.components import by_name
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_loop import RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.resources import PODS, VERTICAL_POD_AUTOSCALERS, VPA_CHECKPOINTS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.quantities import Quantity
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock
from kubescale.sim.scenario.scenario_components import component_settings

START = datetime(2026, 1, 5, tzinfo=UTC)
NAMESPACE = "shop"


@dataclass
class Cluster:
    """An API server, a client on it and a virtual clock; builders for the objects."""

    api: ApiServer
    client: KubeClient
    clock: VirtualClock
    loops: list[SharedCache] = field(default_factory=list)

    @property
    def now(self) -> datetime:
        return self.clock.now()

    def deployment(self, name: str, *, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        labels = dict(labels or {"app": name})
        return self.api.store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "app"}]},
                    },
                },
            }
        )

    def replica_set(self, name: str, *, owner: Mapping[str, Any]) -> dict[str, Any]:
        labels = owner["spec"]["selector"]["matchLabels"]
        return self.api.store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "ownerReferences": [_owner_ref(owner)],
                },
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": owner["spec"]["template"],
                },
            }
        )

    def pod(
        self,
        name: str,
        *,
        labels: Mapping[str, str],
        containers: Mapping[str, Mapping[str, str]],
        phase: str = "Running",
        owner: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A pod (``containers``: name → requests) in ``phase``, its containers running."""
        metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "labels": dict(labels)}
        if owner is not None:
            metadata["ownerReferences"] = [_owner_ref(owner)]
        created = self.api.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": {
                    "nodeName": "node-1",
                    "containers": [
                        {"name": c, "image": "app", "resources": {"requests": dict(r)}}
                        for c, r in containers.items()
                    ],
                },
            }
        )
        started = _format(self.now)
        status = {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": c,
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "image": "app",
                    "imageID": "",
                    "state": {"running": {"startedAt": started}}
                    if phase == "Running"
                    else {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in containers
            ],
        }
        return self.api.store.update_status({**created, "status": status})

    def vpa(
        self,
        name: str,
        *,
        target: tuple[str, str, str] = ("apps/v1", "Deployment", "web"),
        recommenders: list[str] | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        api_version, kind, target_name = target
        body: dict[str, Any] = {
            "targetRef": {"apiVersion": api_version, "kind": kind, "name": target_name},
            "updatePolicy": {"updateMode": "Off"},
            **(spec or {}),
        }
        if recommenders is not None:
            body["recommenders"] = [{"name": r} for r in recommenders]
        return self.api.store.create(
            {
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": body,
            }
        )

    def usage(self, pod: str, containers: Mapping[str, Mapping[str, str]]) -> None:
        """The pod's PodMetrics, measured now."""
        self.api.metrics.set_pod_metrics(
            namespace=NAMESPACE, name=pod, containers=containers, timestamp=self.now
        )

    def get_vpa(self, name: str) -> dict[str, Any]:
        return self.api.store.get(VERTICAL_POD_AUTOSCALERS, name, NAMESPACE)

    def checkpoints(self) -> list[dict[str, Any]]:
        return self.api.store.list(VPA_CHECKPOINTS, namespace=NAMESPACE)

    async def recommender(
        self, flags: Mapping[str, Any] | None = None, *, registry: CollectorRegistry | None = None
    ) -> RecommenderLoop:
        """A recommender loop (flags as in a scenario), its informers started and synced."""
        informers = SharedCache(client=self.client, clock=self.client.clock, rng=random.Random(1))
        self.loops.append(informers)
        loop = RecommenderLoop(
            client=self.client,
            cache=informers,
            settings=_recommender_settings(flags or {}),
            metrics=RecommenderMetrics(registry if registry is not None else CollectorRegistry()),
        )
        informers.start()
        # within= would count on the client's clock, whose waits take no time: bound in real time
        assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
        return loop

    async def run(self, loop: RecommenderLoop) -> None:
        """Settle the loop's informers on the store (as the simulator does), then RunOnce."""
        target = str(self.api.store.resource_version)
        for _ in range(100):
            self.api.bookmark_watches()
            if await loop.cache.wait_for_resource_version(target, within=0.1):
                break
        else:
            raise AssertionError("the recommender's informers did not catch up")
        await loop.run_once(self.now)

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)


def _owner_ref(owner: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }


def _format(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    clock = VirtualClock(START)
    async with ApiServer(clock=clock, bookmark_interval=3600.0, seed=3) as api:
        api.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        client = await connect(
            kubeconfig=kubeconfig,
            clock=SimulationClientClock(clock),
            registry=CollectorRegistry(),
            rng=random.Random(0),
        )
        built = Cluster(api=api, client=client, clock=clock)
        try:
            yield built
        finally:
            for informers in built.loops:
                await informers.stop()
            await client.close()


def conditions(vpa: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (vpa.get("status") or {}).get("conditions") or []}


def recommendation(vpa: Mapping[str, Any]) -> list[dict[str, Any]]:
    rec = (vpa.get("status") or {}).get("recommendation") or {}
    return list(rec.get("containerRecommendations") or [])


async def web_with_one_pod(
    cluster: Cluster, *, cpu: str = "1", memory: str = "1000000000"
) -> dict[str, Any]:
    """Deployment ``web`` → ReplicaSet → one running pod ``web-1`` using ``cpu``/``memory``."""
    deployment = cluster.deployment("web")
    replica_set = cluster.replica_set("web-7d9f", owner=deployment)
    pod = cluster.pod(
        "web-1",
        labels={"app": "web"},
        containers={"app": {"cpu": "500m", "memory": "512Mi"}},
        owner=replica_set,
    )
    cluster.usage("web-1", {"app": {"cpu": cpu, "memory": memory}})
    return pod


# -- the worked example and the status contract ---------------------------------------------


async def test_one_sample_gives_the_worked_example(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    vpa = cluster.get_vpa("web")
    # P90 of one sample is its bucket's end: 1.0 core → 1.01628 cores, 1e9 B → 1016281388 B,
    # times 1.15. With one sample the confidence is 0: lower bound → 0, lifted to the pod
    # minimum (25m, 250Mi for one container); upper bound → the 1e14 clamp.
    assert recommendation(vpa) == [
        {
            "containerName": "app",
            "target": {"cpu": "1168m", "memory": "1168723596"},
            "lowerBound": {"cpu": "25m", "memory": "250Mi"},
            "upperBound": {"cpu": "100G", "memory": "97656250000Ki"},
            "uncappedTarget": {"cpu": "1168m", "memory": "1168723596"},
        }
    ]
    provided = conditions(vpa)["RecommendationProvided"]
    assert provided["status"] == "True"
    assert provided["lastTransitionTime"] == _format(START)
    assert "reason" not in provided
    assert set(conditions(vpa)) == {"RecommendationProvided"}
    assert vpa["status"]["observedGeneration"] == vpa["metadata"]["generation"]


async def test_the_status_is_written_only_when_it_changes(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert loop.status_writes == 1
    written = cluster.get_vpa("web")["metadata"]["resourceVersion"]
    # Again, with the same PodMetrics: the CPU sample is not newer than the last one (dropped),
    # the memory peak is unchanged; the same status is not written again.
    await cluster.run(loop)
    assert loop.status_writes == 1
    assert cluster.get_vpa("web")["metadata"]["resourceVersion"] == written
    # A minute later, far more CPU: the target moves, the status is written, and the
    # RecommendationProvided condition keeps its transition time (its status did not change).
    await cluster.advance(60)
    cluster.usage("web-1", {"app": {"cpu": "4", "memory": "1000000000"}})
    await cluster.run(loop)
    assert loop.status_writes == 2
    vpa = cluster.get_vpa("web")
    assert recommendation(vpa)[0]["target"]["cpu"] != "1168m"
    assert conditions(vpa)["RecommendationProvided"]["lastTransitionTime"] == _format(START)


async def test_a_vpa_without_pods(cluster: Cluster) -> None:
    cluster.deployment("web")
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    status = cluster.get_vpa("web")["status"]
    assert status["recommendation"] == {}
    assert status["conditions"] == [
        {
            "type": "NoPodsMatched",
            "status": "True",
            "lastTransitionTime": _format(START),
            "reason": "NoPodsMatched",
            "message": "No pods match this VPA object",
        },
        {
            "type": "RecommendationProvided",
            "status": "False",
            "lastTransitionTime": _format(START),
            "reason": "NoPodsMatched",
            "message": "No pods match this VPA object",
        },
    ]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            ("apps/v1", "Deployment", "missing"),
            "Cannot read targetRef. Reason: Deployment shop/missing does not exist",
        ),
        (
            ("apps/v1", "ReplicaSet", "web-7d9f"),
            "The target apps/v1.ReplicaSet/web-7d9f has a parent controller but it should point "
            "to a topmost well-known or scalable controller",
        ),
    ],
)
async def test_config_unsupported(
    cluster: Cluster, target: tuple[str, str, str], message: str
) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("odd", target=target)
    loop = await cluster.recommender()
    await cluster.run(loop)
    vpa = cluster.get_vpa("odd")
    unsupported = conditions(vpa)["ConfigUnsupported"]
    assert (unsupported["status"], unsupported["message"]) == ("True", message)
    assert "reason" not in unsupported
    # An unusable target matches nothing.
    assert conditions(vpa)["NoPodsMatched"]["status"] == "True"
    assert recommendation(vpa) == []


async def test_config_unsupported_clears_when_the_target_appears(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("api", target=("apps/v1", "Deployment", "api"))
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert "ConfigUnsupported" in conditions(cluster.get_vpa("api"))
    cluster.deployment("api")
    cluster.pod("api-1", labels={"app": "api"}, containers={"srv": {"cpu": "100m"}})
    cluster.usage("api-1", {"srv": {"cpu": "200m", "memory": "300Mi"}})
    await cluster.advance(60)
    await cluster.run(loop)
    vpa = cluster.get_vpa("api")
    assert set(conditions(vpa)) == {"RecommendationProvided"}
    assert [r["containerName"] for r in recommendation(vpa)] == ["srv"]


@pytest.mark.parametrize(
    ("recommender", "recommenders", "handled"),
    [
        ("default", None, True),
        ("default", ["default"], True),
        ("default", ["other"], False),
        ("other", None, False),
        ("other", ["other"], True),
        ("other", ["default"], False),
    ],
)
async def test_recommender_name_selection(
    cluster: Cluster, recommender: str, recommenders: list[str] | None, handled: bool
) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web", recommenders=recommenders)
    loop = await cluster.recommender({"recommender-name": recommender})
    await cluster.run(loop)
    vpa = cluster.get_vpa("web")
    assert ("status" in vpa and bool(recommendation(vpa))) is handled
    assert bool(cluster.checkpoints()) is handled


async def test_container_mode_off_and_controlled_resources(cluster: Cluster) -> None:
    cluster.deployment("web")
    cluster.pod(
        "web-1",
        labels={"app": "web"},
        containers={"app": {"cpu": "100m"}, "sidecar": {"cpu": "10m"}},
    )
    cluster.usage(
        "web-1",
        {"app": {"cpu": "1", "memory": "1000000000"}, "sidecar": {"cpu": "1", "memory": "1e9"}},
    )
    policy = {
        "containerPolicies": [
            {"containerName": "sidecar", "mode": "Off"},
            {"containerName": "*", "controlledResources": ["cpu"]},
        ]
    }
    cluster.vpa("web", spec={"resourcePolicy": policy})
    loop = await cluster.recommender()
    await cluster.run(loop)
    (only,) = recommendation(cluster.get_vpa("web"))
    assert only["containerName"] == "app"
    assert only["target"] == {"cpu": "1168m"}


async def test_memory_saver_tracks_only_pods_a_vpa_matches(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.pod("lonely", labels={"app": "lonely"}, containers={"app": {"cpu": "100m"}})
    cluster.usage("lonely", {"app": {"cpu": "100m", "memory": "100Mi"}})
    cluster.vpa("web")
    saver = await cluster.recommender({"memory-saver": True})
    await cluster.run(saver)
    assert saver.feeder.state.pod_keys() == [(NAMESPACE, "web-1")]
    everything = await cluster.recommender()
    await cluster.run(everything)
    assert everything.feeder.state.pod_keys() == [(NAMESPACE, "lonely"), (NAMESPACE, "web-1")]
    assert saver.feeder.state.aggregate_count() < everything.feeder.state.aggregate_count()


async def test_pending_pods_are_not_loaded(cluster: Cluster) -> None:
    cluster.deployment("web")
    cluster.pod("web-1", labels={"app": "web"}, containers={"app": {"cpu": "1"}}, phase="Pending")
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert loop.feeder.state.pod_keys() == []
    assert conditions(cluster.get_vpa("web"))["NoPodsMatched"]["status"] == "True"


async def test_deleted_pods_and_vpas_leave_the_model(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert loop.feeder.state.vpa_keys() == [(NAMESPACE, "web")]
    cluster.api.store.delete(PODS, "web-1", NAMESPACE, grace_period_seconds=0)
    cluster.api.store.delete(VERTICAL_POD_AUTOSCALERS, "web", NAMESPACE)
    await cluster.advance(60)
    await cluster.run(loop)
    assert loop.feeder.state.pod_keys() == []
    assert loop.feeder.state.vpa_keys() == []


async def test_recommendations_follow_the_samples_over_a_day(cluster: Cluster) -> None:
    """Constant usage for 24 h: the bounds close in as confidence grows (×2 upper at 24 h)."""
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    uppers = []
    for hour in range(25):
        cluster.usage("web-1", {"app": {"cpu": "1", "memory": "1000000000"}})
        await cluster.run(loop)
        if hour in (12, 24):
            uppers.append(recommendation(cluster.get_vpa("web"))[0]["upperBound"]["cpu"])
        await cluster.advance(3600)
    target = recommendation(cluster.get_vpa("web"))[0]["target"]
    assert target == {"cpu": "1168m", "memory": "1168723596"}
    # Samples every hour: the sample-count confidence (25 samples over a day of minutes) is
    # the limiting one, far below 1, so the upper bound stays well above the target but falls.
    at_12h, at_24h = (Quantity.parse(u) for u in uppers)
    assert Quantity.parse("1168m") < at_24h < at_12h


def _recommender_settings(flags: Mapping[str, Any]) -> RecommenderSettings:
    """The recommender's settings from flags written as in a scenario."""
    spec = by_name("vpa-recommender")
    assert spec is not None
    settings: RecommenderSettings = component_settings(spec, flags)
    return settings


async def test_a_vpa_deleted_while_the_loop_works_is_not_an_error(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # The loop's informers still hold the VPA when its status PATCH meets 404: the object is
    # gone, which is not an error (nothing is written, nothing logged at error level).
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    target = str(cluster.api.store.resource_version)
    for _ in range(100):
        cluster.api.bookmark_watches()
        if await loop.cache.wait_for_resource_version(target, within=0.1):
            break
    cluster.api.store.delete(VERTICAL_POD_AUTOSCALERS, "web", NAMESPACE)
    caplog.set_level(logging.INFO)
    await loop.run_once(cluster.now)
    assert loop.status_writes == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    gone = [r for r in caplog.records if r.getMessage().startswith("VPA object is gone")]
    assert len(gone) == 1
    assert gone[0].levelno == logging.INFO
