"""The updater in ``kubescale serve``: built by ``default_components``, run under leadership.

One replica with only the updater (``--webhook false --vpa-recommender false``), a real clock,
``--leader-elect-retry-period 200ms`` and ``--updater-interval 200ms``. A ReplicaSet of two running
pods below their Recreate VPA's recommendation, and an admission status Lease renewed just
now: the leader's loop evicts one of them (tolerance ``int(2 × 0.5) = 1``, reference §3.3) and
then none while the group is a running pod short.

Lease expiry plays no part in the claim, so ``lease-duration`` / ``renew-deadline`` keep
upstream's defaults (15 s / 10 s) and only ``retry-period`` is short (200 ms, the first acquire
is quick). Scaled down to 1.5 s / 1 s they made the test depend on the API server, which runs on
this test's event loop, answering every renewal within 1 s on a loaded machine; a late answer
made the elector rightly give the Lease up and take it again mid-test. Lease loss is tested on a
virtual clock in ``tests/kube/test_leader_election.py``. The replica holds one term throughout
(the Lease created by it, ``leaseTransitions`` 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.controllers.vpa.updater.component import UpdaterComponent
from kubescale.kube.lease_record import format_micro_time, lease_spec
from kubescale.kube.resources import LEASES, PODS
from kubescale.sim.apiserver.server import ApiServer
from tests.conftest import only_components

NAMESPACE = "shop"


def _objects(api: ApiServer) -> None:
    store = api.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    labels = {"app": "web"}
    template = {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "app", "image": "app"}]},
    }
    replica_set = store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
        }
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web",
        "uid": replica_set["metadata"]["uid"],
        "controller": True,
    }
    for index in range(2):
        pod = store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"web-{index}",
                    "namespace": NAMESPACE,
                    "labels": labels,
                    "ownerReferences": [owner],
                },
                "spec": {
                    "nodeName": "n1",
                    "containers": [
                        {
                            "name": "app",
                            "image": "app",
                            "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
                        }
                    ],
                },
            }
        )
        store.update_status({**pod, "status": {"phase": "Running"}})
    vpa = store.create(
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"},
                "updatePolicy": {"updateMode": "Recreate"},
            },
        }
    )
    recommendation = {
        "containerName": "app",
        "target": {"cpu": "500m", "memory": "256Mi"},
        "lowerBound": {"cpu": "400m", "memory": "200Mi"},
        "upperBound": {"cpu": "1", "memory": "512Mi"},
    }
    store.update_status(
        {**vpa, "status": {"recommendation": {"containerRecommendations": [recommendation]}}}
    )
    store.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "vpa-admission-controller", "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": "webhook",
                "renewTime": format_micro_time(RealClock().now()),
            },
        }
    )


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    async with ApiServer() as api:
        _objects(api)
        path = tmp_path / "kubeconfig"
        api.write_kubeconfig(path)
        yield api, path


def _live(api: ApiServer) -> list[str]:
    """Pods not being deleted (no kubelet here finishes a graceful deletion)."""
    return [
        pod["metadata"]["name"]
        for pod in api.store.list(PODS, namespace=NAMESPACE)
        if not pod["metadata"].get("deletionTimestamp")
    ]


async def _until(predicate: Callable[[], bool], within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_the_leader_runs_the_updater(
    cert_dir: Path, apiserver: tuple[ApiServer, Path]
) -> None:
    api, kubeconfig = apiserver
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), *only_components("vpa-updater"),
        "--leader-elect-retry-period", "200ms", "--updater-interval", "200ms",
        "--admission-controller-status-lease-namespace", NAMESPACE,
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    enabled = default_components(config, environ={})
    started = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), components=enabled, started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    server = await asyncio.wait_for(started, timeout=10)
    (component,) = server.components
    assert isinstance(component, UpdaterComponent)
    try:
        await _until(lambda: component.loop.iterations >= 1, 10)
        await _until(lambda: len(_live(api)) < 2, 5)
        # Two configured, tolerance int(2 × 0.5) = 1: one pod goes; the other stays while the
        # group is short of a running pod (nothing recreates it here).
        iterations = component.loop.iterations
        await _until(lambda: component.loop.iterations >= iterations + 2, 5)
        assert _live(api) in (["web-0"], ["web-1"])
        assert server.leadership_terms == 1
        assert server.elector is not None
        record = lease_spec(api.store.get(LEASES, server.elector.name, server.elector.namespace))
        assert (record["holderIdentity"], record.get("leaseTransitions")) == (
            server.elector.identity,
            0,
        )
    finally:
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=10) == 0
