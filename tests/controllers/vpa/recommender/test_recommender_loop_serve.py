"""The recommender in ``kubescale serve``: two replicas, only the Lease holder writes.

Both replicas start the recommender (informers warm on each); the loop runs on the leader only,
so one replica computes and writes the VPA's status and checkpoints while the other writes
nothing. When the leader stops, the standby takes the Lease, rebuilds its model from the
checkpoints and carries on. Real clock, recommender interval 200 ms.

The hand-over is client-go's ``ReleaseOnCancel``: the stopping leader writes an empty holder and
the standby takes the Lease at its next try (``retry-period`` 200 ms, so the test stays fast).
Lease expiry plays no part in the claims, so ``lease-duration`` / ``renew-deadline`` keep
upstream's defaults (15 s / 10 s). With them scaled down to 1.5 s / 1 s the test was flaky under
load: the API server runs on this test's event loop next to both replicas, and while the second
replica started up on a loaded machine the leader's first renewal went unanswered for over a
second, so the leader rightly gave up its Lease and took it again (two terms, where the test
counted one). Losing a lease that cannot be renewed in time is the elector's job and is tested
on a virtual clock in ``tests/kube/test_leader_election.py``; here a renewal would have to go
unanswered for 10 s, longer than any wait of this test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.controllers.vpa.recommender.component import RecommenderComponent
from kubescale.kube.lease_record import lease_spec
from kubescale.kube.resources import LEASES, VERTICAL_POD_AUTOSCALERS, VPA_CHECKPOINTS
from kubescale.sim.apiserver.server import ApiServer
from tests.conftest import only_components

NAMESPACE = "shop"


def _objects(api: ApiServer) -> None:
    store = api.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    labels = {"app": "web"}
    store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "app", "image": "app"}]},
                },
            },
        }
    )
    pod = store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": NAMESPACE, "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "app"}]},
        }
    )
    store.update_status(
        {
            **pod,
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "app", "restartCount": 0, "state": {"running": {}}, "ready": True}
                ],
            },
        }
    )
    api.metrics.set_pod_metrics(
        namespace=NAMESPACE, name="web-1", containers={"app": {"cpu": "1", "memory": "1e9"}}
    )
    store.create(
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": NAMESPACE},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "updatePolicy": {"updateMode": "Off"},
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


async def _replica(
    cert_dir: Path, kubeconfig: Path
) -> tuple[Server, RecommenderComponent, asyncio.Task[int]]:
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), *only_components("vpa-recommender"),
        "--leader-elect-retry-period", "200ms", "--recommender-interval", "200ms",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    enabled = default_components(config, environ={})
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), components=enabled, started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    server = await asyncio.wait_for(started, timeout=10)
    (component,) = server.components
    assert isinstance(component, RecommenderComponent)
    return server, component, task


async def _until(predicate: Callable[[], bool], within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def _iterations(component: RecommenderComponent) -> int:
    return component.loop.iterations


def _writes(component: RecommenderComponent) -> int:
    return component.loop.status_writes


def _target(api: ApiServer) -> dict[str, Any] | None:
    status = api.store.get(VERTICAL_POD_AUTOSCALERS, "web", NAMESPACE).get("status") or {}
    entries = (status.get("recommendation") or {}).get("containerRecommendations") or []
    return dict(entries[0]["target"]) if entries else None


def _holder_and_transitions(api: ApiServer, server: Server) -> tuple[object, object]:
    """``holderIdentity`` and ``leaseTransitions`` (changes of holder) of the Lease that
    ``server``'s elector campaigns for."""
    elector = server.elector
    assert elector is not None
    record = lease_spec(api.store.get(LEASES, elector.name, elector.namespace))
    return record.get("holderIdentity"), record.get("leaseTransitions")


async def test_only_the_leader_recommends_and_the_next_one_carries_on(
    cert_dir: Path, apiserver: tuple[ApiServer, Path]
) -> None:
    api, kubeconfig = apiserver
    replicas = [await _replica(cert_dir, kubeconfig) for _ in range(2)]
    servers = [server for server, _, _ in replicas]
    components = [component for _, component, _ in replicas]
    try:
        await _until(lambda: any(s.elector is not None and s.elector.is_leader for s in servers), 5)
        leader = next(i for i, s in enumerate(servers) if s.elector and s.elector.is_leader)
        standby = 1 - leader
        await _until(lambda: _iterations(components[leader]) >= 3, 10)
        assert _target(api) == {"cpu": "1168m", "memory": "1168723596"}
        assert _writes(components[leader]) >= 1
        assert (_iterations(components[standby]), _writes(components[standby])) == (0, 0)
        assert servers[leader].leadership_terms == 1
        assert servers[standby].leadership_terms == 0
        # The first replica to try created the Lease: no holder change yet.
        identities = [s.elector.identity for s in servers if s.elector is not None]
        assert _holder_and_transitions(api, servers[leader]) == (identities[leader], 0)
        (checkpoint,) = api.store.list(VPA_CHECKPOINTS, namespace=NAMESPACE)
        assert checkpoint["spec"] == {"vpaObjectName": "web", "containerName": "app"}

        servers[leader].stop_event.set()
        assert await asyncio.wait_for(replicas[leader][2], timeout=10) == 0
        await _until(lambda: _iterations(components[standby]) >= 2, 10)
        assert servers[standby].leadership_terms == 1
        # One hand-over: the leader released the Lease (keeping leaseTransitions at 0) and the
        # standby took it from the empty holder (0 + 1).
        assert _holder_and_transitions(api, servers[standby]) == (identities[standby], 1)
        # The new leader started from the checkpoint: the same target, and more samples.
        assert _target(api) == {"cpu": "1168m", "memory": "1168723596"}
        loop = components[standby].loop
        assert loop is not None
        assert loop.checkpoints_loaded == 1
        assert loop.feeder.state.vpa_keys() == [(NAMESPACE, "web")]
    finally:
        for server, _, task in replicas:
            server.stop_event.set()
            await asyncio.wait_for(task, timeout=10)
