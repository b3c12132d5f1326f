"""The CRDs on the in-process API server: served kinds, discovery, and upstream objects applied.

The server loads ``manifests/crds/*.yaml`` at start; from then on VerticalPodAutoscalers and
their checkpoints are served with upstream's shortNames and (VPA only) the status subresource.
Upstream's example objects go in through ``kubectl apply`` and through the ``kubernetes.aio``
client and come back unchanged.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from kubernetes.aio import client

from kubescale.kube.resources import VERTICAL_POD_AUTOSCALERS, VPA_CHECKPOINTS, ResourceType
from kubescale.sim.apiserver.crds import resource_type_from_crd
from kubescale.sim.apiserver.server import ApiServer

from .conftest import kubectl_for, kubectl_minor, needs_kubectl
from .manifest_files import CRD_DIR, crd
from .upstream_examples import (
    CHECKPOINT_YAML,
    VPA_EXAMPLES_YAML,
    checkpoint_example,
    vpa_examples,
    vpa_status,
)

GROUP, VERSION = "autoscaling.k8s.io", "v1"
VPAS, CHECKPOINTS = "verticalpodautoscalers", "verticalpodautoscalercheckpoints"
NAMESPACE = "default"


def _served(server: ApiServer, plural: str) -> ResourceType:
    rt = server.registry.by_plural(GROUP, plural)
    assert rt is not None, f"{plural} is not served"
    return rt


def test_the_crds_declare_the_types_the_access_layer_uses() -> None:
    # kube/resources.py builds kubescale's URLs; the CRDs must serve exactly those.
    assert resource_type_from_crd(crd(VPAS)) == VERTICAL_POD_AUTOSCALERS
    assert resource_type_from_crd(crd(CHECKPOINTS)) == VPA_CHECKPOINTS


async def test_the_server_loads_both_crds_and_establishes_them(server: ApiServer, api: Any) -> None:
    assert server.loaded_crds == [f"{CHECKPOINTS}.{GROUP}", f"{VPAS}.{GROUP}"]
    extensions: Any = client.ApiextensionsV1Api(api)
    for plural, short_name in ((VPAS, "vpa"), (CHECKPOINTS, "vpacheckpoint")):
        response = await extensions.read_custom_resource_definition_without_preload_content(
            f"{plural}.{GROUP}"
        )
        stored = await response.json(content_type=None)
        response.release()
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions == {"NamesAccepted": "True", "Established": "True"}
        assert stored["status"]["acceptedNames"]["shortNames"] == [short_name]
        assert stored["status"]["storedVersions"] == [VERSION]


async def test_discovery_lists_the_kinds_with_short_names_and_the_vpa_status(api: Any) -> None:
    response = await api.call_api("GET", f"{api.configuration.host}/apis/{GROUP}/{VERSION}")
    resources = {r["name"]: r for r in json.loads(await response.read())["resources"]}
    assert sorted(resources) == [CHECKPOINTS, VPAS, f"{VPAS}/status"]
    vpa, checkpoint = resources[VPAS], resources[CHECKPOINTS]
    assert (vpa["kind"], vpa["namespaced"], vpa["shortNames"]) == (
        "VerticalPodAutoscaler",
        True,
        ["vpa"],
    )
    assert (checkpoint["kind"], checkpoint["namespaced"], checkpoint["shortNames"]) == (
        "VerticalPodAutoscalerCheckpoint",
        True,
        ["vpacheckpoint"],
    )
    assert resources[f"{VPAS}/status"]["kind"] == "VerticalPodAutoscaler"


async def test_upstream_vpas_apply_unchanged_through_the_client(api: Any) -> None:
    custom: Any = client.CustomObjectsApi(api)
    for example in vpa_examples():
        created = await custom.create_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, VPAS, copy.deepcopy(example)
        )
        assert created["spec"] == example["spec"]
        read = await custom.get_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, VPAS, example["metadata"]["name"]
        )
        assert (read["apiVersion"], read["kind"]) == (example["apiVersion"], example["kind"])
        assert read["spec"] == example["spec"]
    listed = await custom.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, VPAS)
    assert listed["kind"] == "VerticalPodAutoscalerList"
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == sorted(
        e["metadata"]["name"] for e in vpa_examples()
    )


async def test_vpa_status_is_a_subresource(api: Any) -> None:
    custom: Any = client.CustomObjectsApi(api)
    hamster = {**vpa_examples()[0], "status": vpa_status()}
    created = await custom.create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, VPAS, copy.deepcopy(hamster)
    )
    assert "status" not in created  # a create cannot set status when status is a subresource
    written = await custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        NAMESPACE,
        VPAS,
        "hamster-vpa",
        {"status": vpa_status()},
        _content_type="application/merge-patch+json",
    )
    assert written["status"] == vpa_status()
    assert written["metadata"]["generation"] == created["metadata"]["generation"]


async def test_a_checkpoint_with_histograms_applies_and_takes_the_recommenders_patch(
    api: Any,
) -> None:
    custom: Any = client.CustomObjectsApi(api)
    checkpoint = checkpoint_example()
    created = await custom.create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, CHECKPOINTS, copy.deepcopy(checkpoint)
    )
    assert (created["spec"], created["status"]) == (checkpoint["spec"], checkpoint["status"])
    # The recommender rewrites the whole status with one JSON patch (reference §2.6).
    status = copy.deepcopy(checkpoint["status"])
    status["totalSamplesCount"] = 1600
    status["cpuHistogram"]["bucketWeights"] = {"1": 10000, "175": 3}
    patched = await custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        NAMESPACE,
        CHECKPOINTS,
        checkpoint["metadata"]["name"],
        [{"op": "replace", "path": "/status", "value": status}],
        _content_type="application/json-patch+json",
    )
    assert patched["status"] == status


@needs_kubectl
async def test_upstream_objects_apply_unchanged_through_kubectl(
    server: ApiServer, tmp_path: Path
) -> None:
    kubectl = kubectl_for(server, tmp_path)
    manifest = VPA_EXAMPLES_YAML + "---\n" + CHECKPOINT_YAML
    applied = await kubectl.ok("apply", "-n", NAMESPACE, "-f", "-", stdin=manifest)
    for example in vpa_examples():
        name = example["metadata"]["name"]
        assert f"verticalpodautoscaler.autoscaling.k8s.io/{name} created" in applied.stdout
        stored = server.store.get(_served(server, VPAS), name, NAMESPACE)
        assert stored["spec"] == example["spec"]
    checkpoint = checkpoint_example()
    stored = server.store.get(_served(server, CHECKPOINTS), "hamster-vpa-hamster", NAMESPACE)
    assert (stored["spec"], stored["status"]) == (checkpoint["spec"], checkpoint["status"])

    # The short names resolve through discovery.
    names = await kubectl.ok("get", "vpa", "-n", NAMESPACE, "-o", "name")
    assert sorted(names.stdout.split()) == sorted(
        f"verticalpodautoscaler.autoscaling.k8s.io/{e['metadata']['name']}" for e in vpa_examples()
    )
    got = await kubectl.ok(
        "get", "vpacheckpoint", "hamster-vpa-hamster", "-n", NAMESPACE, "-o", "json"
    )
    assert json.loads(got.stdout)["status"] == checkpoint["status"]

    again = await kubectl.ok("apply", "-n", NAMESPACE, "-f", "-", stdin=manifest)
    assert "verticalpodautoscaler.autoscaling.k8s.io/hamster-vpa unchanged" in again.stdout

    if kubectl_minor() < 24:
        return  # `kubectl patch --subresource` is 1.24+; the REST status path is tested above
    status = json.dumps({"status": vpa_status()})
    await kubectl.ok(
        "patch",
        "vpa",
        "hamster-vpa",
        "-n",
        NAMESPACE,
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    )
    stored = server.store.get(_served(server, VPAS), "hamster-vpa", NAMESPACE)
    assert stored["status"] == vpa_status()


@needs_kubectl
async def test_kubectl_installs_the_crd_files_and_the_kind_follows_the_crd(tmp_path: Path) -> None:
    async with ApiServer(crd_dirs=[]) as server:
        kubectl = kubectl_for(server, tmp_path)
        installed = await kubectl.ok("apply", "-f", str(CRD_DIR))
        for plural in (VPAS, CHECKPOINTS):
            assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.{GROUP} created" in (
                installed.stdout
            )
        await kubectl.ok("apply", "-n", NAMESPACE, "-f", "-", stdin=VPA_EXAMPLES_YAML)

        # Deleting the CRD stops serving the kind and deletes its objects.
        await kubectl.ok("delete", "-f", str(CRD_DIR / f"{VPAS}.yaml"))
        assert server.registry.by_plural(GROUP, VPAS) is None
        refused = await kubectl.run("get", "vpa", "-n", NAMESPACE)
        assert refused.returncode != 0, refused.explain()

        await kubectl.ok("apply", "-f", str(CRD_DIR / f"{VPAS}.yaml"))
        assert _served(server, VPAS) == VERTICAL_POD_AUTOSCALERS
        listed = await kubectl.ok("get", "vpa", "-n", NAMESPACE, "-o", "name")
        assert listed.stdout.split() == []
