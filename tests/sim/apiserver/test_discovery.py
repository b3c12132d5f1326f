"""Discovery through the generated discovery calls of ``kubernetes.aio``, plus /version."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.aio import client

from kubescale.kube.resources import ALL
from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.conftest import client_configuration, loose


async def test_core_versions_and_resources(api: Any) -> None:
    versions = await loose(client.CoreApi(api)).get_api_versions()
    assert versions.versions == ["v1"]
    resources = await loose(client.CoreV1Api(api)).get_api_resources()
    by_name = {r.name: r for r in resources.resources}
    pods = by_name["pods"]
    assert (pods.kind, pods.namespaced, pods.singular_name) == ("Pod", True, "pod")
    assert pods.short_names == ["po"]
    assert set(pods.verbs) >= {"create", "get", "list", "watch", "patch", "delete"}
    assert by_name["nodes"].namespaced is False
    eviction = by_name["pods/eviction"]
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")
    assert eviction.verbs == ["create"]
    assert by_name["pods/status"].verbs == ["get", "patch", "update"]
    assert "pods/binding" in by_name
    assert "pods/resize" in by_name


async def test_groups_list_every_group_and_the_metrics_apis(api: Any) -> None:
    groups = await loose(client.ApisApi(api)).get_api_versions()
    names = {g.name for g in groups.groups}
    assert {rt.group for rt in ALL if rt.group} <= names
    assert {"metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io"} <= names
    apps = next(g for g in groups.groups if g.name == "apps")
    assert apps.preferred_version.group_version == "apps/v1"


async def test_group_document_and_scale_subresource(api: Any) -> None:
    group = await loose(client.AppsApi(api)).get_api_group()
    assert group.name == "apps"
    assert [v.group_version for v in group.versions] == ["apps/v1"]
    resources = await loose(client.AppsV1Api(api)).get_api_resources()
    assert resources.group_version == "apps/v1"
    scale = next(r for r in resources.resources if r.name == "deployments/scale")
    assert (scale.group, scale.version, scale.kind) == ("autoscaling", "v1", "Scale")


async def test_version(api: Any) -> None:
    info = await loose(client.VersionApi(api)).get_code()
    assert info.git_version == "v1.31.0"
    assert (info.major, info.minor) == ("1", "31")


async def test_every_catalogue_kind_is_discoverable(api: Any) -> None:
    for rt in ALL:
        response = await api.call_api("GET", api.configuration.host + rt.base_path())
        document = json.loads(await response.read())
        assert response.status == 200, rt.base_path()
        names = {r["name"]: r for r in document["resources"]}
        assert names[rt.plural]["kind"] == rt.kind
        assert names[rt.plural]["namespaced"] is rt.namespaced
        for sub in rt.subresources:
            assert f"{rt.plural}/{sub}" in names


async def test_unknown_paths_answer_a_not_found_status(api: Any) -> None:
    for path in ("/apis/nope.example.com/v1", "/api/v1/frobs", "/nothing"):
        response = await api.call_api("GET", api.configuration.host + path)
        status = json.loads(await response.read())
        assert response.status == 404, path
        assert (status["kind"], status["reason"]) == ("Status", "NotFound")


async def test_any_bearer_token_is_accepted_and_recorded(api: Any, server: ApiServer) -> None:
    await loose(client.VersionApi(api)).get_code()
    assert server.tokens[-1] == server.token
    kubeconfig = server.kubeconfig()
    kubeconfig["users"][0]["user"]["token"] = "someone-else"
    configuration = await client_configuration(kubeconfig)
    async with client.ApiClient(configuration=configuration) as other:
        await loose(client.CoreV1Api(other)).list_namespace()
    assert server.tokens[-1] == "someone-else"


async def test_plain_http_kubeconfig(server: ApiServer) -> None:
    kubeconfig = server.kubeconfig(tls=False)
    assert kubeconfig["clusters"][0]["cluster"] == {"server": server.http_url}
    configuration = await client_configuration(kubeconfig)
    async with client.ApiClient(configuration=configuration) as plain:
        names = [
            n.metadata.name for n in (await loose(client.CoreV1Api(plain)).list_namespace()).items
        ]
    assert "kube-system" in names
