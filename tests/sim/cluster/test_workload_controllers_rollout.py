"""Deployment rollouts: RollingUpdate within maxSurge/maxUnavailable, Recreate, proportional
scaling during a rollout (the example of the Kubernetes documentation), revision history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubescale.kube.resources import DEPLOYMENTS, REPLICA_SETS
from kubescale.sim.cluster.workload_pods import is_ready
from tests.sim.cluster.test_workload_controllers import (
    SimCluster,
    cluster,
    condition,
    web_deployment,
    with_image,
)

__all__ = ["cluster"]


def replica_sets(cluster: SimCluster) -> dict[str, dict[str, Any]]:
    """The Deployment's ReplicaSets by image."""
    d = cluster.get(DEPLOYMENTS, "web")
    return {
        rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs
        for rs in cluster.owned(d, REPLICA_SETS)
    }


def image_counts(cluster: SimCluster, *, ready_only: bool = False) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in cluster.active_pods():
        if ready_only and not is_ready(pod):
            continue
        image = pod["spec"]["containers"][0]["image"]
        counts[image] = counts.get(image, 0) + 1
    return counts


@dataclass(frozen=True)
class Rollout:
    replicas: int
    surge: int | str | None
    unavailable: int | str | None
    max_total: int
    """replicas + maxSurge: the most ReplicaSet replicas (and pods) at any time"""
    min_available: int
    """replicas - maxUnavailable: the fewest available pods at any time"""


@pytest.mark.parametrize(
    "case",
    [
        Rollout(4, None, None, 5, 3),  # defaults 25%/25%: surge ceil(1) = 1, unavailable 1
        Rollout(4, 1, 1, 5, 3),
        Rollout(3, 0, 1, 3, 2),
        Rollout(10, "50%", 0, 15, 10),
        Rollout(2, 1, 0, 3, 2),
        Rollout(5, "10%", "10%", 6, 5),  # surge ceil(0.5) = 1, unavailable floor(0.5) = 0
        Rollout(3, 0, 0, 3, 2),  # both zero: unavailability becomes 1
    ],
    ids=str,
)
async def test_rolling_update_stays_within_surge_and_unavailability(
    cluster: SimCluster, case: Rollout
) -> None:
    replicas, surge, unavailable = case.replicas, case.surge, case.unavailable
    max_total, min_available = case.max_total, case.min_available
    rolling: dict[str, Any] = {}
    if surge is not None:
        rolling["maxSurge"] = surge
    if unavailable is not None:
        rolling["maxUnavailable"] = unavailable
    strategy = {"type": "RollingUpdate", "rollingUpdate": rolling}
    cluster.create(web_deployment(replicas=replicas, strategy=strategy))
    await cluster.step(2)
    assert image_counts(cluster, ready_only=True) == {"nginx:1": replicas}
    cluster.api.store.update(with_image(cluster.get(DEPLOYMENTS, "web"), "nginx:2"))
    for _ in range(4 * replicas + 4):
        await cluster.controllers_only()
        wanted = sum(rs["spec"]["replicas"] for rs in replica_sets(cluster).values())
        assert wanted <= max_total
        assert len(cluster.active_pods()) <= max_total
        assert sum(image_counts(cluster, ready_only=True).values()) >= min_available
        cluster.kubelet.step(cluster.clock.now())
    assert image_counts(cluster) == {"nginx:2": replicas}
    rses = replica_sets(cluster)
    assert rses["nginx:1"]["spec"]["replicas"] == 0
    assert rses["nginx:2"]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    d = cluster.get(DEPLOYMENTS, "web")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert d["status"]["updatedReplicas"] == d["status"]["availableReplicas"] == replicas
    assert condition(d, "Progressing")["reason"] == "NewReplicaSetAvailable"


async def test_recreate_stops_every_old_pod_before_starting_new_ones(cluster: SimCluster) -> None:
    cluster.create(web_deployment(replicas=3, strategy={"type": "Recreate"}))
    await cluster.step(2)
    cluster.api.store.update(with_image(cluster.get(DEPLOYMENTS, "web"), "nginx:2"))
    seen: list[dict[str, int]] = []
    for _ in range(5):
        await cluster.step()
        counts = image_counts(cluster)
        seen.append(counts)
        assert len(counts) <= 1, seen  # never old and new side by side
    assert seen[-1] == {"nginx:2": 3}
    assert {} in seen  # there was a moment with no pods at all


async def test_proportional_scaling_matches_the_documented_example(cluster: SimCluster) -> None:
    """kubernetes.io Deployments, "Proportional scaling": 10 replicas, maxSurge 3, maxUnavailable
    2; a rollout to an image that never gets ready stalls at 8 old + 5 new; scaling to 15 adds 3
    to the old ReplicaSet and 2 to the new one (11 and 7)."""
    cluster.kubelet.stuck.add("nginx:sometag")
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}
    cluster.create(web_deployment(replicas=10, strategy=strategy))
    await cluster.step(2)
    cluster.api.store.update(with_image(cluster.get(DEPLOYMENTS, "web"), "nginx:sometag"))
    await cluster.step(3)
    sizes = {image: rs["spec"]["replicas"] for image, rs in replica_sets(cluster).items()}
    assert sizes == {"nginx:1": 8, "nginx:sometag": 5}
    d = cluster.get(DEPLOYMENTS, "web")
    d["spec"]["replicas"] = 15
    cluster.api.store.update(d)
    await cluster.step()
    sizes = {image: rs["spec"]["replicas"] for image, rs in replica_sets(cluster).items()}
    assert sizes == {"nginx:1": 11, "nginx:sometag": 7}
    for rs in replica_sets(cluster).values():
        annotations = rs["metadata"]["annotations"]
        assert annotations["deployment.kubernetes.io/desired-replicas"] == "15"
        assert annotations["deployment.kubernetes.io/max-replicas"] == "18"


async def test_a_scale_up_without_a_rollout_goes_to_the_one_active_replica_set(
    cluster: SimCluster,
) -> None:
    cluster.create(web_deployment(replicas=2))
    await cluster.step(2)
    d = cluster.get(DEPLOYMENTS, "web")
    d["spec"]["replicas"] = 6
    cluster.api.store.update(d)
    await cluster.controllers_only()
    [rs] = replica_sets(cluster).values()
    assert rs["spec"]["replicas"] == 6
    assert len(cluster.active_pods()) == 6


async def test_old_replica_sets_beyond_the_history_limit_are_deleted(cluster: SimCluster) -> None:
    cluster.create(web_deployment(replicas=1, revisionHistoryLimit=1))
    await cluster.step(2)
    for version in (2, 3, 4):
        cluster.api.store.update(with_image(cluster.get(DEPLOYMENTS, "web"), f"nginx:{version}"))
        await cluster.step(4)
    rses = replica_sets(cluster)
    assert sorted(rses) == ["nginx:3", "nginx:4"]  # the new one and one old
    assert rses["nginx:3"]["spec"]["replicas"] == 0


async def test_a_rollback_reuses_the_old_replica_set_with_a_new_revision(
    cluster: SimCluster,
) -> None:
    cluster.create(web_deployment(replicas=2))
    await cluster.step(2)
    cluster.api.store.update(with_image(cluster.get(DEPLOYMENTS, "web"), "nginx:2"))
    await cluster.step(4)
    cluster.api.store.update(with_image(cluster.get(DEPLOYMENTS, "web"), "nginx:1"))
    await cluster.step(4)
    rses = replica_sets(cluster)
    assert len(rses) == 2
    assert rses["nginx:1"]["spec"]["replicas"] == 2
    assert rses["nginx:1"]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert image_counts(cluster) == {"nginx:1": 2}
