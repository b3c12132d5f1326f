"""``kubescale serve`` waits for each component's own collections, and runs without an API.

Upstream's controllers start their workers after ``WaitForCacheSync`` of exactly the informers
they use. Here the in-process API server holds a list until the test releases it (a large
cluster's first list of pods; the re-list after a ``410 Gone``): no loop of a component that
reads pods starts an iteration meanwhile, the log and ``/readyz`` name what is loading, and a
component that does not read pods (the webhook) is ready all along.

Without the Cluster API CRDs (every cluster that only wants a VPA) an autoscaler configured to
run (``--cluster-autoscaler auto`` with ``--cloud-provider clusterapi``, on with ``--kubeconfig``)
is not started — one warning line, a ``/readyz`` note and a metric name what is missing — and the
webhook mutates pods as upstream's admission controller does. (With the default flags alone the
autoscaler is not configured to run at all: ``tests/cli/test_serve.py``.)

Expected patch (upstream rules, no capping): requests become the VPA's target cpu 250m /
memory 200Mi; the pod sets no limits, so none are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.client import connect
from kubescale.kube.resources import DEPLOYMENTS, NODES, PODS, VERTICAL_POD_AUTOSCALERS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from tests import builders
from tests.conftest import only_components

POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: default
    pluginConfig:
      - name: DefaultEvictor
      - name: RemovePodsViolatingNodeTaints
    plugins:
      deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"""
SKIPPED_FEW_NODES = "The cluster size is 0 or 1"
CLUSTER_API = ("machinedeployments", "machinesets", "machines")
STATUS_LEASE = "vpa-webhook-status-lease"
ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def _argv(cert_dir: Path, kubeconfig: Path, *flags: str) -> list[str]:
    return [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
        "--webhook-service", "kubescale", "--webhook-service-namespace", "kube-system",
        "--log-format", "json", *flags,
    ]  # fmt: skip


async def _until(predicate: Callable[[], bool]) -> None:
    """Poll until ``predicate()``; the limit only guards against a hang (nothing is timed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not predicate():
        assert loop.time() < deadline, "condition never reached"
        await asyncio.sleep(0.01)


async def _readyz(server: Server) -> tuple[int, str]:
    url = f"http://127.0.0.1:{server.health_port}/readyz?verbose"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


@contextlib.asynccontextmanager
async def _serve(argv: list[str]) -> AsyncIterator[Server]:
    config = serve_config_from_args(build_parser().parse_args(argv))
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), components=default_components(config, environ={}),
              started=started, install_signal_handlers=False)
    )  # fmt: skip
    server = await asyncio.wait_for(started, timeout=30)
    try:
        yield server
    finally:
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=30) == 0


def _list_arrives(api: ApiServer, plural: str) -> asyncio.Event:
    arrived = asyncio.Event()
    api.context.observers.append(
        lambda record: arrived.set() if (record.verb, record.resource) == ("list", plural) else None
    )
    return arrived


POD_READERS = ("descheduler", "vpa-recommender", "vpa-updater", "hpa-controller")
"""Components whose loops read pods (each loop is named like its component)."""


async def test_no_loop_decides_before_its_collections_have_synced(
    cert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with ApiServer() as api:
        for name in ("node-a", "node-b"):
            api.store.create(
                builders.nodes.node(
                    name=name,
                    labels={"kubernetes.io/hostname": name},
                    allocatable=ALLOCATABLE,
                    capacity=ALLOCATABLE,
                    conditions=[builders.nodes.ready_condition()],
                )
            )
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        pods_listed = _list_arrives(api, "pods")
        released = api.faults.hold(verb="list", resource="pods")  # a slow list of pods
        # the descheduler with its default --descheduling-interval 0: one cycle, the only one
        argv = _argv(
            cert_dir, kubeconfig, *only_components(*POD_READERS, "webhook"),
            "--descheduler-policy", POLICY,
        )  # fmt: skip
        with caplog.at_level(logging.INFO, logger="kubescale"):
            async with _serve(argv) as server:
                await asyncio.wait_for(pods_listed.wait(), timeout=30)
                await _until(
                    lambda: all(server.runner.waiting(loop) == ("pods",) for loop in POD_READERS)
                )
                # the webhook reads no pods: its loop runs and it is ready meanwhile
                await _until(lambda: server.replica_runner.iterations(STATUS_LEASE) >= 1)
                status, text = await _readyz(server)
                assert status == 500
                for component in POD_READERS:
                    assert f"[-]{component}-caches failed: caches not synced: pods" in text
                    assert server.runner.iterations(component) == 0
                    waiting_for = server.registry.get_sample_value(
                        "kubescale_loop_waiting_for_caches", {"loop": component}
                    )
                    assert waiting_for == 1.0
                assert "[+]webhook-caches ok" in text
                lines = [
                    r for r in caplog.records if r.getMessage() == "waiting for caches to sync"
                ]
                assert sorted(r.__dict__["fields"]["loop"] for r in lines) == sorted(POD_READERS)
                assert all(r.__dict__["fields"]["collections"] == ["pods"] for r in lines)

                released.set()
                await _until(
                    lambda: all(server.runner.iterations(loop) >= 1 for loop in POD_READERS)
                )
                assert server.runner.iterations("descheduler") == 1
                assert server.runner.failures("descheduler") == 0
                assert (await _readyz(server))[0] == 200
        # the one cycle ran on both nodes and every pod, not on an empty view
        assert not [r for r in caplog.records if SKIPPED_FEW_NODES in r.getMessage()]


async def test_a_relist_after_410_holds_the_loops_again(
    cert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with ApiServer() as api:
        for name in ("node-a", "node-b"):
            api.store.create(
                builders.nodes.node(
                    name=name,
                    labels={"kubernetes.io/hostname": name},
                    allocatable=ALLOCATABLE,
                    capacity=ALLOCATABLE,
                    conditions=[builders.nodes.ready_condition()],
                )
            )
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = _argv(
            cert_dir, kubeconfig, *only_components("descheduler"),
            "--descheduler-policy", POLICY, "--descheduling-interval", "100ms",
        )  # fmt: skip
        with caplog.at_level(logging.INFO, logger="kubescale"):
            async with _serve(argv) as server:
                await _until(lambda: server.runner.iterations("descheduler") >= 2)
                assert server.cache is not None
                pods = server.cache.informers.informer(PODS)
                nodes = server.cache.informers.informer(NODES)
                # the next watch of pods is answered 410 Gone: the informer must list again,
                # and the server holds that list
                relisted = _list_arrives(api, "pods")
                released = api.faults.hold(verb="list", resource="pods")
                api.faults.add(verb="watch", resource="pods", status=410, count=1)
                api.faults.drop_watches("pods")
                await asyncio.wait_for(relisted.wait(), timeout=30)
                await _until(lambda: server.runner.waiting("descheduler") == ("pods",))
                ran = server.runner.iterations("descheduler")
                assert pods.stats.gone == 1
                assert not pods.synced
                assert nodes.synced
                status, text = await _readyz(server)
                assert status == 500
                assert "[-]descheduler-caches failed: caches not synced: pods" in text

                released.set()
                await _until(lambda: server.runner.iterations("descheduler") > ran)
                assert server.runner.waiting("descheduler") == ()
                assert (await _readyz(server))[0] == 200
        waits = [r for r in caplog.records if r.getMessage() == "waiting for caches to sync"]
        assert [r.__dict__["fields"]["collections"] for r in waits][-1] == ["pods"]


RECOMMENDATION = {
    "containerRecommendations": [
        {
            "containerName": "app",
            "target": {"cpu": "250m", "memory": "200Mi"},
            "lowerBound": {"cpu": "100m", "memory": "100Mi"},
            "upperBound": {"cpu": "1", "memory": "1Gi"},
        }
    ]
}


async def test_without_cluster_api_a_configured_autoscaler_does_not_start_and_the_vpa_runs(
    cert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with ApiServer() as api:
        for plural in CLUSTER_API:  # a cluster without the Cluster API CRDs
            assert api.registry.remove(("cluster.x-k8s.io", plural)) is not None
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        client = await connect(kubeconfig=kubeconfig)
        with caplog.at_level(logging.INFO, logger="kubescale"):
            argv = _argv(cert_dir, kubeconfig, "--cloud-provider", "clusterapi")
            async with _serve(argv) as server:
                api.register_service(
                    namespace="kube-system",
                    name="kubescale",
                    port=443,
                    address=("127.0.0.1", server.https_port),
                )
                names = [c.name for c in server.components]
                assert "webhook" in names
                assert "cluster-autoscaler" not in names
                # no version of the group is served (its version is discovered: none to name)
                missing = [f"{plural}.cluster.x-k8s.io" for plural in sorted(CLUSTER_API)]
                assert server.not_started == {"cluster-autoscaler": missing}
                await _until(lambda: server.checks.readiness()["webhook-caches"] is None)
                status, text = await _readyz(server)
                assert status == 200, text
                assert (
                    "[+]cluster-autoscaler-api not started: the API server does not serve "
                    + ", ".join(missing)
                ) in text
                for resource in missing:
                    value = server.registry.get_sample_value(
                        "kubescale_component_api_not_served",
                        {"component": "cluster-autoscaler", "resource": resource},
                    )
                    assert value == 1.0

                vpa = builders.vpas.vpa(name="web-vpa", target=builders.vpas.target_ref(name="web"))
                created = await client.create(VERTICAL_POD_AUTOSCALERS, vpa)
                created["status"] = {"recommendation": RECOMMENDATION}
                await client.update_status(VERTICAL_POD_AUTOSCALERS, created)
                lister = server.cache.informers.lister(VERTICAL_POD_AUTOSCALERS)  # type: ignore[union-attr]

                def seen() -> bool:
                    cached = lister.get("web-vpa", "default")
                    return cached is not None and "recommendation" in (cached.get("status") or {})

                await _until(seen)
                await client.create(
                    DEPLOYMENTS,
                    builders.workloads.deployment(
                        name="web",
                        replicas=1,
                        match_labels={"app": "web"},
                        template=builders.workloads.pod_template(
                            labels={"app": "web"},
                            containers=[
                                builders.pods.container(
                                    image="nginx", requests={"cpu": "100m", "memory": "100Mi"}
                                )
                            ],
                        ),
                    ),
                )
                controllers = WorkloadControllers(api=api)
                try:
                    await controllers.step(RealClock().now())
                finally:
                    controllers.close()
                (pod,) = api.store.snapshots(PODS, "default")
        await client.close()
    (container,) = pod["spec"]["containers"]
    # the VPA's target, as upstream's admission controller patches it
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "200Mi"}
    annotations = pod["metadata"]["annotations"]
    assert annotations["vpaObservedContainers"] == "app"
    lines = [r for r in caplog.records if "not started" in r.getMessage()]
    assert [r.getMessage() for r in lines] == [
        "the cluster autoscaler not started: the API server does not serve its API"
    ]
    assert lines[0].__dict__["fields"] == {"component": "cluster-autoscaler", "not_served": missing}
    # nothing asked for Cluster API objects: no endless retry of a list answered 404
    assert all(r.resource not in CLUSTER_API for r in api.requests.counts())


async def test_without_the_vpa_crds_the_autoscaler_runs_and_the_vpa_does_not_start(
    cert_dir: Path, tmp_path: Path
) -> None:
    async with ApiServer() as api:
        for plural in ("verticalpodautoscalers", "verticalpodautoscalercheckpoints"):
            assert api.registry.remove(("autoscaling.k8s.io", plural)) is not None
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = _argv(cert_dir, kubeconfig, "--cloud-provider", "clusterapi")
        async with _serve(argv) as server:
            # the VPA's systems need their CRDs; the autoscaler only reads VPAs to binpack
            # with the webhook's requests (one brain), which it can do without
            assert set(server.not_started) == {"webhook", "vpa-recommender", "vpa-updater"}
            assert {c.name for c in server.components} == {"hpa-controller", "cluster-autoscaler"}
            await _until(lambda: server.runner.iterations("cluster-autoscaler") >= 1)
            await _until(lambda: server.checks.readiness()["cluster-autoscaler-caches"] is None)
            status, text = await _readyz(server)
            assert status == 200, text
