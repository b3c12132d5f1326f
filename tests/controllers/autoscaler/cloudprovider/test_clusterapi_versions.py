"""The Cluster API version the clusterapi provider uses: upstream's ``newMachineController`` —
``CAPI_VERSION``, else the ``CAPI_GROUP`` group's preferred version in discovery — on the
in-process API server serving Cluster API at v1beta1 (its built-in kinds) or at v1beta2 (the
CRDs of ``kubescale/sim/cluster/capi_v1beta2_crds``, as current Cluster API prefers)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import kubescale.sim.cluster
from kubescale.base.clock import VirtualClock
from kubescale.controllers.autoscaler.capi_environment import with_capi_environment
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import ProviderError
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    DELETE_MACHINE_ANNOTATION,
    DEPLOYMENT_NAME_LABEL,
    MAX_SIZE_ANNOTATION,
    MIN_SIZE_ANNOTATION,
    REVISION_ANNOTATION,
)
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_provider import ClusterApiProvider
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_versions import (
    preferred_version,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    AutoscalerConfigError,
    AutoscalerSettings,
    NodeGroupDefaults,
)
from kubescale.kube.client import connect
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import DEPLOYMENTS, MACHINE_DEPLOYMENTS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup
from kubescale.sim.scenario.runner import SimulationClientClock
from tests.controllers.autoscaler.sim_harness import app_deployment, sim_cluster, template

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
V1BETA2_CRDS = Path(kubescale.sim.cluster.__file__).parent / "capi_v1beta2_crds"
GROUP_ID = "MachineDeployment/default/pool"


def capi_objects(version: str) -> list[dict[str, Any]]:
    """A MachineDeployment (min 1, max 5, 2 replicas), its MachineSet and two Machines with
    their Nodes. v1beta2's ``status.nodeRef`` holds the name only (v1beta1: an
    ObjectReference)."""
    api_version = f"cluster.x-k8s.io/{version}"
    labels = {DEPLOYMENT_NAME_LABEL: "pool", "cluster.x-k8s.io/cluster-name": "sim"}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": api_version,
            "kind": "MachineDeployment",
            "metadata": {
                "name": "pool",
                "namespace": "default",
                "annotations": {MIN_SIZE_ANNOTATION: "1", MAX_SIZE_ANNOTATION: "5"},
            },
            "spec": {
                "clusterName": "sim",
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"clusterName": "sim"}},
            },
        },
        {
            "apiVersion": api_version,
            "kind": "MachineSet",
            "metadata": {
                "name": "pool-1",
                "namespace": "default",
                "labels": labels,
                "annotations": {REVISION_ANNOTATION: "1"},
            },
            "spec": {"clusterName": "sim", "replicas": 2, "selector": {"matchLabels": labels}},
        },
    ]
    for i in range(2):
        node_ref: dict[str, Any] = {"name": f"node-{i}"}
        if version == "v1beta1":
            node_ref = {"apiVersion": "v1", "kind": "Node", **node_ref}
        objects.append(
            {
                "apiVersion": api_version,
                "kind": "Machine",
                "metadata": {"name": f"pool-1-m{i}", "namespace": "default", "labels": labels},
                "spec": {"clusterName": "sim", "providerID": f"sim://m{i}"},
                "status": {"nodeRef": node_ref, "phase": "Running"},
            }
        )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i}"},
                "spec": {"providerID": f"sim://m{i}"},
                "status": {
                    "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                    "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return objects


@contextlib.asynccontextmanager
async def provider_on(
    tmp_path: Path, *, served: str, capi_version: str = "", capi_group: str = "cluster.x-k8s.io"
) -> AsyncIterator[tuple[ApiServer, ClusterApiProvider]]:
    clock = VirtualClock(START)
    crd_dirs = [V1BETA2_CRDS] if served == "v1beta2" else []
    async with ApiServer(clock=clock, crd_dirs=crd_dirs, seed=1) as api:
        for obj in capi_objects(served):
            created = api.store.create(obj)
            if obj.get("status") and obj["kind"] != "Node":
                api.store.update_status({**created, "status": obj["status"]})
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(
            kubeconfig=tmp_path / "kubeconfig",
            clock=SimulationClientClock(clock),
            registry=CollectorRegistry(),
            rng=random.Random(1),
        ) as client:
            informers = InformerSet(client=client, rng=random.Random(1))
            provider = ClusterApiProvider(
                client=client,
                informers=informers,
                defaults=NodeGroupDefaults(),
                capi_group=capi_group,
                capi_version=capi_version,
            )
            informers.start()
            try:
                yield api, provider
            finally:
                await informers.stop()


async def ready(provider: ClusterApiProvider) -> None:
    """``prepare`` until the caches it declared have listed (each call waits on the client's
    clock, which takes no time in a simulated run)."""
    for _ in range(1000):
        if await provider.prepare():
            return
    raise AssertionError("the Cluster API caches never synced")


@pytest.mark.parametrize("served", ["v1beta1", "v1beta2"])
async def test_the_preferred_version_is_discovered_and_used(tmp_path: Path, served: str) -> None:
    async with provider_on(tmp_path, served=served) as (api, provider):
        await ready(provider)
        assert provider.types is not None
        assert provider.types.group_version == f"cluster.x-k8s.io/{served}"
        snapshot = provider.refresh()
        group = snapshot.groups[GROUP_ID]
        assert (group.min_size, group.max_size, group.target_size) == (1, 5, 2)
        assert sorted(i.id for i in group.instances) == ["sim://m0", "sim://m1"]
        node = provider.nodes.lister.get("node-1")  # the provider's cache, typed Node
        assert node is not None
        assert snapshot.group_for_node(node) is group
        await provider.delete_nodes(group, [node])
        # the Machine annotated, the size written through /scale, at the discovered version
        base = f"/apis/cluster.x-k8s.io/{served}/namespaces/default"
        paths = {path.split("?")[0] for _, path in api.requests.paths()}
        assert f"{base}/machinedeployments/pool/scale" in paths
        assert f"{base}/machines/pool-1-m1" in paths
        other = "v1beta1" if served == "v1beta2" else "v1beta2"
        assert not any(f"/cluster.x-k8s.io/{other}/" in p for p in paths)
        md = api.store.peek(provider.types.machine_deployments, "pool", "default")
        machine = api.store.peek(provider.types.machines, "pool-1-m1", "default")
        assert md is not None
        assert machine is not None
        assert md["spec"]["replicas"] == 1
        assert DELETE_MACHINE_ANNOTATION in machine["metadata"]["annotations"]


@pytest.mark.parametrize("served", ["v1beta1", "v1beta2"])
async def test_capi_version_overrides_discovery(tmp_path: Path, served: str) -> None:
    """``CAPI_VERSION`` set: no discovery of the preferred version, the caches are declared at
    once at that version."""
    async with provider_on(tmp_path, served=served, capi_version=served) as (api, provider):
        assert provider.types is not None
        assert provider.types.group_version == f"cluster.x-k8s.io/{served}"
        await ready(provider)
        assert ("GET", "/apis") not in api.requests.paths()
        assert GROUP_ID in provider.refresh().groups


@pytest.mark.parametrize(
    ("served", "group", "message"),
    [
        # upstream getAPIGroupPreferredVersion: the group is not served at all
        (
            "v1beta1",
            "cluster.example.com",
            'could not find preferred version for CAPI group "cluster.example.com": failed to '
            'find API group "cluster.example.com"',
        ),
    ],
)
async def test_an_unserved_group_is_one_clear_error(
    tmp_path: Path, served: str, group: str, message: str
) -> None:
    async with provider_on(tmp_path, served=served, capi_group=group) as (_, provider):
        with pytest.raises(ProviderError) as caught:
            await provider.prepare()
        assert str(caught.value) == message
        assert provider.refresh().groups == {}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ("cluster.x-k8s.io", "")),
        ({"CAPI_VERSION": "v1beta2"}, ("cluster.x-k8s.io", "v1beta2")),
        ({"CAPI_GROUP": "cluster.example.com", "CAPI_VERSION": ""}, ("cluster.example.com", "")),
        ({"CAPI_VERSION": "V1"}, "CAPI_VERSION: API version 'V1' is not a DNS-1035 label"),
        (
            {"CAPI_GROUP": "Cluster_API"},
            "CAPI_GROUP: API group 'Cluster_API' is not a DNS-1123 subdomain",
        ),
    ],
)
def test_capi_environment(environ: dict[str, str], expected: tuple[str, str] | str) -> None:
    if isinstance(expected, str):
        with pytest.raises(AutoscalerConfigError) as caught:
            with_capi_environment(AutoscalerSettings(), environ)
        assert str(caught.value) == expected
        return
    settings = with_capi_environment(AutoscalerSettings(), environ)
    assert (settings.capi_group, settings.capi_version) == expected


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        # current Cluster API: both versions served, v1beta2 preferred
        (
            {
                "groups": [
                    {
                        "name": "cluster.x-k8s.io",
                        "versions": [{"version": "v1beta2"}, {"version": "v1beta1"}],
                        "preferredVersion": {"version": "v1beta2"},
                    }
                ]
            },
            "v1beta2",
        ),
        (
            {
                "groups": [
                    {"name": "apps", "preferredVersion": {"version": "v1"}},
                    {"name": "cluster.x-k8s.io", "preferredVersion": {"version": "v1beta1"}},
                ]
            },
            "v1beta1",
        ),
    ],
)
def test_preferred_version(document: dict[str, Any], expected: str) -> None:
    assert preferred_version(document, "cluster.x-k8s.io") == expected


async def test_the_loop_decides_nothing_without_the_cluster_api_version(tmp_path: Path) -> None:
    """A group the server does not serve: every iteration stops before deciding
    (``CloudProviderNotReady``, the error logged on one line); pending pods trigger nothing."""
    settings = AutoscalerSettings(capi_group="cluster.example.com")
    group = MachineDeploymentGroup(
        name="pool",
        template=template("s2", "2", "8Gi", 0.10),
        min_size=1,
        max_size=5,
        replicas=1,
        provisioning_delay=60,
    )
    async with sim_cluster(
        tmp_path,
        machine_deployments=[group],
        settings=settings,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        for _ in range(6):
            await cluster.step()
            assert cluster.loop.report.stopped == "CloudProviderNotReady"
        md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "pool", "default")
        assert md is not None
        assert md["spec"]["replicas"] == 1
        assert cluster.events_with("TriggeredScaleUp") == []


async def test_scale_up_and_down_on_cluster_api_v1beta2(tmp_path: Path) -> None:
    """The whole loop on a cluster serving Cluster API at v1beta2 only: discovered, then a
    scale-up through ``/scale`` and a scale-down (``delete-machine`` on the Machine, ``/scale``),
    every Cluster API request at v1beta2.

    One 2-cpu node holds 4 × 500m; 2 of 6 pods pend → pool 1 → 2. Load gone → the emptied
    node goes after the unneeded time → pool 2 → 1."""
    settings = AutoscalerSettings(
        scale_down_delay_after_add=timedelta(minutes=2),
        node_defaults=NodeGroupDefaults(scale_down_unneeded_time=timedelta(minutes=2)),
    )
    group = MachineDeploymentGroup(
        name="pool",
        template=template("s2", "2", "8Gi", 0.10),
        min_size=1,
        max_size=5,
        replicas=1,
        provisioning_delay=60,
        deprovisioning_delay=30,
    )
    async with sim_cluster(
        tmp_path,
        machine_deployments=[group],
        settings=settings,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
        crd_dirs=[V1BETA2_CRDS],
    ) as cluster:

        def replicas() -> int:
            md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "pool", "default")
            return -1 if md is None else int(md["spec"]["replicas"])

        await cluster.run_until(lambda: replicas() == 2, limit=60, what="scale-up")
        md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "pool", "default")
        assert md is not None
        assert md["apiVersion"] == "cluster.x-k8s.io/v1beta2"
        await cluster.run_until(
            lambda: len(cluster.running("burst")) == 6, limit=180, what="pods scheduled"
        )
        current = cluster.api.store.peek(DEPLOYMENTS, "burst", "default")
        assert current is not None
        cluster.api.store.update({**current, "spec": {**current["spec"], "replicas": 0}})
        await cluster.run_until(lambda: replicas() == 1, limit=900, what="scale-down")
        paths = {path.split("?")[0] for _, path in cluster.api.requests.paths()}
        capi = {p for p in paths if "/cluster.x-k8s.io/" in p}
        assert (
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machinedeployments/pool/scale"
            in (capi)
        )
        assert any(
            p.startswith("/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/")
            for p in capi
        )
        assert all(p.startswith("/apis/cluster.x-k8s.io/v1beta2") for p in capi), sorted(capi)
