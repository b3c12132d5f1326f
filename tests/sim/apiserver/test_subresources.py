"""Subresources: status isolation, scale, eviction against PodDisruptionBudgets, binding, resize."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import POD_DISRUPTION_BUDGETS, PODS
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.sim.apiserver.conftest import (
    json_of,
    loose,
    pod_manifest,
    status_of,
)

PDB = functools.partial(
    builders.pdbs.pdb, namespace=None, min_available=2, match_labels={"app": "web"}
)

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


# ---------------------------------------------------------------------------------- status


async def test_status_and_spec_are_written_separately(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    await apps.create_namespaced_deployment(
        "default",
        builders.workloads.deployment(
            name="web",
            namespace=None,
            replicas=1,
            match_labels={"app": "web"},
            template=builders.workloads.pod_template(
                labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
            ),
        ),
    )
    both = {"spec": {"replicas": 5}, "status": {"replicas": 7}}
    main = await apps.patch_namespaced_deployment("web", "default", both)
    assert (main.spec.replicas, main.status.replicas) == (5, None)  # status ignored
    status = await apps.patch_namespaced_deployment_status(
        "web", "default", {"spec": {"replicas": 9}, "status": {"replicas": 7}}
    )
    assert (status.spec.replicas, status.status.replicas) == (5, 7)  # spec ignored
    read = await apps.read_namespaced_deployment_status("web", "default")
    assert read.status.replicas == 7


async def test_status_update_with_stale_resource_version_conflicts(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    created = await json_of(
        await apps.create_namespaced_deployment_without_preload_content(
            "default",
            builders.workloads.deployment(
                name="web",
                namespace=None,
                replicas=1,
                match_labels={"app": "web"},
                template=builders.workloads.pod_template(
                    labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
                ),
            ),
        )
    )
    await apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 2}})
    created["status"] = {"replicas": 1}
    with pytest.raises(ApiException) as caught:
        await apps.replace_namespaced_deployment_status("web", "default", created)
    assert caught.value.status == 409


# ----------------------------------------------------------------------------------- scale


async def test_scale_get_and_put(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    await apps.create_namespaced_deployment(
        "default",
        builders.workloads.deployment(
            name="web",
            namespace=None,
            replicas=2,
            match_labels={"app": "web"},
            template=builders.workloads.pod_template(
                labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
            ),
        ),
    )
    await apps.patch_namespaced_deployment_status("web", "default", {"status": {"replicas": 2}})
    scale = await json_of(
        await apps.read_namespaced_deployment_scale_without_preload_content("web", "default")
    )
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=web"}
    scale["spec"]["replicas"] = 6
    updated = await apps.replace_namespaced_deployment_scale("web", "default", scale)
    assert updated.spec.replicas == 6
    deployment = await apps.read_namespaced_deployment("web", "default")
    assert deployment.spec.replicas == 6
    assert deployment.metadata.generation == 2
    # the Scale's resourceVersion is the deployment's: a stale one conflicts
    with pytest.raises(ApiException) as caught:
        await apps.replace_namespaced_deployment_scale("web", "default", scale)
    assert caught.value.status == 409


async def test_scale_patch_and_negative_replicas(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    await apps.create_namespaced_stateful_set(
        "default",
        {
            "metadata": {"name": "db"},
            "spec": {
                "selector": {
                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]
                },
                "serviceName": "db",
                "template": {
                    "metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "db", "image": "postgres"}]},
                },
            },
        },
    )
    patched = await apps.patch_namespaced_stateful_set_scale(
        "db", "default", {"spec": {"replicas": 3}}
    )
    assert patched.spec.replicas == 3
    assert patched.status.selector == "app in (db)"
    with pytest.raises(ApiException) as caught:
        await apps.patch_namespaced_stateful_set_scale("db", "default", {"spec": {"replicas": -1}})
    assert caught.value.status == 422


async def test_scale_of_a_machine_deployment(api: Any) -> None:
    custom = loose(client.CustomObjectsApi(api))
    group, version, plural = "cluster.x-k8s.io", "v1beta1", "machinedeployments"
    await custom.create_namespaced_custom_object(
        group,
        version,
        "default",
        plural,
        {
            "apiVersion": f"{group}/{version}",
            "kind": "MachineDeployment",
            "metadata": {"name": "md"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"pool": "a"}}},
        },
    )
    scale = await custom.get_namespaced_custom_object_scale(group, version, "default", plural, "md")
    assert scale["spec"] == {"replicas": 1}
    assert scale["status"]["selector"] == "pool=a"
    await custom.patch_namespaced_custom_object_scale(
        group,
        version,
        "default",
        plural,
        "md",
        {"spec": {"replicas": 4}},
        _content_type="application/merge-patch+json",
    )
    md = await custom.get_namespaced_custom_object(group, version, "default", plural, "md")
    assert md["spec"]["replicas"] == 4


# -------------------------------------------------------------------------------- eviction


def running_pod(name: str, labels: dict[str, str], *, ready: bool = True) -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}


async def make_running_pod(
    core: Any, name: str, labels: dict[str, str], *, ready: bool = True
) -> None:
    await core.create_namespaced_pod(
        "default", pod_manifest(name=name, labels=labels, node_name="n1")
    )
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}
    await core.patch_namespaced_pod_status(name, "default", {"status": status})


async def set_pdb_status(policy: Any, name: str, *, allowed: int) -> None:
    current = await policy.read_namespaced_pod_disruption_budget(name, "default")
    await policy.patch_namespaced_pod_disruption_budget_status(
        name,
        "default",
        {
            "status": {
                "observedGeneration": current.metadata.generation,
                "disruptionsAllowed": allowed,
                "currentHealthy": 2 + allowed,
                "desiredHealthy": 2,
                "expectedPods": 3,
            }
        },
    )


def eviction(name: str, **delete_options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    if delete_options:
        body["deleteOptions"] = delete_options
    return body


async def test_eviction_blocked_then_allowed_by_the_budget(
    api: Any, server: ApiServer, clock: VirtualClock
) -> None:
    core, policy = loose(client.CoreV1Api(api)), loose(client.PolicyV1Api(api))
    await make_running_pod(core, "web-1", {"app": "web"})
    await policy.create_namespaced_pod_disruption_budget("default", PDB(name="web-pdb"))
    await set_pdb_status(policy, "web-pdb", allowed=0)
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    status = status_of(caught.value)
    assert caught.value.status == 429
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == VIOLATION
    assert status["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
        }
    ]
    assert server.store.peek(PODS, "web-1", "default") is not None

    await set_pdb_status(policy, "web-pdb", allowed=1)
    await clock.advance(5)
    response = await core.create_namespaced_pod_eviction_without_preload_content(
        "web-1", "default", eviction("web-1", gracePeriodSeconds=0)
    )
    assert response.status == 201
    assert (await json_of(response))["status"] == "Success"
    assert server.store.peek(PODS, "web-1", "default") is None
    budget = server.store.get(POD_DISRUPTION_BUDGETS, "web-pdb", "default")
    assert budget["status"]["disruptionsAllowed"] == 0
    assert budget["status"]["disruptedPods"] == {"web-1": "2026-01-01T00:00:05Z"}


async def test_eviction_deletes_gracefully_and_marks_the_pod(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    await make_running_pod(core, "web-1", {"app": "web"})
    await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    pod = server.store.get(PODS, "web-1", "default")  # no budget: a plain graceful delete
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert target[0]["reason"] == "EvictionByEvictionAPI"


async def test_unprocessed_budget_asks_to_retry(api: Any) -> None:
    core, policy = loose(client.CoreV1Api(api)), loose(client.PolicyV1Api(api))
    await make_running_pod(core, "web-1", {"app": "web"})
    await policy.create_namespaced_pod_disruption_budget("default", PDB(name="web-pdb"))
    with pytest.raises(ApiException) as caught:  # status.observedGeneration 0 < generation 1
        await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    status = status_of(caught.value)
    assert caught.value.status == 429
    assert status["details"]["retryAfterSeconds"] == 10
    assert loose(caught.value).headers["Retry-After"] == "10"
    assert "is still being processed by the server" in status["details"]["causes"][0]["message"]


async def test_pending_pod_is_evicted_without_consulting_budgets(
    api: Any, server: ApiServer
) -> None:
    core, policy = loose(client.CoreV1Api(api)), loose(client.PolicyV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="web-1", labels={"app": "web"}))
    await policy.create_namespaced_pod_disruption_budget("default", PDB(name="web-pdb"))
    await set_pdb_status(policy, "web-pdb", allowed=0)
    await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    assert server.store.peek(PODS, "web-1", "default") is None


async def test_unready_pod_with_healthy_budget_does_not_spend_it(
    api: Any, server: ApiServer
) -> None:
    core, policy = loose(client.CoreV1Api(api)), loose(client.PolicyV1Api(api))
    await make_running_pod(core, "web-1", {"app": "web"}, ready=False)
    await policy.create_namespaced_pod_disruption_budget("default", PDB(name="web-pdb"))
    await set_pdb_status(policy, "web-pdb", allowed=0)  # currentHealthy 2 >= desiredHealthy 2
    await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    budget = server.store.get(POD_DISRUPTION_BUDGETS, "web-pdb", "default")
    assert budget["status"]["disruptionsAllowed"] == 0
    assert "disruptedPods" not in budget["status"]


async def test_two_budgets_for_one_pod_is_an_internal_error(api: Any) -> None:
    core, policy = loose(client.CoreV1Api(api)), loose(client.PolicyV1Api(api))
    await make_running_pod(core, "web-1", {"app": "web"})
    for name in ("a", "b"):
        await policy.create_namespaced_pod_disruption_budget("default", PDB(name=name))
        await set_pdb_status(policy, name, allowed=1)
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod_eviction("web-1", "default", eviction("web-1"))
    assert caught.value.status == 500
    assert status_of(caught.value)["message"] == (
        "Internal error occurred: This pod has more than one PodDisruptionBudget, which the "
        "eviction subresource does not support."
    )


# --------------------------------------------------------------------------------- binding


async def test_binding_assigns_a_node_once(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    response = await core.create_namespaced_pod_binding_without_preload_content(
        "p", "default", binding
    )
    assert response.status == 201
    response.release()
    pod = await core.read_namespaced_pod("p", "default")
    assert pod.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod_binding("p", "default", binding)
    assert caught.value.status == 409
    assert 'pod p is already assigned to node "node-1"' in status_of(caught.value)["message"]


async def test_binding_replaces_an_unschedulable_condition_whole(api: Any) -> None:
    """podutil.UpdatePodCondition: reason and message of PodScheduled=False do not survive."""
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="q"))
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient cpu.",
        "lastTransitionTime": "2025-06-01T00:00:00Z",
    }
    await core.patch_namespaced_pod_status(
        "q", "default", {"status": {"conditions": [unschedulable]}}
    )
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "q"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    bound = await core.create_namespaced_pod_binding_without_preload_content(
        "q", "default", binding
    )
    assert bound.status == 201
    bound.release()
    raw = await core.read_namespaced_pod_without_preload_content("q", "default")
    conditions = (await raw.json())["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [("PodScheduled", "True")]
    assert "reason" not in conditions[0]
    assert "message" not in conditions[0]
    assert conditions[0]["lastTransitionTime"] != "2025-06-01T00:00:00Z"  # the status changed


# ---------------------------------------------------------------------------------- resize


async def test_resize_changes_only_container_resources(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    containers = [
        {
            "name": "app",
            "image": "nginx",
            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}},
        }
    ]
    await core.create_namespaced_pod("default", pod_manifest(name="p", containers=containers))
    resized = await core.patch_namespaced_pod_resize(
        "p",
        "default",
        {
            "metadata": {"labels": {"ignored": "yes"}},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "ignored",
                        "resources": {"requests": {"cpu": "150m"}, "limits": {"cpu": "300m"}},
                    }
                ]
            },
        },
    )
    container = resized.spec.containers[0]
    assert container.resources.requests == {"cpu": "150m"}
    assert container.resources.limits == {"cpu": "300m"}
    assert container.image == "nginx"
    assert resized.metadata.labels in (None, {})
    assert resized.metadata.generation == 2


async def test_resize_may_not_change_the_qos_class(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    containers = [
        {
            "name": "app",
            "image": "nginx",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
        }
    ]
    await core.create_namespaced_pod("default", pod_manifest(name="p", containers=containers))
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod_resize(
            "p",
            "default",
            {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}},
        )
    assert caught.value.status == 422
    assert "Pod QOS Class may not change" in status_of(caught.value)["message"]
