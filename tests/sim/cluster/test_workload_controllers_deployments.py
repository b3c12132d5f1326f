"""Deployments and their ReplicaSets: what they create (names, labels, annotations, owner
references, pod indexes), status and conditions, scaling through the scale subresource, and
replacing deleted or evicted pods. Expected values are the deployment and replicaset
controllers' documented behaviour."""

from __future__ import annotations

from typing import Any

from kubernetes.aio import client, config

from kubescale.kube.resources import DEPLOYMENTS, PODS, REPLICA_SETS
from kubescale.sim.cluster.usage_models import WORKLOAD_LABEL
from tests.sim.cluster.test_workload_controllers import (
    SimCluster,
    cluster,
    condition,
    indexes,
    web_deployment,
)

__all__ = ["cluster"]


async def test_deployment_creates_a_replica_set_and_labelled_owned_pods(
    cluster: SimCluster,
) -> None:
    d = cluster.create(web_deployment(replicas=3))
    await cluster.controllers_only()
    [rs] = cluster.owned(d, REPLICA_SETS)
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": d["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert rs["spec"]["replicas"] == 3
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", "pod-template-hash": pod_hash}}
    assert rs["metadata"]["annotations"] == {
        "deployment.kubernetes.io/revision": "1",
        "deployment.kubernetes.io/desired-replicas": "3",
        "deployment.kubernetes.io/max-replicas": "4",  # 3 + ceil(25% of 3)
    }
    pods = cluster.pods()
    assert len(pods) == 3
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith(f"web-{pod_hash}-")
        assert meta["labels"] == {
            "app": "web",
            "pod-template-hash": pod_hash,
            WORKLOAD_LABEL: "web",
        }
        assert meta["annotations"]["team"] == "blue"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs["metadata"]["name"],
                "uid": rs["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert pod["spec"]["containers"] == [{"name": "app", "image": "nginx:1"}]
    assert indexes(pods) == [0, 1, 2]
    assert cluster.get(DEPLOYMENTS, "web")["metadata"]["annotations"] == {
        "deployment.kubernetes.io/revision": "1"
    }


async def test_status_follows_the_pods_and_the_rollout_completes(cluster: SimCluster) -> None:
    cluster.create(web_deployment(replicas=2))
    await cluster.step()  # controllers create, the kubelet starts the pods
    status = cluster.get(DEPLOYMENTS, "web")["status"]
    assert status.get("readyReplicas", 0) == 0  # the kubelet ran after the controllers
    await cluster.step()
    d = cluster.get(DEPLOYMENTS, "web")
    status = d["status"]
    assert {k: status[k] for k in ("replicas", "updatedReplicas", "readyReplicas")} == {
        "replicas": 2,
        "updatedReplicas": 2,
        "readyReplicas": 2,
    }
    assert status["availableReplicas"] == 2
    assert status["unavailableReplicas"] == 0
    assert status["observedGeneration"] == d["metadata"]["generation"]
    available = condition(d, "Available")
    assert (available["status"], available["reason"], available["message"]) == (
        "True",
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )
    [rs] = cluster.owned(d, REPLICA_SETS)
    progressing = condition(d, "Progressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "True",
        "NewReplicaSetAvailable",
        f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.',
    )
    assert rs["status"] == {
        "replicas": 2,
        "fullyLabeledReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "observedGeneration": 1,
    }


async def test_the_scale_subresource_changes_the_pod_count(cluster: SimCluster) -> None:
    cluster.create(web_deployment(replicas=2))
    await cluster.step(2)
    configuration_ = client.Configuration()
    load: Any = config.load_kube_config_from_dict
    await load(cluster.api.kubeconfig(), client_configuration=configuration_)
    async with client.ApiClient(configuration=configuration_) as api_client:
        apps = client.AppsV1Api(api_client)
        await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
        await cluster.step()
        assert len(cluster.active_pods()) == 5
        assert indexes(cluster.active_pods()) == [0, 1, 2, 3, 4]
        await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 1}})
        await cluster.step()
        assert len(cluster.pods()) == 1
        await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    await cluster.step(2)
    assert indexes(cluster.active_pods()) == [0, 1, 2]  # freed indexes are reused
    d = cluster.get(DEPLOYMENTS, "web")
    assert d["status"]["replicas"] == d["status"]["availableReplicas"] == 3


async def test_a_deleted_or_evicted_pod_is_replaced(cluster: SimCluster) -> None:
    cluster.create(web_deployment(replicas=3))
    await cluster.step(2)
    victim = cluster.pods()[0]["metadata"]["name"]
    cluster.api.store.delete(PODS, victim, "default")  # graceful: the pod is bound
    assert cluster.get(PODS, victim)["metadata"]["deletionTimestamp"]
    await cluster.controllers_only()
    active = cluster.active_pods()
    assert len(active) == 3
    assert victim not in {p["metadata"]["name"] for p in active}
    assert len(cluster.pods()) == 4  # the replacement is made while the old pod terminates
    cluster.kubelet.step(cluster.clock.now())
    configuration_ = client.Configuration()
    load: Any = config.load_kube_config_from_dict
    await load(cluster.api.kubeconfig(), client_configuration=configuration_)
    evicted = cluster.active_pods()[1]["metadata"]["name"]
    eviction: Any = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": evicted}}
    async with client.ApiClient(configuration=configuration_) as api_client:
        await client.CoreV1Api(api_client).create_namespaced_pod_eviction(
            evicted, "default", eviction
        )
    await cluster.step()
    names = {p["metadata"]["name"] for p in cluster.active_pods()}
    assert len(names) == 3
    assert evicted not in names


async def test_min_ready_seconds_delays_availability_without_other_events(
    cluster: SimCluster,
) -> None:
    cluster.create(web_deployment(replicas=2, minReadySeconds=150))
    await cluster.step(2)
    d = cluster.get(DEPLOYMENTS, "web")
    assert d["status"]["readyReplicas"] == 2
    assert d["status"].get("availableReplicas", 0) == 0
    assert condition(d, "Available")["reason"] == "MinimumReplicasUnavailable"
    await cluster.step(2)  # 150 s after Ready; nothing else changed
    d = cluster.get(DEPLOYMENTS, "web")
    assert d["status"]["availableReplicas"] == 2
    assert condition(d, "Available")["status"] == "True"


async def test_a_rollout_without_progress_times_out(cluster: SimCluster) -> None:
    cluster.kubelet.stuck.add("nginx:broken")
    cluster.create(web_deployment(replicas=1, image="nginx:broken", progressDeadlineSeconds=300))
    await cluster.step()
    [rs] = cluster.owned(cluster.get(DEPLOYMENTS, "web"), REPLICA_SETS)
    progressing = condition(cluster.get(DEPLOYMENTS, "web"), "Progressing")
    # created (NewReplicaSetCreated), then its pod was made in the same step: progress
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "True",
        "ReplicaSetUpdated",
        f'ReplicaSet "{rs["metadata"]["name"]}" is progressing.',
    )
    await cluster.step(5)  # 300 s after the last progress: not yet over the deadline
    assert condition(cluster.get(DEPLOYMENTS, "web"), "Progressing")["status"] == "True"
    await cluster.step()
    progressing = condition(cluster.get(DEPLOYMENTS, "web"), "Progressing")
    assert (progressing["status"], progressing["reason"], progressing["message"]) == (
        "False",
        "ProgressDeadlineExceeded",
        f'ReplicaSet "{rs["metadata"]["name"]}" has timed out progressing.',
    )
