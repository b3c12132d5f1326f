"""The HPA controller in ``kubescale serve``: built by ``default_components``, run under
leadership on a real clock.

One replica with only the HPA controller (``--webhook false --vpa-recommender false
--vpa-updater false``), ``--leader-elect-retry-period 200ms`` and a 200 ms sync period. A Deployment
of two pods at 90 % of their 1000m CPU request and an HPA on 50 %: the leader's loop scales it to
``ceil(90/50 × 2) = 4`` through ``/scale``; an unannotated HPA on another Deployment is left
alone (``--hpa-selection`` annotated, the default).

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
from kubescale.controllers.hpa.component import HpaComponent
from kubescale.kube.lease_record import lease_spec
from kubescale.kube.resources import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, LEASES
from kubescale.sim.apiserver.server import ApiServer

from ...conftest import only_components

NAMESPACE = "shop"


def _objects(api: ApiServer) -> None:
    store = api.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for name, notes in (("web", {"hpa.kubescale.io/controller": "kubescale"}), ("kcm", {})):
        labels = {"app": name}
        store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "app"}]},
                    },
                },
            }
        )
        for index in range(2):
            pod = store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{index}",
                        "namespace": NAMESPACE,
                        "labels": labels,
                    },
                    "spec": {
                        "containers": [
                            {"name": "app", "image": "app", "resources": {"requests": {"cpu": "1"}}}
                        ]
                    },
                }
            )
            started = "2020-01-01T00:00:00Z"
            store.update_status(
                {
                    **pod,
                    "status": {
                        "phase": "Running",
                        "startTime": started,
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": started}
                        ],
                    },
                }
            )
            api.metrics.set_pod_metrics(
                namespace=NAMESPACE,
                name=f"{name}-{index}",
                containers={"app": {"cpu": "900m"}},
                labels=labels,
            )
        store.create(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name, "namespace": NAMESPACE, "annotations": notes},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "maxReplicas": 10,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 50},
                            },
                        }
                    ],
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


async def _until(predicate: Callable[[], bool], seconds: float) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_the_leader_runs_the_hpa_controller(
    cert_dir: Path, apiserver: tuple[ApiServer, Path]
) -> None:
    api, kubeconfig = apiserver
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), *only_components("hpa-controller"),
        "--leader-elect-retry-period", "200ms",
        "--horizontal-pod-autoscaler-sync-period", "200ms",
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
    assert isinstance(component, HpaComponent)

    def replicas(name: str) -> int:
        return int(api.store.get(DEPLOYMENTS, name, NAMESPACE)["spec"]["replicas"])

    try:
        await _until(lambda: replicas("web") == 4, 10)
        await _until(lambda: component.loop.reconciled >= 3, 5)
        status = api.store.get(HORIZONTAL_POD_AUTOSCALERS, "web", NAMESPACE)["status"]
        assert status["desiredReplicas"] == 4
        assert replicas("kcm") == 2
        assert "status" not in api.store.get(HORIZONTAL_POD_AUTOSCALERS, "kcm", NAMESPACE) or not (
            api.store.get(HORIZONTAL_POD_AUTOSCALERS, "kcm", NAMESPACE)["status"].get("conditions")
        )
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
