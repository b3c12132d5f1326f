"""CustomResourceDefinitions: registering a kind through the API or from YAML files, serving it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from kubescale.base.clock import VirtualClock
from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.conftest import json_of, loose, status_of

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"


def widget_crd(*, scope: str = "Namespaced", name: str = f"{PLURAL}.{GROUP}") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "plural": PLURAL,
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wd"],
            },
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False, "schema": {}},
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                },
            ],
        },
    }


def widget(name: str, size: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


async def test_a_crd_created_through_the_api_serves_its_kind(api: Any) -> None:
    extensions = loose(client.ApiextensionsV1Api(api))
    await extensions.create_custom_resource_definition(widget_crd())
    crd = await json_of(
        await extensions.read_custom_resource_definition_without_preload_content(
            f"{PLURAL}.{GROUP}"
        )
    )
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["storedVersions"] == [VERSION]

    custom = loose(client.CustomObjectsApi(api))
    created = await custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, widget("w1")
    )
    assert created["metadata"]["generation"] == 1
    assert "status" not in created  # create cannot set status with a status subresource
    await custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, widget("Mixed"))
    listed = await custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert listed["kind"] == "WidgetList"
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("Widget", "Mixed"),
        ("Widget", "w1"),
    ]
    patched = await custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "w1",
        {"spec": {"size": 3}},
        _content_type="application/merge-patch+json",
    )
    assert patched["metadata"]["generation"] == 2
    status = await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "w1",
        {"status": {"ready": True}},
        _content_type="application/merge-patch+json",
    )
    assert status["status"] == {"ready": True}
    response = await api.call_api("GET", f"{api.configuration.host}/apis/{GROUP}/{VERSION}")
    resources = json.loads(await response.read())
    names = {r["name"] for r in resources["resources"]}
    assert names == {PLURAL, f"{PLURAL}/status"}


async def test_deleting_the_crd_removes_kind_and_objects(api: Any, server: ApiServer) -> None:
    extensions = loose(client.ApiextensionsV1Api(api))
    await extensions.create_custom_resource_definition(widget_crd(scope="Cluster"))
    custom = loose(client.CustomObjectsApi(api))
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w1"))
    await extensions.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    with pytest.raises(ApiException) as caught:
        await custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert caught.value.status == 404
    assert server.registry.by_plural(GROUP, PLURAL) is None


@pytest.mark.parametrize(
    ("crd", "field"),
    [
        (widget_crd(name="wrong.example.com"), "metadata.name"),
        ({**widget_crd(), "spec": {**widget_crd()["spec"], "group": "apps"}}, "spec.group"),
    ],
    ids=["name", "builtin-group"],
)
async def test_invalid_crds_are_rejected(api: Any, crd: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.ApiextensionsV1Api(api)).create_custom_resource_definition(crd)
    status = status_of(caught.value)
    assert caught.value.status == 422
    assert status["details"]["causes"][0]["field"] == field


async def test_crds_are_preloaded_from_directories(tmp_path: Path, clock: VirtualClock) -> None:
    (tmp_path / "widgets.yaml").write_text(yaml.safe_dump(widget_crd()))
    (tmp_path / "notes.txt").write_text("not a manifest")
    server = ApiServer(clock=clock, crd_dirs=[tmp_path])
    assert server.loaded_crds == [f"{PLURAL}.{GROUP}"]
    rt = server.registry.by_plural(GROUP, PLURAL)
    assert rt is not None
    assert (rt.version, rt.kind, rt.namespaced) == (VERSION, "Widget", True)
    assert rt.subresources == frozenset({"status"})
    assert rt.short_names == ("wd",)
    created = server.store.create(widget("w"), namespace="default")
    assert created["metadata"]["name"] == "w"
