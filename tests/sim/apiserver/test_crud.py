"""CRUD through the real ``kubernetes.aio`` client: metadata, errors, generation, finalizers.

Expected values are kube-apiserver's documented behaviour: the Status messages of
``k8s.io/apimachinery/pkg/api/errors``, generation bumped only by changes outside metadata and
status, graceful pod deletion, finalizers keeping a deleted object until they are removed.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import CONFIG_MAPS, PODS
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.sim.apiserver.conftest import (
    json_of,
    loose,
    pod_manifest,
    status_of,
)

CONFLICT_MESSAGE = (
    'Operation cannot be fulfilled on configmaps "cfg": the object has been modified; please '
    "apply your changes to the latest version and try again"
)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


async def test_create_fills_server_metadata(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    before = await json_of(await core.list_namespaced_config_map_without_preload_content("default"))
    created = await json_of(
        await core.create_namespaced_config_map_without_preload_content(
            "default", configmap("cfg", a="1")
        )
    )
    meta = created["metadata"]
    assert meta["namespace"] == "default"
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z"  # the injected clock
    assert meta["generation"] == 1
    assert len(meta["uid"]) == 36
    assert int(meta["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    got = await core.read_namespaced_config_map("cfg", "default")
    assert got.data == {"a": "1"}
    assert got.metadata.resource_version == meta["resourceVersion"]


async def test_resource_version_is_global_and_increasing(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    versions = []
    for name in ("a", "b", "c"):
        created = await core.create_namespaced_config_map("default", configmap(name))
        versions.append(int(created.metadata.resource_version))
    apps = loose(client.AppsV1Api(api))
    deployment = await apps.create_namespaced_deployment(
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
    versions.append(int(deployment.metadata.resource_version))
    assert versions == sorted(versions)
    assert len(set(versions)) == 4


@pytest.mark.parametrize(
    ("namespace", "body", "code", "reason", "message"),
    [
        ("nope", configmap("cfg"), 404, "NotFound", 'namespaces "nope" not found'),
        (
            "default",
            configmap("Bad_Name"),
            422,
            "Invalid",
            'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a '
            "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is "
            r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "default",
            {"metadata": {}, "data": {}},
            422,
            "Invalid",
            'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is '
            "required",
        ),
    ],
    ids=["missing-namespace", "bad-name", "no-name"],
)
async def test_create_errors(
    api: Any, namespace: str, body: dict[str, Any], code: int, *, reason: str, message: str
) -> None:
    core = loose(client.CoreV1Api(api))
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map(namespace, body)
    status = status_of(caught.value)
    assert caught.value.status == code
    assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", code)
    assert status["reason"] == reason
    assert status["message"] == message


async def test_invalid_name_names_the_field(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).create_namespaced_config_map("default", configmap("A"))
    details = status_of(caught.value)["details"]
    assert details["kind"] == "ConfigMap"
    assert details["causes"][0]["field"] == "metadata.name"
    assert details["causes"][0]["reason"] == "FieldValueInvalid"


async def test_duplicate_create_is_already_exists(api: Any) -> None:
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
    with pytest.raises(ApiException) as caught:
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
    status = status_of(caught.value)
    assert caught.value.status == 409
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'deployments.apps "web" already exists'
    assert status["details"] == {"name": "web", "group": "apps", "kind": "deployments"}


async def test_get_missing_is_not_found(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.AppsV1Api(api)).read_namespaced_deployment("ghost", "default")
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'deployments.apps "ghost" not found'


async def test_generate_name_appends_five_characters(api: Any) -> None:
    body = {"metadata": {"generateName": "worker-"}, "data": {}}
    created = await loose(client.CoreV1Api(api)).create_namespaced_config_map("default", body)
    name = created.metadata.name
    assert name.startswith("worker-")
    assert len(name) == len("worker-") + 5
    assert set(name[len("worker-") :]) <= set("bcdfghjklmnpqrstvwxz2456789")


async def test_stale_update_conflicts_and_unconditional_update_wins(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    first = await json_of(
        await core.create_namespaced_config_map_without_preload_content(
            "default", configmap("cfg", v="1")
        )
    )
    first["data"] = {"v": "2"}
    await core.replace_namespaced_config_map("cfg", "default", first)
    stale = dict(first, data={"v": "3"})  # still carries the first resourceVersion
    with pytest.raises(ApiException) as caught:
        await core.replace_namespaced_config_map("cfg", "default", stale)
    status = status_of(caught.value)
    assert caught.value.status == 409
    assert status["reason"] == "Conflict"
    assert status["message"] == CONFLICT_MESSAGE
    unconditional = {"metadata": {"name": "cfg"}, "data": {"v": "4"}}
    updated = await core.replace_namespaced_config_map("cfg", "default", unconditional)
    assert updated.data == {"v": "4"}


async def test_no_op_update_keeps_the_resource_version(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    created = await json_of(
        await core.create_namespaced_config_map_without_preload_content(
            "default", configmap("cfg", v="1")
        )
    )
    again = await core.replace_namespaced_config_map("cfg", "default", created)
    assert again.metadata.resource_version == created["metadata"]["resourceVersion"]


async def test_generation_moves_only_with_the_spec(api: Any) -> None:
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
    labelled = await apps.patch_namespaced_deployment(
        "web", "default", {"metadata": {"labels": {"tier": "front"}}}
    )
    assert labelled.metadata.generation == 1
    scaled = await apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2
    status_only = await apps.patch_namespaced_deployment_status(
        "web", "default", {"status": {"replicas": 3}}
    )
    assert status_only.metadata.generation == 2


async def test_finalizers_hold_a_deleted_object_until_removed(
    api: Any, server: ApiServer, clock: VirtualClock
) -> None:
    core = loose(client.CoreV1Api(api))
    body = configmap("held")
    body["metadata"]["finalizers"] = ["example.com/cleanup"]
    await core.create_namespaced_config_map("default", body)
    await clock.advance(90)
    response = await core.delete_namespaced_config_map_without_preload_content("held", "default")
    assert response.status == 200
    marked = await json_of(response)
    assert marked["kind"] == "ConfigMap"
    assert marked["metadata"]["deletionTimestamp"] == "2026-01-01T00:01:30Z"
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marked["metadata"]["generation"] == 2  # markAsDeleting bumps it
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_config_map(
            "held", "default", {"metadata": {"finalizers": ["example.com/cleanup", "other/x"]}}
        )
    assert caught.value.status == 422
    assert "no new finalizers can be added" in status_of(caught.value)["message"]
    await core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    assert server.store.peek(CONFIG_MAPS, "held", "default") is None


async def test_immediate_delete_answers_a_status_except_for_pods(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    created = await core.create_namespaced_config_map("default", configmap("cfg"))
    status = await json_of(
        await core.delete_namespaced_config_map_without_preload_content("cfg", "default")
    )
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"] == {"name": "cfg", "kind": "configmaps", "uid": created.metadata.uid}
    await core.create_namespaced_pod("default", pod_manifest(name="p"))
    deleted = await json_of(
        await core.delete_namespaced_pod_without_preload_content("p", "default")
    )
    assert deleted["kind"] == "Pod"
    assert deleted["metadata"]["name"] == "p"


async def test_scheduled_pod_is_deleted_gracefully(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p", node_name="node-1"))
    marked = await core.delete_namespaced_pod("p", "default")
    assert marked.metadata.deletion_grace_period_seconds == 30
    assert marked.metadata.deletion_timestamp.isoformat() == "2026-01-01T00:00:30+00:00"
    assert server.store.peek(PODS, "p", "default") is not None
    # the kubelet's final delete
    await core.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert server.store.peek(PODS, "p", "default") is None


async def test_unscheduled_pod_goes_at_once(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p"))
    await core.delete_namespaced_pod("p", "default")
    assert server.store.peek(PODS, "p", "default") is None


async def test_delete_precondition_on_uid(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_config_map("default", configmap("cfg"))
    with pytest.raises(ApiException) as caught:
        await core.delete_namespaced_config_map(
            "cfg", "default", body={"preconditions": {"uid": "not-the-uid"}}
        )
    assert caught.value.status == 409
    assert (
        "Precondition failed: UID in precondition: not-the-uid"
        in (status_of(caught.value)["message"])
    )


async def test_dry_run_writes_nothing(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    rv = server.store.resource_version
    answer = await core.create_namespaced_config_map("default", configmap("cfg"), dry_run="All")
    assert answer.metadata.name == "cfg"
    assert server.store.peek(CONFIG_MAPS, "cfg", "default") is None
    assert server.store.resource_version == rv
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("default", configmap("x"), dry_run="Some")
    assert caught.value.status == 400


async def test_pod_create_sets_pending_status_and_defaults(api: Any) -> None:
    containers = [
        {"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
    ]
    body = pod_manifest(name="p", containers=containers)
    body["status"] = {"phase": "Running"}  # create cannot set status
    pod = await loose(client.CoreV1Api(api)).create_namespaced_pod("default", body)
    assert pod.status.phase == "Pending"
    assert pod.status.qos_class == "Guaranteed"  # requests defaulted from limits
    assert pod.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert pod.spec.scheduler_name == "default-scheduler"


async def test_namespace_deletion_takes_its_content(api: Any, server: ApiServer) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespace({"metadata": {"name": "team"}})
    namespace = await core.read_namespace("team")
    assert namespace.metadata.labels == {"kubernetes.io/metadata.name": "team"}
    held = configmap("held")
    held["metadata"]["finalizers"] = ["example.com/x"]
    await core.create_namespaced_config_map("team", held)
    await core.create_namespaced_config_map("team", configmap("free"))
    await core.delete_namespace("team")
    assert (await core.read_namespace("team")).status.phase == "Terminating"
    assert server.store.peek(CONFIG_MAPS, "free", "team") is None
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("team", configmap("late"))
    assert caught.value.status == 403
    await core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        await core.read_namespace("team")
    assert gone.value.status == 404


async def test_system_namespaces_cannot_be_deleted(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.CoreV1Api(api)).delete_namespace("kube-system")
    assert caught.value.status == 403


def test_in_process_store_raises_like_the_api(server: ApiServer) -> None:
    store = server.store
    created = store.create(configmap("cfg", v="1"), namespace="default")
    store.update({**created, "data": {"v": "2"}})
    with pytest.raises(ApiError) as caught:
        store.update({**created, "data": {"v": "3"}})
    assert caught.value.code == 409
    assert caught.value.message == CONFLICT_MESSAGE
    listed = store.list(CONFIG_MAPS, namespace="default")
    assert [o["data"] for o in listed] == [{"v": "2"}]


async def test_pod_spec_is_immutable_but_for_images(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    await core.create_namespaced_pod("default", pod_manifest(name="p"))
    image = [{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}]
    assert (await core.patch_namespaced_pod("p", "default", image)).spec.containers[0].image == (
        "nginx:2"
    )
    for patch in (
        [{"op": "add", "path": "/spec/nodeName", "value": "node-1"}],
        [{"op": "add", "path": "/spec/containers/0/resources", "value": {"limits": {"cpu": "1"}}}],
    ):
        with pytest.raises(ApiException) as caught:
            await core.patch_namespaced_pod("p", "default", patch)
        status = status_of(caught.value)
        assert caught.value.status == 422
        assert status["details"]["causes"][0]["field"] == "spec"
        assert "pod updates may not change fields other than" in status["message"]
