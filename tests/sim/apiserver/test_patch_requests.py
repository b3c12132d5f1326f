"""PATCH over HTTP: the three content types, 415 for a strategic merge on a custom resource.

The patch algorithms themselves are PATCHING's (tested in test_patching.py); these tests check
that the server picks the algorithm from the Content-Type, applies it to the stored object and
stores the result as an update (preconditions, generation, status split).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.sim.apiserver.conftest import loose, pod_manifest, status_of

VPA = {
    "apiVersion": "autoscaling.k8s.io/v1",
    "kind": "VerticalPodAutoscaler",
    "metadata": {"name": "web"},
    "spec": {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "updatePolicy": {"updateMode": "Off"},
    },
}


async def test_json_patch(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p", labels={"a": "1"}))
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        [
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
        ],
    )
    assert patched.metadata.labels == {"b": "2"}


async def test_failing_json_patch_test_is_unprocessable(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p"))
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod(
            "p", "default", [{"op": "test", "path": "/spec/containers/0/name", "value": "x"}]
        )
    assert caught.value.status == 422
    assert status_of(caught.value)["reason"] == "Invalid"


async def test_merge_patch_replaces_lists(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    body = builders.workloads.deployment(
        name="web",
        namespace=None,
        replicas=1,
        match_labels={"app": "web"},
        template=builders.workloads.pod_template(
            labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
        ),
    )
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "envoy"})
    await apps.create_namespaced_deployment("default", body)
    patched = await apps.patch_namespaced_deployment(
        "web",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}},
        _content_type="application/merge-patch+json",
    )
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("app", "nginx:2")]


async def test_strategic_merge_patch_merges_containers_by_name(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    body = builders.workloads.deployment(
        name="web",
        namespace=None,
        replicas=1,
        match_labels={"app": "web"},
        template=builders.workloads.pod_template(
            labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
        ),
    )
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "envoy"})
    await apps.create_namespaced_deployment("default", body)
    patched = await apps.patch_namespaced_deployment(  # the client's default for a dict body
        "web",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "envoy:2"}]}}}},
    )
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("app", "nginx"), ("side", "envoy:2")]
    assert patched.metadata.generation == 2


async def test_strategic_merge_on_a_custom_resource_is_unsupported(api: Any) -> None:
    custom = loose(client.CustomObjectsApi(api))
    await custom.create_namespaced_custom_object(
        "autoscaling.k8s.io", "v1", "default", "verticalpodautoscalers", VPA
    )
    with pytest.raises(ApiException) as caught:
        await custom.patch_namespaced_custom_object(
            "autoscaling.k8s.io",
            "v1",
            "default",
            "verticalpodautoscalers",
            "web",
            {"spec": {"updatePolicy": {"updateMode": "Auto"}}},
            _content_type="application/strategic-merge-patch+json",
        )
    status = status_of(caught.value)
    assert caught.value.status == 415
    assert status["reason"] == "UnsupportedMediaType"
    assert "application/merge-patch+json" in status["message"]
    merged = await custom.patch_namespaced_custom_object(
        "autoscaling.k8s.io",
        "v1",
        "default",
        "verticalpodautoscalers",
        "web",
        {"spec": {"updatePolicy": {"updateMode": "Auto"}}},
        _content_type="application/merge-patch+json",
    )
    assert merged["spec"]["updatePolicy"] == {"updateMode": "Auto"}


async def test_apply_patch_is_unsupported(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p"))
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod(
            "p",
            "default",
            {"metadata": {"labels": {"a": "1"}}},
            _content_type="application/apply-patch+yaml",
            field_manager="test",
        )
    assert caught.value.status == 415


async def test_patch_with_stale_resource_version_conflicts(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    created = await core.create_namespaced_pod("default", pod_manifest(name="p"))
    await core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod(
            "p",
            "default",
            {"metadata": {"resourceVersion": created.metadata.resource_version, "labels": {}}},
        )
    assert caught.value.status == 409


async def test_patch_of_a_missing_object_is_not_found(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).patch_namespaced_pod(
            "ghost", "default", {"metadata": {}}
        )
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'pods "ghost" not found'
