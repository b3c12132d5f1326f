"""The lean lane over real TLS sockets, on both loops: the webhook answers the same bytes in
either lane (``Date`` aside), pipelined requests of both lanes are answered in order, a client's
``Connection: close`` is honoured, and the lean lane keeps the webhook's metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.runtime.guarded_listener import GuardedListener
from kubescale.runtime.https_server import lean_routes, make_https_app
from kubescale.runtime.server_limits import ServerLimits
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings
from tests.platform.test_serve_under_attack import _review
from tests.runtime.test_lean_lane_property import (
    expected_bodies,
    mount_echo,
    parse_answers,
    request_bytes,
)

BOTH_EVENT_LOOPS = True
SERVER_NAME = "kubescale.kube-system.svc"


class Lanes:
    def __init__(self, port: int, cert_dir: Path, webhook: AdmissionWebhook) -> None:
        self.port = port
        self.cert_dir = cert_dir
        self.webhook = webhook

    async def exchange(self, data: bytes, *, until_closed: bool = False) -> bytes:
        """Send ``data`` in one write; read until the server closes, or until it is quiet."""
        context = ssl.create_default_context(cafile=str(self.cert_dir / "caCert.pem"))
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=context, server_hostname=SERVER_NAME
        )
        writer.write(data)
        received = b""
        try:
            while True:
                chunk = await asyncio.wait_for(
                    reader.read(65536), timeout=5 if until_closed else 0.5
                )
                if not chunk:
                    return received
                received += chunk
        except TimeoutError:
            assert not until_closed, "the server did not close the connection"
            return received
        finally:
            writer.close()


@pytest.fixture
async def lanes(cert_dir: Path) -> AsyncIterator[Lanes]:
    registry = CollectorRegistry()
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=registry)
    app = make_https_app()
    webhook.mount(app)
    mount_echo(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    assert runner.server is not None
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert_dir / "serverCert.pem", cert_dir / "serverKey.pem")
    listener = GuardedListener(
        server=runner.server,
        ssl_context=tls,
        limits=ServerLimits(),
        host="127.0.0.1",
        port=0,
        registry=registry,
        logger=logging.getLogger("test"),
        lean=lean_routes(app),
    )
    await listener.start()
    try:
        yield Lanes(listener.port, cert_dir, webhook)
    finally:
        await listener.stop()
        await runner.cleanup()


def _split(answer: bytes) -> tuple[list[bytes], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return [line for line in head.split(b"\r\n") if not line.startswith(b"Date: ")], body


async def test_the_webhook_answers_the_same_in_either_lane(lanes: Lanes) -> None:
    body = _review("same-uid")
    lean = (
        b"POST /?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )
    # chunked: only aiohttp takes it
    chunked = (
        b"POST /?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
        % (len(body), body)
    )
    lean_answer = await lanes.exchange(lean, until_closed=True)
    aiohttp_answer = await lanes.exchange(chunked, until_closed=True)
    assert _split(lean_answer) == _split(aiohttp_answer)
    assert json.loads(_split(lean_answer)[1])["response"] == {"uid": "same-uid", "allowed": True}
    # both were observed as upstream's latency metric: a pod admitted unmutated (no caches)
    samples = {
        (s.name, s.labels.get("status"), s.labels.get("resource")): s.value
        for metric in lanes.webhook.metrics.latency.collect()
        for s in metric.samples
    }
    count = ("vpa_admission_controller_admission_latency_seconds_count", "skipped", "Pod")
    assert samples[count] == 2


async def test_pipelined_requests_of_both_lanes_are_answered_in_order(lanes: Lanes) -> None:
    requests = [("lean", b"a1"), ("wait", b"b2"), ("lean", b"c3"), ("chunked", b"d4"),
                ("lean", b"e5"), ("wait", b"f6")]  # fmt: skip
    written = await lanes.exchange(b"".join(request_bytes(k, p) for k, p in requests))
    assert parse_answers(written) == expected_bodies(requests)
    assert parse_answers(written)[:4] == [
        b"lean:a1",
        b"lean-later:wait-b2",
        b"lean:c3",
        b"aiohttp:d4",
    ]


async def test_a_clients_connection_close_is_answered_and_honoured(lanes: Lanes) -> None:
    request = request_bytes("lean", b"x").replace(
        b"Content-Length", b"Connection: close\r\nContent-Length"
    )
    # a request pipelined after the close is not answered
    answer = await lanes.exchange(request + request_bytes("lean", b"y"), until_closed=True)
    assert parse_answers(answer) == [b"lean:x"]
    assert b"\r\nConnection: close\r\n" in answer
