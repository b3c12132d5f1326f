"""Discovery at start-up: which of a system's resources the API server does not serve."""

from __future__ import annotations

from kubescale.kube.client import KubeClient
from kubescale.kube.resources import (
    MACHINE_DEPLOYMENTS,
    MACHINE_SETS,
    MACHINES,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.served_resources import api_name, unserved
from kubescale.sim.apiserver.server import ApiServer


async def test_a_resource_missing_from_a_served_group_version(
    apiserver: ApiServer, client: KubeClient
) -> None:
    assert apiserver.registry.remove(MACHINES.key) is not None
    wanted = [PODS, MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES, VERTICAL_POD_AUTOSCALERS]
    # cluster.x-k8s.io/v1beta1 is served (MachineDeployments, MachineSets), Machines is not
    assert await unserved(client, wanted) == {MACHINES}


async def test_a_group_version_not_served_at_all(apiserver: ApiServer, client: KubeClient) -> None:
    for resource in (MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES):
        assert apiserver.registry.remove(resource.key) is not None
    missing = await unserved(client, [PODS, MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES])
    assert missing == {MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES}
    assert await unserved(client, [PODS, VERTICAL_POD_AUTOSCALERS]) == set()


def test_api_names_read_like_kubectl_api_resources() -> None:
    assert api_name(MACHINES) == "machines.cluster.x-k8s.io/v1beta1"
    assert api_name(PODS) == "pods/v1"
