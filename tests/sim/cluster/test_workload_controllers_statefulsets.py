"""StatefulSets: ordinal names, OrderedReady creation and deletion, Parallel, claims, updates."""

from __future__ import annotations

import functools
from typing import Any

from kubescale.kube.resources import PERSISTENT_VOLUME_CLAIMS, PODS, STATEFUL_SETS
from kubescale.sim.cluster.usage_models import POD_INDEX_ANNOTATION, WORKLOAD_LABEL
from tests import builders
from tests.sim.cluster.test_workload_controllers import SimCluster, cluster, with_image

__all__ = ["cluster"]


DB = {"app": "db"}
build_stateful_set = functools.partial(
    builders.workloads.stateful_set,
    name="db",
    match_labels=DB,
    template=builders.workloads.pod_template(
        labels=DB, containers=[builders.pods.container("postgres", image="postgres:15")]
    ),
)


def db_spec(**spec: Any) -> dict[str, Any]:
    """StatefulSet ``db``'s further spec fields: its headless Service, then ``spec``."""
    return {"serviceName": "db-headless", **spec}


def names(cluster: SimCluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.active_pods())


async def test_ordered_ready_creates_one_pod_at_a_time_in_ordinal_order(
    cluster: SimCluster,
) -> None:
    sts = cluster.create(build_stateful_set(replicas=3, spec=db_spec()))
    seen = []
    for _ in range(4):
        await cluster.step()
        seen.append(names(cluster))
    assert seen == [["db-0"], ["db-0", "db-1"], ["db-0", "db-1", "db-2"], ["db-0", "db-1", "db-2"]]
    for ordinal, pod in enumerate(sorted(cluster.pods(), key=lambda p: p["metadata"]["name"])):
        meta = pod["metadata"]
        assert meta["labels"]["statefulset.kubernetes.io/pod-name"] == f"db-{ordinal}"
        assert meta["labels"]["apps.kubernetes.io/pod-index"] == str(ordinal)
        assert meta["labels"][WORKLOAD_LABEL] == "db"
        assert meta["labels"]["controller-revision-hash"].startswith("db-")
        assert meta["annotations"][POD_INDEX_ANNOTATION] == str(ordinal)
        assert meta["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]
        assert pod["spec"]["hostname"] == f"db-{ordinal}"
        assert pod["spec"]["subdomain"] == "db-headless"
    status = cluster.get(STATEFUL_SETS, "db")["status"]
    assert status["replicas"] == status["readyReplicas"] == status["updatedReplicas"] == 3
    assert status["currentRevision"] == status["updateRevision"]


async def test_an_unready_pod_blocks_the_next_ordinal(cluster: SimCluster) -> None:
    cluster.kubelet.stuck.add("postgres:15")
    cluster.create(build_stateful_set(replicas=3, spec=db_spec()))
    await cluster.step(3)
    assert names(cluster) == ["db-0"]


async def test_parallel_creates_every_pod_at_once(cluster: SimCluster) -> None:
    cluster.create(build_stateful_set(replicas=3, spec=db_spec(podManagementPolicy="Parallel")))
    await cluster.controllers_only()
    assert names(cluster) == ["db-0", "db-1", "db-2"]


async def test_scale_down_removes_the_highest_ordinal_first_one_at_a_time(
    cluster: SimCluster,
) -> None:
    cluster.create(build_stateful_set(replicas=4, spec=db_spec()))
    await cluster.step(5)
    sts = cluster.get(STATEFUL_SETS, "db")
    sts["spec"]["replicas"] = 1
    cluster.api.store.update(sts)
    seen = []
    for _ in range(4):
        await cluster.step()
        seen.append(names(cluster))
    assert seen == [
        ["db-0", "db-1", "db-2"],
        ["db-0", "db-1"],
        ["db-0"],
        ["db-0"],
    ]


async def test_a_deleted_pod_comes_back_with_its_name(cluster: SimCluster) -> None:
    cluster.create(build_stateful_set(replicas=2, spec=db_spec()))
    await cluster.step(3)
    cluster.api.store.delete(PODS, "db-1", "default")
    await cluster.step(2)
    assert names(cluster) == ["db-0", "db-1"]


async def test_volume_claim_templates_become_claims_mounted_by_the_pods(
    cluster: SimCluster,
) -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    cluster.create(build_stateful_set(replicas=2, spec=db_spec(volumeClaimTemplates=[claim])))
    await cluster.step(3)
    claims = cluster.api.store.list(PERSISTENT_VOLUME_CLAIMS, namespace="default")
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-db-0", "data-db-1"]
    assert claims[0]["metadata"]["labels"] == {"app": "db"}
    assert claims[0]["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    assert cluster.get(PODS, "db-1")["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}
    ]


async def test_rolling_update_replaces_pods_from_the_highest_ordinal(cluster: SimCluster) -> None:
    cluster.create(build_stateful_set(replicas=3, spec=db_spec()))
    await cluster.step(4)
    old_revision = cluster.get(STATEFUL_SETS, "db")["status"]["updateRevision"]
    cluster.api.store.update(with_image(cluster.get(STATEFUL_SETS, "db"), "postgres:16"))
    order: list[str] = []
    for _ in range(8):
        await cluster.step()
        for pod in cluster.active_pods():
            image = pod["spec"]["containers"][0]["image"]
            if image == "postgres:16" and pod["metadata"]["name"] not in order:
                order.append(pod["metadata"]["name"])
    assert order == ["db-2", "db-1", "db-0"]
    status = cluster.get(STATEFUL_SETS, "db")["status"]
    assert status["updateRevision"] != old_revision
    assert status["currentRevision"] == status["updateRevision"]
    assert status["updatedReplicas"] == status["currentReplicas"] == 3


async def test_a_partition_keeps_the_lower_ordinals(cluster: SimCluster) -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    cluster.create(build_stateful_set(replicas=3, spec=db_spec(updateStrategy=strategy)))
    await cluster.step(4)
    cluster.api.store.update(with_image(cluster.get(STATEFUL_SETS, "db"), "postgres:16"))
    await cluster.step(6)
    images = {
        p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in cluster.active_pods()
    }
    assert images == {"db-0": "postgres:15", "db-1": "postgres:15", "db-2": "postgres:16"}
