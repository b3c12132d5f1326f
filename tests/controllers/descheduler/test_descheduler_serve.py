"""The descheduler and the scheduler extender in ``kubescale serve``, two replicas.

Both replicas run only these two components (``only_components``: every other registered one
switched off by its own flag), one API server, ``--leader-elect-retry-period 200ms`` and
``--descheduling-interval 200ms``. Nodes n1 (tainted ``NoSchedule``), n2 and n3; on n1 two
running pods of ReplicaSet ``web``; the policy is RemovePodsViolatingNodeTaints. What must hold:

* only the Lease holder runs the descheduler: it evicts web-0 and web-1 through the Eviction
  API (``create pods/eviction``; the pods get a deletionTimestamp, nothing is deleted
  directly), the standby never runs a cycle;
* every replica answers ``POST /scheduler/filter`` on the shared TLS port (certificate checked
  against the CA, by the Service name): for a new ``web`` pod and the candidates n1, n2, n3
  (nodeCacheCapable) both refuse n1 as unresolvable and pass n2, n3; the leader, whose eviction
  memory recorded the evictions, says ``recently descheduled ReplicaSet/web from n1`` (the
  memory is checked first), the standby the policy's taint rule.

Lease expiry plays no part in these claims: the first replica to try takes the Lease and holds
it for the whole test (one term, ``leaseTransitions`` 0), so ``lease-duration`` /
``renew-deadline`` keep upstream's defaults (15 s / 10 s). Scaled down to 1.5 s / 1 s the test
was flaky under load: the API server runs on this test's event loop next to both replicas, a
renewal could go unanswered past the 1 s deadline, and the leader then rightly gave the Lease up
(and the standby could take it). Losing a lease that cannot be renewed in time is the elector's
job and is tested on a virtual clock in ``tests/kube/test_leader_election.py``; here a renewal
would have to go unanswered for 10 s, longer than any wait of this test.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.controllers.descheduler.component import DeschedulerComponent
from kubescale.extender.component import ExtenderComponent
from kubescale.kube.lease_record import lease_spec
from kubescale.kube.resources import LEASES, PODS
from kubescale.objects.pod import Pod
from kubescale.sim.apiserver.server import ApiServer
from tests.builders.meta import json_body

from ...conftest import only_components
from .builders import cycle_node, cycle_pod

TAINT = {"key": "maintenance", "effect": "NoSchedule"}
POLICY = """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: default
    plugins:
      deschedule: {enabled: [RemovePodsViolatingNodeTaints]}
"""
WANTED = ("descheduler", "scheduler-extender")


def _create_pod(api: ApiServer, typed_pod: Pod) -> None:
    the_pod = json_body(typed_pod)
    body = {k: v for k, v in the_pod.items() if k != "status"}
    body["metadata"] = {
        k: v for k, v in the_pod["metadata"].items() if k not in ("uid", "creationTimestamp")
    }
    created = api.store.create(body)
    status = {**the_pod["status"], "conditions": [{"type": "Ready", "status": "True"}]}
    api.store.update_status({**created, "status": status})


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    async with ApiServer() as api:
        for made in (cycle_node("n1", taints=[TAINT]), cycle_node("n2"), cycle_node("n3")):
            api.store.create(json_body(made))
        for name in ("web-0", "web-1"):
            _create_pod(api, cycle_pod(name, "n1", cpu="100m", labels={"app": "web"}))
        path = tmp_path / "kubeconfig"
        api.write_kubeconfig(path)
        yield api, path


async def _replica(cert_dir: Path, kubeconfig: Path) -> tuple[Server, asyncio.Task[int]]:
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), *only_components(*WANTED),
        "--leader-elect-retry-period", "200ms",
        "--descheduler-policy", POLICY, "--descheduling-interval", "200ms",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    enabled = default_components(config, environ={})
    assert [c.name for c in enabled] == list(WANTED)
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), components=enabled, started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    return await asyncio.wait_for(started, timeout=10), task


async def _until(predicate: Callable[[], bool], within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def _terminating(api: ApiServer) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in api.store.snapshots(PODS)
        if p["metadata"].get("deletionTimestamp")
    )


def _descheduler(server: Server) -> DeschedulerComponent:
    (found,) = [c for c in server.components if isinstance(c, DeschedulerComponent)]
    return found


async def _filter(server: Server, cert_dir: Path) -> dict[str, Any]:
    """The filter call as kube-scheduler makes it (nodeCacheCapable: names only), over TLS."""
    assert any(isinstance(c, ExtenderComponent) for c in server.components)
    context = ssl.create_default_context(cafile=str(cert_dir / "caCert.pem"))
    replacement = cycle_pod("web-2", None, cpu="100m", labels={"app": "web"})
    body = {"Pod": replacement, "NodeNames": ["n1", "n2", "n3"]}
    connector = aiohttp.TCPConnector(ssl=context)
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.post(
            f"https://127.0.0.1:{server.https_port}/scheduler/filter",
            data=json.dumps(body),
            headers={
                "Content-Type": "application/json",
                "Host": "kubescale.kube-system.svc",
            },
            server_hostname="kubescale.kube-system.svc",
        ) as response,
    ):
        assert response.status == 200
        answer: dict[str, Any] = await response.json()
        return answer


async def test_the_leader_evicts_and_every_replica_answers_the_scheduler(
    cert_dir: Path, apiserver: tuple[ApiServer, Path]
) -> None:
    api, kubeconfig = apiserver
    replicas = [await _replica(cert_dir, kubeconfig) for _ in range(2)]
    servers = [server for server, _ in replicas]
    try:
        await _until(
            lambda: any(s.elector is not None and s.elector.is_leader for s in servers), 10
        )
        leader = next(i for i, s in enumerate(servers) if s.elector and s.elector.is_leader)
        standby = 1 - leader
        lease = api.store.get(LEASES, "kubescale", "kube-system")
        assert lease["spec"]["holderIdentity"] == servers[leader].elector.identity  # type: ignore[union-attr]

        await _until(lambda: _terminating(api) == ["web-0", "web-1"], 10)
        # through the Eviction API, by the leader only
        assert api.requests.count(verb="create", resource="pods", subresource="eviction") == 2
        assert api.requests.count(verb="delete", resource="pods") == 0
        # the pass records its report after its evictions land: under load the test can see
        # the pods terminating before the leader's pass has returned
        await _until(lambda: _descheduler(servers[leader]).loop.last_report is not None, 10)
        report = _descheduler(servers[leader]).loop.last_report
        assert report is not None
        assert _descheduler(servers[standby]).loop.last_report is None

        answers = [await _filter(server, cert_dir) for server in servers]
        for answer in answers:
            assert answer["NodeNames"] == ["n2", "n3"]
            assert set(answer["FailedAndUnresolvableNodes"]) == {"n1"}
            assert answer["Error"] == ""
        assert answers[leader]["FailedAndUnresolvableNodes"]["n1"] == (
            "recently descheduled ReplicaSet/web from n1"
        )
        # the standby did not evict (its memory is empty): it refuses n1 for the policy alone
        assert answers[standby]["FailedAndUnresolvableNodes"]["n1"] == (
            "descheduler default/RemovePodsViolatingNodeTaints would evict it: "
            "untolerated taint maintenance:NoSchedule"
        )
        # One term throughout: the first holder kept the Lease (no change of holder).
        assert (servers[leader].leadership_terms, servers[standby].leadership_terms) == (1, 0)
        record = lease_spec(api.store.get(LEASES, "kubescale", "kube-system"))
        assert (record["holderIdentity"], record.get("leaseTransitions")) == (
            servers[leader].elector.identity,  # type: ignore[union-attr]
            0,
        )
    finally:
        for server, task in replicas:
            server.stop_event.set()
            assert await asyncio.wait_for(task, timeout=10) == 0
