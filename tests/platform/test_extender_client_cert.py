"""Client-certificate authentication of the scheduler extender's routes (issue 27 item 11).

``kubescale serve --extender-client-ca-file FILE``: the TLS server asks clients for a
certificate; the extender's ``filter`` and ``prioritize`` answer ``403`` to a client that
presented none, and a certificate from another CA fails the handshake; a client with a
certificate issued by FILE's CA is answered. Other routes on the port (the webhook's: kube-
apiserver presents no certificate by default) still answer clients without one. Real sockets,
the real TLS listener, under asyncio's loop and uvloop (``BOTH_EVENT_LOOPS``).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography.hazmat.primitives.serialization import Encoding
from prometheus_client import CollectorRegistry

from kubescale.base.clock import RealClock, VirtualClock
from kubescale.certs.authority import (
    CertificateError,
    KeyPair,
    generate_ca,
    issue_serving_certificate,
)
from kubescale.certs.client_identity import ClientCertificateCheck
from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.extender.cluster_cache import ClusterCache
from kubescale.extender.extender_config import ExtenderSettings
from kubescale.extender.extender_metrics import ExtenderMetrics
from kubescale.extender.extender_routes import SchedulerExtender
from kubescale.runtime.process import Server, serve
from tests.controllers.descheduler.builders import NOW, cycle_node, policy

BOTH_EVENT_LOOPS = True
SERVER_NAME = "kubescale.kube-system.svc"
POLICY = policy(("deschedule", "RemovePodsViolatingNodeTaints", {}))
FILTER_BODY = {
    "Pod": {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}},
    "NodeNames": ["n1"],
}


@dataclass
class Clients:
    scheduler_ca: KeyPair
    scheduler: KeyPair
    stranger: KeyPair
    """A certificate from a CA the server does not trust."""


@pytest.fixture(scope="module")
def clients() -> Clients:
    now = datetime.now(UTC)
    scheduler_ca = generate_ca(common_name="scheduler-client-ca", now=now, days=1, key_type="ecdsa")
    other_ca = generate_ca(common_name="someone-else", now=now, days=1, key_type="ecdsa")
    return Clients(
        scheduler_ca=scheduler_ca,
        scheduler=issue_serving_certificate(
            ca=scheduler_ca, names=["kube-scheduler"], now=now, days=1, key_type="ecdsa"
        ),
        stranger=issue_serving_certificate(
            ca=other_ca, names=["kube-scheduler"], now=now, days=1, key_type="ecdsa"
        ),
    )


@dataclass
class Running:
    server: Server
    registry: CollectorRegistry
    tmp: Path


@pytest.fixture
async def running(cert_dir: Path, clients: Clients, tmp_path: Path) -> AsyncIterator[Running]:
    ca_file = tmp_path / "scheduler-ca.pem"
    ca_file.write_bytes(clients.scheduler_ca.cert_pem)
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--extender-client-ca-file", str(ca_file),
        "--leader-elect", "false", "--log-level", "error",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    assert config.extender_client_ca_file == ca_file
    clock = VirtualClock(NOW)
    registry = CollectorRegistry()
    extender = SchedulerExtender(
        cache=ClusterCache(policy=POLICY, now=clock.now).load(nodes=[cycle_node("n1")]),
        rules=PlacementRules.from_policy(POLICY),
        veto=None,
        settings=ExtenderSettings(),
        clock=clock,
        metrics=ExtenderMetrics(registry),
        client_cert=ClientCertificateCheck(ca_file),
    )

    async def ping(_request: web.Request) -> web.Response:
        return web.Response(text="pong")

    def mount_ping(app: web.Application) -> None:
        app.router.add_post("/ping", ping)

    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), mounts=[extender.mount, mount_ping], started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    server = await asyncio.wait_for(started, timeout=10)
    try:
        yield Running(server=server, registry=registry, tmp=tmp_path)
    finally:
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=15) == 0


def _context(cert_dir: Path, tmp: Path, pair: KeyPair | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cert_dir / "caCert.pem"))
    if pair is not None:
        cert, key = tmp / "client.pem", tmp / "client-key.pem"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        context.load_cert_chain(cert, key)
    return context


async def _post(
    running: Running, cert_dir: Path, path: str, pair: KeyPair | None
) -> tuple[int, Any]:
    context = _context(cert_dir, running.tmp, pair)
    url = f"https://127.0.0.1:{running.server.https_port}{path}"
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.post(url, data=json.dumps(FILTER_BODY), server_hostname=SERVER_NAME) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text[:1] in ("{", "[") else text


async def test_a_certificate_from_the_configured_ca_is_answered(
    running: Running, cert_dir: Path, clients: Clients
) -> None:
    status, answer = await _post(running, cert_dir, "/scheduler/filter", clients.scheduler)
    assert status == 200
    assert answer["NodeNames"] == ["n1"]  # no taint on n1: it passes
    assert not answer.get("Error")
    status, scores = await _post(running, cert_dir, "/scheduler/prioritize", clients.scheduler)
    assert status == 200
    assert [s["Host"] for s in scores] == ["n1"]


async def test_no_certificate_is_refused_by_the_extender_but_not_by_other_routes(
    running: Running, cert_dir: Path
) -> None:
    for verb in ("filter", "prioritize"):
        status, answer = await _post(running, cert_dir, f"/scheduler/{verb}", None)
        assert status == 403
        assert answer["Error"].startswith("client certificate required")
        assert "--extender-client-ca-file" in answer["Error"]
    assert (
        running.registry.get_sample_value(
            "kubescale_extender_requests_total", {"verb": "filter", "result": "unauthenticated"}
        )
        == 1
    )
    # kube-apiserver calling the webhook presents no certificate: still answered.
    assert await _post(running, cert_dir, "/ping", None) == (200, "pong")


async def test_a_certificate_from_another_ca_fails_the_handshake(
    running: Running, cert_dir: Path, clients: Clients
) -> None:
    with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
        await _post(running, cert_dir, "/scheduler/filter", clients.stranger)


def test_the_route_check_accepts_only_leaves_issued_by_its_bundle(
    clients: Clients, tmp_path: Path
) -> None:
    """The route's own half, for the case where the TLS trust store also holds another CA
    (``--require-client-cert`` with ``--client-ca-file``)."""
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(clients.scheduler_ca.cert_pem)
    check = ClientCertificateCheck(ca_file)
    der = {
        name: pair.certificate.public_bytes(encoding=Encoding.DER)
        for name, pair in (("scheduler", clients.scheduler), ("stranger", clients.stranger))
    }
    assert check.refusal(der["scheduler"]) is None
    refusal = check.refusal(der["stranger"])
    assert refusal is not None
    assert refusal.startswith("client certificate not issued by a CA in --extender-client-ca-file")
    assert check.refusal(None) is not None
    assert check.refusal(b"") is not None


def test_an_unreadable_bundle_is_one_line_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(CertificateError, match=r"nope\.pem: cannot read the extender client CA"):
        ClientCertificateCheck(missing)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    with pytest.raises(CertificateError, match=r"garbage\.pem: not a PEM CA certificate bundle"):
        ClientCertificateCheck(garbage)
