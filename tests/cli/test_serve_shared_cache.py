"""``kubescale serve`` with every component enabled: one list and one watch per collection.

The webhook, the recommender and the updater all read VPAs and the workload controllers; the
recommender, the updater, the HPA controller, the descheduler and the scheduler extender (among
others) read pods (the last two are on when a descheduler policy is given). Built on one shared
cache, the process lists and watches each collection once — the in-process API server counts
the requests it answers — and the start-up log line and metric say what is watched and for whom.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.components import REGISTRY
from kubescale.sim.apiserver.server import ApiServer

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


async def _until_ready(server: Server) -> None:
    url = f"http://127.0.0.1:{server.health_port}/readyz"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    async with aiohttp.ClientSession() as session:
        while True:
            async with session.get(url) as response:
                if response.status == 200:
                    return
            assert loop.time() < deadline, "never ready"
            await asyncio.sleep(0.05)


async def test_every_collection_is_listed_and_watched_once(
    cert_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with ApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = [
            "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
            "--tls-cert-file", str(cert_dir / "serverCert.pem"),
            "--tls-private-key", str(cert_dir / "serverKey.pem"),
            "--client-ca-file", str(cert_dir / "caCert.pem"),
            "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
            "--webhook-service-namespace", "kube-system", "--log-format", "json",
            "--descheduler-policy", POLICY, "--cloud-provider", "clusterapi",
        ]  # fmt: skip
        config = serve_config_from_args(build_parser().parse_args(argv))
        enabled = default_components(config, environ={})
        assert {c.name for c in enabled} == {spec.name for spec in REGISTRY}
        started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
        with caplog.at_level(logging.INFO):
            task = asyncio.create_task(
                serve(config, clock=RealClock(), components=enabled, started=started,
                      install_signal_handlers=False)
            )  # fmt: skip
            server = await asyncio.wait_for(started, timeout=10)
            try:
                await _until_ready(server)
                # the Cluster API collections are declared once the autoscaler's first iteration
                # has discovered the group's version
                for _ in range(3000):
                    if any(r.resource == "machines" and r.verb == "watch"
                           for r in api.requests.counts()):  # fmt: skip
                        break
                    await asyncio.sleep(0.01)
                assert server.cache is not None
                late = server.cache.collections()  # informers asked for after start-up too
                watches = {
                    record: n
                    for record, n in api.requests.counts().items()
                    if record.verb == "watch"
                }
                lists = {
                    record: n
                    for record, n in api.requests.counts().items()
                    if record.verb == "list" and record.group != "metrics.k8s.io"
                }
            finally:
                server.stop_event.set()
                assert await asyncio.wait_for(task, timeout=10) == 0
    # one watch per collection, and the collections every component reads are among them
    assert watches, "no watch at all"
    assert all(n == 1 for n in watches.values()), watches
    watched = {(r.group, r.resource) for r in watches}
    assert {
        ("autoscaling.k8s.io", "verticalpodautoscalers"),
        ("", "pods"),
        ("", "limitranges"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("", "replicationcontrollers"),
        ("", "nodes"),
        ("cluster.x-k8s.io", "machinedeployments"),
        ("cluster.x-k8s.io", "machines"),
    } <= watched
    # pods are watched across all namespaces
    assert [r.namespace for r in watches if (r.group, r.resource) == ("", "pods")] == [""]
    assert all(n == 1 for n in lists.values()), lists
    # the start-up line names each collection and who asked for it
    (line,) = [r for r in caplog.records if r.getMessage() == "watching collections"]
    collections = line.__dict__["fields"]["collections"]
    assert set(collections["pods"]) >= {
        "vpa-recommender",
        "vpa-updater",
        "hpa-controller",
        "descheduler",
        "scheduler-extender",
    }
    assert "machinedeployments" not in collections  # declared after discovery, not at start-up
    assert set(late["machinedeployments"]) == {"cluster-autoscaler"}
    # the controller lookups are shared: each component that reads them is attributed them
    # (and waits for them), not only the first one built
    assert set(collections["deployments"]) >= {"webhook", "vpa-recommender", "vpa-updater"}
    assert set(collections["verticalpodautoscalers"]) == {
        "webhook",
        "vpa-recommender",
        "vpa-updater",
        # --coordination one-brain (the default): it binpacks with the webhook's requests
        "cluster-autoscaler",
    }
    # every collection is some component's: each is waited for by the loops that read it
    assert [name for name, who in late.items() if not who] == []
    assert json.dumps(collections)  # plain data, as the JSON log line carries it
