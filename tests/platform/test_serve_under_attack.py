"""The TLS port under attack, with real sockets: the webhook keeps answering, the attackers'
connections are closed by the deadlines (or to make room at the cap), memory stays bounded.

The attackers run in a child process (:mod:`kubescale.sim.hostile_clients`), so this process's
traced memory is the server's (and a small legitimate client's). Scaled down from the incident
(220 connections each sending 4.9 MiB and stalling; 800 slowloris connections) to keep the
suite fast: the limits are scaled down with it; ``bench/tls_attack.py`` runs the full size.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.runtime.process import Server, serve
from kubescale.sim.hostile_clients import AttackSpec
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

SERVER_NAME = "kubescale.kube-system.svc"
BOTH_EVENT_LOOPS = True
"""Every test runs under asyncio's loop and under uvloop (tests/platform/conftest.py)."""
WEBHOOK_TIMEOUT = 2.0  # a short webhook timeoutSeconds (kube-apiserver's default is 10 s)
MiB = 1024 * 1024

# The deadlines and caps of this test (flags, as an operator would set them).
READ_HEADER_TIMEOUT = 0.8
READ_TIMEOUT = 1.5
LIMIT_FLAGS = [
    "--read-header-timeout", f"{READ_HEADER_TIMEOUT}s",
    "--read-timeout", f"{READ_TIMEOUT}s",
    "--idle-timeout", "3s",
    "--max-header-bytes", "16Ki",
    "--max-in-flight-body-bytes", "6Mi",  # one 4.9 MiB body fits, a second does not
]  # fmt: skip


@dataclass
class Running:
    server: Server
    cert_dir: Path


async def _serve(cert_dir: Path, *flags: str) -> AsyncIterator[Running]:
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--leader-elect", "false", "--log-level", "error", *flags,
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    # The real webhook route: it reads the body as it arrives, as it did when attacked.
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(
            config,
            clock=RealClock(),
            mounts=[webhook.mount],
            started=started,
            install_signal_handlers=False,
        )
    )
    server = await asyncio.wait_for(started, timeout=10)
    try:
        yield Running(server=server, cert_dir=cert_dir)
    finally:
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=15) == 0


@pytest.fixture
async def guarded(cert_dir: Path) -> AsyncIterator[Running]:
    async for running in _serve(cert_dir, *LIMIT_FLAGS, "--max-connections", "200"):
        yield running


@pytest.fixture
async def capped(cert_dir: Path) -> AsyncIterator[Running]:
    async for running in _serve(cert_dir, *LIMIT_FLAGS, "--max-connections", "20"):
        yield running


def _review(uid: str) -> bytes:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "app", "image": "x"}]}}  # fmt: skip
    request = {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
               "resource": {"group": "", "version": "v1", "resource": "pods"},
               "namespace": "default", "operation": "CREATE", "object": pod}  # fmt: skip
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


async def _legitimate(running: Running, *, seconds: float, every: float) -> list[float | None]:
    """kube-apiserver: an AdmissionReview every ``every`` s over keep-alive connections; the
    latency of each answer, ``None`` for an error or a wrong answer."""
    context = ssl.create_default_context(cafile=str(running.cert_dir / "caCert.pem"))
    connector = aiohttp.TCPConnector(ssl=context, limit=4)
    timeout = aiohttp.ClientTimeout(total=WEBHOOK_TIMEOUT * 3)
    url = f"https://127.0.0.1:{running.server.https_port}/"
    results: list[float | None] = []

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        began = time.monotonic()
        try:
            async with session.post(
                url, data=_review(f"legit-{i}"), headers={"Content-Type": "application/json"},
                server_hostname=SERVER_NAME,
            ) as response:  # fmt: skip
                answer = await response.json()
            ok = response.status == 200 and answer["response"]["uid"] == f"legit-{i}"
        except (aiohttp.ClientError, TimeoutError, OSError):
            ok = False
        results.append(time.monotonic() - began if ok else None)

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = []
        for i in range(int(seconds / every)):
            tasks.append(asyncio.create_task(one(session, i)))
            await asyncio.sleep(every)
        await asyncio.gather(*tasks)
    return results


async def _attack(spec: AttackSpec) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubescale.sim.hostile_clients", json.dumps(asdict(spec)),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _outcomes(process: asyncio.subprocess.Process) -> list[dict[str, Any]]:
    stdout, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0
    outcomes: list[dict[str, Any]] = json.loads(stdout)
    return outcomes


def _spec(running: Running, **attack: Any) -> AttackSpec:
    return AttackSpec(
        host="127.0.0.1",
        port=running.server.https_port,
        server_name=SERVER_NAME,
        ca_file=str(running.cert_dir / "caCert.pem"),
        **attack,
    )


def _closed(running: Running, reason: str) -> float:
    value = running.server.registry.get_sample_value(
        "kubescale_https_connections_closed_total", {"reason": reason}
    )
    return value or 0.0


def _of(outcomes: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in outcomes if o["kind"] == kind]


SLACK = 1.0  # the machine is shared: the server may see a deadline late, never never


async def test_deadlines_close_stalled_connections_and_the_webhook_keeps_answering(
    guarded: Running,
) -> None:
    """Slowloris headers and stalled TLS handshakes, coming back as soon as they are closed:
    each connection is closed by its deadline, and the webhook keeps answering."""
    spec = _spec(guarded, slowloris=40, stalled_handshakes=8, trickle=0.2, hold=2.5,
                 reconnect=True)  # fmt: skip
    attackers = await _attack(spec)
    await asyncio.sleep(0.5)  # the attack is under way
    legit = await _legitimate(guarded, seconds=2.0, every=0.1)
    outcomes = await _outcomes(attackers)
    # the webhook answered every request within kube-apiserver's (shortest) timeout
    assert len(legit) == 20
    assert all(latency is not None and latency < WEBHOOK_TIMEOUT for latency in legit), legit
    assert all(o["connected"] and not o["error"] for o in outcomes), outcomes
    # slowloris: no connection lived past its header deadline, and they came back for more
    slowloris = _of(outcomes, "slowloris")
    assert len(slowloris) > 40
    assert max(o["open_for"] for o in slowloris) <= READ_HEADER_TIMEOUT + SLACK, slowloris
    assert _closed(guarded, "read-header-timeout") >= 40
    # stalled handshakes: the TLS handshake has the header deadline too
    handshakes = _of(outcomes, "stalled_handshake")
    assert max(o["open_for"] for o in handshakes) <= READ_HEADER_TIMEOUT + SLACK, handshakes
    assert _closed(guarded, "handshake") >= 8


async def test_stalled_bodies_are_refused_before_they_are_buffered(guarded: Running) -> None:
    """Eight connections announce 4.9 MiB bodies, send them but for the last byte, and stall:
    one fits the 6 MiB budget and is cut at the read deadline, the others are answered 503
    before a byte of their body is read — the process holds one body, not eight."""
    spec = _spec(guarded, stalled_bodies=8, hold=2.5)
    tracemalloc.start()
    try:
        baseline, _ = tracemalloc.get_traced_memory()
        attackers = await _attack(spec)
        await asyncio.sleep(0.5)
        legit = await _legitimate(guarded, seconds=1.0, every=0.1)
        outcomes = await _outcomes(attackers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(latency is not None and latency < WEBHOOK_TIMEOUT for latency in legit), legit
    bodies = _of(outcomes, "stalled_body")
    assert all(o["connected"] and not o["error"] for o in bodies), bodies
    # one 4.9 MiB body read into the handler as it arrives, not 8 × 4.9 MiB (main: 48 MiB)
    assert peak - baseline < 16 * MiB, (peak - baseline) / MiB
    # every stalled connection closed by its read deadline (before: all open until `hold`)
    assert max(o["open_for"] for o in bodies) <= READ_TIMEOUT + SLACK, bodies
    assert sorted(o["open_for"] for o in bodies)[-2] < READ_TIMEOUT  # only one was held
    # (the client may not read the 503: the server closes with the body unread, which resets)
    refused = guarded.server.registry.get_sample_value(
        "kubescale_https_requests_refused_body_budget_total"
    )
    assert refused == len(bodies) - 1
    assert _closed(guarded, "read-timeout") <= 1


async def test_at_the_connection_cap_the_longest_waiting_make_room(capped: Running) -> None:
    """Over twice the cap of slowloris connections, reconnecting as soon as they are closed:
    each new connection evicts one that has not completed a request, of the address holding
    the most connections, so kube-apiserver's connections — kept-alive or new — get through."""
    # from another address than kube-apiserver's (the test's 127.0.0.1), as on a cluster
    spec = _spec(capped, slowloris=45, trickle=0.2, hold=2.0, reconnect=True,
                 source="127.0.0.2")  # fmt: skip
    attackers = await _attack(spec)
    await asyncio.sleep(0.5)
    peak_open = 0.0

    async def watch_open() -> None:
        nonlocal peak_open
        while True:
            value = capped.server.registry.get_sample_value("kubescale_https_connections")
            peak_open = max(peak_open, value or 0.0)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_open())
    try:
        legit = await _legitimate(capped, seconds=1.5, every=0.1)
    finally:
        watcher.cancel()
    outcomes = await _outcomes(attackers)
    assert all(latency is not None and latency < WEBHOOK_TIMEOUT for latency in legit), legit
    assert peak_open <= 20
    assert _closed(capped, "evicted") >= 45 - 20  # 45 attackers (and the legit) on 20 places
    assert max(o["open_for"] for o in outcomes) <= READ_HEADER_TIMEOUT + SLACK


async def test_oversized_headers_are_answered_431(guarded: Running) -> None:
    context = ssl.create_default_context(cafile=str(guarded.cert_dir / "caCert.pem"))
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", guarded.server.https_port, ssl=context, server_hostname=SERVER_NAME
    )
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 8000 + b"\r\n")
    writer.write(b"X-Pad2: " + b"a" * 8000 + b"\r\n" + b"X-Pad3: " + b"a" * 1000 + b"\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=5)
    assert answer.startswith(b"HTTP/1.1 431 "), answer
    writer.close()
    assert _closed(guarded, "header-too-large") == 1


async def test_a_kept_alive_connection_is_closed_after_the_idle_timeout(cert_dir: Path) -> None:
    async for running in _serve(cert_dir, *LIMIT_FLAGS[:4], "--idle-timeout", "0.5s"):
        context = ssl.create_default_context(cafile=str(cert_dir / "caCert.pem"))
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", running.server.https_port, ssl=context, server_hostname=SERVER_NAME
        )
        body = _review("idle")
        writer.write(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), timeout=5)
        assert status.startswith(b"HTTP/1.1 200 "), status
        answered = time.monotonic()
        while await asyncio.wait_for(reader.read(4096), timeout=5):
            pass  # the rest of the answer, then the server's close
        idle = time.monotonic() - answered
        assert 0.4 <= idle <= 0.5 + SLACK, idle
        assert _closed(running, "idle-timeout") == 1
        writer.close()
