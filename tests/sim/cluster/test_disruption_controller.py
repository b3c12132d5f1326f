"""The simulated disruption controller: PodDisruptionBudget status as kube-controller-manager's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import DEPLOYMENTS, POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.storage import format_time
from kubescale.sim.cluster.disruption_controller import DisruptionController
from tests import builders

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _owner(kind: str, name: str) -> list[dict[str, Any]]:
    api_version = "apps/v1"
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
             "controller": True}]  # fmt: skip


async def _cluster(api: ApiServer, *, replicas: int, ready: int, spec: dict[str, Any]) -> None:
    api.store.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    })  # fmt: skip
    api.store.create({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-rs", "namespace": "default",
                     "ownerReferences": _owner("Deployment", "web")},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    })  # fmt: skip
    for index in range(replicas):
        created = api.store.create(
            builders.pods.pod(
                name=f"web-{index}",
                labels={"app": "web"},
                owner_references=_owner("ReplicaSet", "web-rs"),
                containers=[builders.pods.container(image="nginx")],
            )
        )
        status = "True" if index < ready else "False"
        created["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": status}],
        }
        api.store.update_status(created)
    api.store.create(builders.pdbs.pdb(name="web", match_labels={"app": "web"}, spec=spec))


@pytest.mark.parametrize(
    ("replicas", "ready", "spec", "want"),
    [
        # maxUnavailable 1 of 4 desired replicas → desired healthy 3; 4 Ready → 1 disruption
        (4, 4, {"maxUnavailable": 1}, (4, 3, 1)),
        (4, 3, {"maxUnavailable": 1}, (4, 3, 0)),
        # a percentage rounds up: 25% of 4 = 1 unavailable; 50% of 3 = 1.5 → 2 unavailable
        (4, 4, {"maxUnavailable": "25%"}, (4, 3, 1)),
        (3, 3, {"maxUnavailable": "50%"}, (3, 1, 2)),
        # minAvailable as an integer: expected = matched pods, desired = the integer
        (4, 4, {"minAvailable": 2}, (4, 2, 2)),
        # minAvailable 50% of 3 = 1.5 → 2 (rounded up)
        (3, 3, {"minAvailable": "50%"}, (3, 2, 1)),
        (2, 1, {"minAvailable": 2}, (2, 2, 0)),
    ],
)
async def test_status_from_pods_and_controllers(
    replicas: int, ready: int, spec: dict[str, Any], want: tuple[int, int, int]
) -> None:
    expected, desired, allowed = want  # expectedPods, desiredHealthy, disruptionsAllowed
    async with ApiServer(clock=VirtualClock(NOW), crd_dirs=[]) as api:
        await _cluster(api, replicas=replicas, ready=ready, spec=spec)
        await DisruptionController(api).step(NOW)
        status = api.store.get(POD_DISRUPTION_BUDGETS, "web", "default")["status"]
        assert (status["expectedPods"], status["desiredHealthy"]) == (expected, desired)
        assert (status["currentHealthy"], status["disruptionsAllowed"]) == (ready, allowed)
        (condition,) = status["conditions"]
        assert condition["status"] == ("True" if allowed else "False")


async def test_an_evicted_pod_stops_counting_until_the_deletion_timeout() -> None:
    async with ApiServer(clock=VirtualClock(NOW), crd_dirs=[]) as api:
        await _cluster(api, replicas=4, ready=4, spec={"maxUnavailable": 1})
        controller = DisruptionController(api)
        await controller.step(NOW)
        pdb = api.store.get(POD_DISRUPTION_BUDGETS, "web", "default")
        # As the eviction subresource does for a pod whose deletion it started:
        pdb["status"]["disruptedPods"] = {"web-0": format_time(NOW)}
        api.store.update_status(pdb)
        await controller.step(NOW + timedelta(seconds=30))
        status = api.store.get(POD_DISRUPTION_BUDGETS, "web", "default")["status"]
        assert (status["currentHealthy"], status["disruptionsAllowed"]) == (3, 0)
        await controller.step(NOW + timedelta(minutes=2, seconds=1))  # past DeletionTimeout
        status = api.store.get(POD_DISRUPTION_BUDGETS, "web", "default")["status"]
        assert (status["currentHealthy"], status["disruptionsAllowed"]) == (4, 1)
        assert "disruptedPods" not in status


async def test_a_quiet_step_writes_nothing() -> None:
    async with ApiServer(clock=VirtualClock(NOW), crd_dirs=[]) as api:
        await _cluster(api, replicas=2, ready=2, spec={"maxUnavailable": 1})
        controller = DisruptionController(api)
        await controller.step(NOW)
        before = api.store.resource_version
        await controller.step(NOW + timedelta(minutes=1))
        assert api.store.resource_version == before
        assert api.store.peek(DEPLOYMENTS, "web", "default") is not None
        assert len(api.store.list(PODS, namespace="default")) == 2
        assert api.store.peek(REPLICA_SETS, "web-rs", "default") is not None
