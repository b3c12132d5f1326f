"""``ServerTLS`` behind a real aiohttp listener: names, protocol floor, client certs, hot reload.

Every test talks to a real ``web.TCPSite`` on 127.0.0.1 through real TLS sockets. Clients trust
only the generated CA and verify with ``VERIFY_X509_STRICT`` (Python 3.13's default), and they
speak hand-written HTTP/1.1 so one connection can carry several requests (keep-alive across a
rotation). Keys are ECDSA and the CA is made once per module to keep the suite fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.certs.authority import (
    CertificateError,
    KeyPair,
    KeyType,
    generate_ca,
    issue_serving_certificate,
    service_dns_names,
    write_key_pairs,
)
from kubescale.certs.reloading import ServerTLS

NOW = datetime.now(UTC)  # OpenSSL checks validity against the real clock
SERVICE_NAMES = service_dns_names("kubescale-webhook", "kubescale-system")
LOOPBACK = "127.0.0.1"
ALL_NAMES = [*SERVICE_NAMES, LOOPBACK]
TIMEOUT = 5.0
RELOADS = "kubescale_certificate_reloads_total"
EXPIRY = "kubescale_certificate_expiry_timestamp_seconds"


# --- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return generate_ca(common_name="kubescale-test-ca", now=NOW, days=2, key_type="ecdsa")


@pytest.fixture(scope="module")
def other_ca() -> KeyPair:
    return generate_ca(common_name="someone-else", now=NOW, days=2, key_type="ecdsa")


def issue(ca: KeyPair, *, days: int = 1, key_type: KeyType = "ecdsa") -> KeyPair:
    return issue_serving_certificate(ca=ca, names=ALL_NAMES, now=NOW, days=days, key_type=key_type)


@dataclass(frozen=True)
class Files:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def write(directory: Path, *, ca: KeyPair, server: KeyPair) -> Files:
    written = write_key_pairs(directory, ca=ca, server=server)
    return Files(
        ca_cert=written["caCert.pem"],
        server_cert=written["serverCert.pem"],
        server_key=written["serverKey.pem"],
    )


@pytest.fixture
def first(ca: KeyPair) -> KeyPair:
    return issue(ca)


@pytest.fixture
def files(tmp_path: Path, ca: KeyPair, first: KeyPair) -> Files:
    return write(tmp_path / "tls", ca=ca, server=first)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def tls(files: Files, registry: CollectorRegistry) -> ServerTLS:
    server_tls = ServerTLS(
        cert_file=files.server_cert, key_file=files.server_key, registry=registry
    )
    server_tls.load()
    return server_tls


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@contextlib.asynccontextmanager
async def serving(tls: ServerTLS) -> AsyncIterator[int]:
    """Run an aiohttp app on 127.0.0.1 with ``tls``; yield its port."""
    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, LOOPBACK, 0, ssl_context=tls.listener_context())
        await site.start()
        host, port = runner.addresses[0][:2]
        assert host == LOOPBACK
        yield int(port)
    finally:
        await runner.cleanup()


@dataclass(frozen=True)
class Served:
    """The common setup: ``tls`` loaded from ``files`` (holding ``first``), served on ``port``."""

    tls: ServerTLS
    files: Files
    ca: KeyPair
    first: KeyPair
    registry: CollectorRegistry
    port: int


@pytest.fixture
async def served(
    tls: ServerTLS, files: Files, ca: KeyPair, first: KeyPair, registry: CollectorRegistry
) -> AsyncIterator[Served]:
    async with serving(tls) as port:
        yield Served(tls=tls, files=files, ca=ca, first=first, registry=registry, port=port)


@contextlib.contextmanager
def no_tls_deprecation_warnings() -> Iterator[None]:
    """Setting TLS 1.0/1.1 as a bound warns; the tests do it on purpose."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def client_context(
    ca: KeyPair,
    *,
    maximum_version: ssl.TLSVersion | None = None,
    certificate: tuple[Path, Path] | None = None,
) -> ssl.SSLContext:
    """A client that trusts only ``ca`` and verifies strictly (hostname checking on)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=ca.cert_pem.decode("ascii"))
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    if maximum_version is not None:
        with no_tls_deprecation_warnings():
            context.minimum_version = ssl.TLSVersion.TLSv1
            context.maximum_version = maximum_version
        # OpenSSL 3 would refuse TLS < 1.2 itself at security level >= 1: make any refusal the
        # server's.
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
    if certificate is not None:
        context.load_cert_chain(*certificate)
    return context


class Connection:
    """One TLS connection speaking HTTP/1.1 with keep-alive."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @property
    def ssl_object(self) -> ssl.SSLObject:
        ssl_object = self.writer.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        return ssl_object

    @property
    def peer_serial(self) -> int:
        der = self.ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    async def get(self, host: str) -> tuple[int, bytes]:
        self.writer.write(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("ascii"))
        async with asyncio.timeout(TIMEOUT):
            await self.writer.drain()
            head = await self.reader.readuntil(b"\r\n\r\n")
            status_line, *header_lines = head.decode("latin-1").split("\r\n")
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in header_lines if line)
            }
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return int(status_line.split()[1]), body

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await self.writer.wait_closed()


@contextlib.asynccontextmanager
async def connect(port: int, context: ssl.SSLContext, name: str) -> AsyncIterator[Connection]:
    async with asyncio.timeout(TIMEOUT):
        reader, writer = await asyncio.open_connection(
            LOOPBACK, port, ssl=context, server_hostname=name
        )
    connection = Connection(reader, writer)
    try:
        yield connection
    finally:
        await connection.close()


async def fetch(port: int, context: ssl.SSLContext, name: str) -> tuple[int, bytes, int]:
    """One request on a fresh connection: status, body, and the served certificate's serial."""
    async with connect(port, context, name) as connection:
        status, body = await connection.get(name)
        return status, body, connection.peer_serial


# The ways a refused TLS client sees the refusal: an alert (SSLError), a reset, or - for a
# TLS 1.3 client certificate rejected after the client's side of the handshake - EOF.
REFUSED = (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)


def serial(pair: KeyPair) -> int:
    return pair.certificate.serial_number


# --- names and verification ------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
async def test_every_san_name_connects(served: Served, name: str) -> None:
    status, body, peer_serial = await fetch(served.port, client_context(served.ca), name)
    assert (status, body) == (200, b"ok")
    assert peer_serial == serial(served.first)


async def test_a_name_not_in_the_certificate_fails_verification(served: Served) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        await fetch(served.port, client_context(served.ca), "kubescale-webhook.default.svc")


async def test_a_client_trusting_another_ca_fails_verification(
    served: Served, other_ca: KeyPair
) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        await fetch(served.port, client_context(other_ca), SERVICE_NAMES[2])


async def test_rsa_serving_certificate_passes_strict_verification(
    tmp_path: Path, registry: CollectorRegistry
) -> None:
    rsa_ca = generate_ca(common_name="rsa-ca", now=NOW, days=2, key_type="rsa")
    pair = issue(rsa_ca, key_type="rsa")
    written = write(tmp_path, ca=rsa_ca, server=pair)
    tls = ServerTLS(cert_file=written.server_cert, key_file=written.server_key, registry=registry)
    tls.load()
    async with serving(tls) as rsa_port:
        status, _, peer_serial = await fetch(rsa_port, client_context(rsa_ca), SERVICE_NAMES[2])
    assert status == 200
    assert peer_serial == serial(pair)


# --- protocol versions -----------------------------------------------------------------------


async def start_permissive_control_server(files: Files) -> asyncio.Server:
    """A plain server that does accept TLS 1.0/1.1, proving the test client can speak it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with no_tls_deprecation_warnings():
        context.minimum_version = ssl.TLSVersion.TLSv1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.load_cert_chain(files.server_cert, files.server_key)

    async def reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\ncontrol")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(reply, LOOPBACK, 0, ssl=context)


async def test_tls_1_1_client_is_refused(served: Served) -> None:
    old_client = client_context(served.ca, maximum_version=ssl.TLSVersion.TLSv1_1)

    control = await start_permissive_control_server(served.files)
    try:
        control_port = control.sockets[0].getsockname()[1]
        async with connect(control_port, old_client, SERVICE_NAMES[2]) as connection:
            assert connection.ssl_object.version() == "TLSv1.1"
    finally:
        control.close()
        await control.wait_closed()

    with pytest.raises(REFUSED):
        await fetch(served.port, old_client, SERVICE_NAMES[2])


async def test_min_version_tls_1_3_refuses_a_tls_1_2_client(
    files: Files, registry: CollectorRegistry, ca: KeyPair
) -> None:
    tls = ServerTLS(
        cert_file=files.server_cert,
        key_file=files.server_key,
        min_version=ssl.TLSVersion.TLSv1_3,
        registry=registry,
    )
    tls.load()
    assert tls.listener_context().minimum_version is ssl.TLSVersion.TLSv1_3
    async with serving(tls) as tls13_port:
        with pytest.raises(REFUSED):
            await fetch(
                tls13_port,
                client_context(ca, maximum_version=ssl.TLSVersion.TLSv1_2),
                SERVICE_NAMES[2],
            )
        async with connect(tls13_port, client_context(ca), SERVICE_NAMES[2]) as connection:
            assert connection.ssl_object.version() == "TLSv1.3"
            assert await connection.get(SERVICE_NAMES[2]) == (200, b"ok")


@pytest.mark.parametrize(
    ("requested", "effective"),
    [
        (ssl.TLSVersion.MINIMUM_SUPPORTED, ssl.TLSVersion.TLSv1_2),
        (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_2),
        (ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_2),
        (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
        (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3),
        (ssl.TLSVersion.MAXIMUM_SUPPORTED, ssl.TLSVersion.TLSv1_3),
    ],
    ids=lambda version: str(version.name),
)
def test_minimum_version_is_never_below_tls_1_2(
    files: Files, registry: CollectorRegistry, requested: ssl.TLSVersion, effective: ssl.TLSVersion
) -> None:
    tls = ServerTLS(
        cert_file=files.server_cert,
        key_file=files.server_key,
        min_version=requested,
        registry=registry,
    )
    tls.load()
    listener = tls.listener_context()
    assert listener.minimum_version is effective
    assert listener.verify_mode is ssl.CERT_NONE
    assert listener.sni_callback is not None
    assert tls.listener_context() is listener


# --- hot reload ------------------------------------------------------------------------------


async def test_rotation_serves_new_connections_and_keeps_established_ones(
    served: Served,
) -> None:
    tls, ca, first, registry = served.tls, served.ca, served.first, served.registry
    context = client_context(ca)
    name = SERVICE_NAMES[2]
    assert registry.get_sample_value(EXPIRY) == first.certificate.not_valid_after_utc.timestamp()

    async with connect(served.port, context, name) as before:
        assert await before.get(name) == (200, b"ok")
        assert before.peer_serial == serial(first)

        assert tls.reload_if_changed() is False  # nothing changed yet
        second = issue(ca, days=2)
        write(served.files.ca_cert.parent, ca=ca, server=second)
        assert tls.reload_if_changed() is True
        assert tls.reload_if_changed() is False  # the new content is now current
        assert tls.certificate.serial_number == serial(second)

        for new_name in (name, LOOPBACK):  # with SNI, and without (IP literal: no SNI sent)
            status, _, peer_serial = await fetch(served.port, context, new_name)
            assert status == 200
            assert peer_serial == serial(second)

        # The keep-alive connection from before the rotation still works, on its old certificate.
        assert await before.get(name) == (200, b"ok")
        assert before.peer_serial == serial(first)

    assert registry.get_sample_value(RELOADS, {"result": "success"}) == 2  # load + reload
    assert registry.get_sample_value(RELOADS, {"result": "failure"}) == 0
    assert registry.get_sample_value(EXPIRY) == second.certificate.not_valid_after_utc.timestamp()


@dataclass(frozen=True)
class Breakage:
    """A bad state of the files, and the file + reason the warning must name."""

    id: str
    file: str
    reason: str

    def apply(self, files: Files, *, ca: KeyPair) -> None:
        if self.id == "garbage-cert":
            files.server_cert.write_bytes(b"-----BEGIN CERTIFICATE-----\ngarbage\n")
        elif self.id == "garbage-key":
            files.server_key.write_bytes(b"not a key at all")
        elif self.id == "mismatched-key":  # new certificate, old key: caught mid-rotation
            files.server_cert.write_bytes(issue(ca).cert_pem)
        elif self.id == "missing-key":
            files.server_key.unlink()
        else:
            raise AssertionError(self.id)


BREAKAGES = [
    Breakage("garbage-cert", "serverCert.pem", "not a PEM certificate"),
    Breakage("garbage-key", "serverKey.pem", "not a usable unencrypted PEM private key"),
    Breakage("mismatched-key", "serverKey.pem", "does not match"),
    Breakage("missing-key", "serverKey.pem", "cannot read"),
]


@pytest.mark.parametrize("breakage", BREAKAGES, ids=[b.id for b in BREAKAGES])
async def test_a_bad_replacement_keeps_the_old_certificate_until_fixed(
    served: Served, caplog: pytest.LogCaptureFixture, breakage: Breakage
) -> None:
    tls, ca, first, registry = served.tls, served.ca, served.first, served.registry
    context = client_context(ca)
    name = SERVICE_NAMES[3]
    breakage.apply(served.files, ca=ca)

    with caplog.at_level(logging.WARNING, logger="certs.reloading"):
        assert tls.reload_if_changed() is False
    assert registry.get_sample_value(RELOADS, {"result": "failure"}) == 1
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert breakage.file in warning.getMessage()
    assert breakage.reason in warning.getMessage()
    assert tls.certificate.serial_number == serial(first)
    assert (await fetch(served.port, context, name))[2] == serial(first)

    # Not remembered as current: the next poll tries (and fails) again.
    assert tls.reload_if_changed() is False
    assert registry.get_sample_value(RELOADS, {"result": "failure"}) == 2

    fixed = issue(ca)
    write(served.files.ca_cert.parent, ca=ca, server=fixed)
    assert tls.reload_if_changed() is True
    assert (await fetch(served.port, context, name))[2] == serial(fixed)
    assert registry.get_sample_value(RELOADS, {"result": "success"}) == 2


# --- first load ------------------------------------------------------------------------------


@pytest.mark.parametrize("breakage", BREAKAGES, ids=[b.id for b in BREAKAGES])
def test_load_names_the_broken_file(
    files: Files, registry: CollectorRegistry, ca: KeyPair, breakage: Breakage
) -> None:
    breakage.apply(files, ca=ca)
    tls = ServerTLS(cert_file=files.server_cert, key_file=files.server_key, registry=registry)
    with pytest.raises(CertificateError, match=breakage.reason) as info:
        tls.load()
    assert breakage.file in str(info.value)
    assert not tls.loaded
    assert registry.get_sample_value(RELOADS, {"result": "failure"}) == 1
    with pytest.raises(RuntimeError, match="load"):
        tls.listener_context()
    with pytest.raises(RuntimeError, match="load"):
        tls.reload_if_changed()


def test_load_names_a_broken_client_ca(files: Files, registry: CollectorRegistry) -> None:
    bad_ca = files.ca_cert.with_name("clientCA.pem")
    bad_ca.write_bytes(b"nothing here")
    tls = ServerTLS(
        cert_file=files.server_cert,
        key_file=files.server_key,
        client_ca_file=bad_ca,
        registry=registry,
    )
    with pytest.raises(CertificateError, match=r"clientCA\.pem"):
        tls.load()


def test_require_client_cert_needs_a_client_ca(files: Files, registry: CollectorRegistry) -> None:
    with pytest.raises(ValueError, match="client_ca_file"):
        ServerTLS(
            cert_file=files.server_cert,
            key_file=files.server_key,
            require_client_cert=True,
            registry=registry,
        )


# --- client certificates ---------------------------------------------------------------------


def client_pair_files(directory: Path, pair: KeyPair) -> tuple[Path, Path]:
    cert_file, key_file = directory / "client.pem", directory / "client.key"
    cert_file.write_bytes(pair.cert_pem)
    key_file.write_bytes(pair.key_pem)
    return cert_file, key_file


async def test_required_client_certificate(
    files: Files, registry: CollectorRegistry, ca: KeyPair, other_ca: KeyPair, tmp_path: Path
) -> None:
    tls = ServerTLS(
        cert_file=files.server_cert,
        key_file=files.server_key,
        client_ca_file=files.ca_cert,
        require_client_cert=True,
        registry=registry,
    )
    tls.load()
    assert tls.listener_context().verify_mode is ssl.CERT_REQUIRED
    name = SERVICE_NAMES[2]
    ours = client_pair_files(tmp_path, issue(ca))
    (tmp_path / "other").mkdir()
    theirs = client_pair_files(tmp_path / "other", issue(other_ca))

    async with serving(tls) as mtls_port:
        with pytest.raises(REFUSED):
            await fetch(mtls_port, client_context(ca), name)
        with pytest.raises(REFUSED):
            await fetch(mtls_port, client_context(ca, certificate=theirs), name)
        status, body, _ = await fetch(mtls_port, client_context(ca, certificate=ours), name)
        assert (status, body) == (200, b"ok")

        # Still enforced for connections switched to a reloaded context.
        write(files.ca_cert.parent, ca=ca, server=issue(ca))
        assert tls.reload_if_changed() is True
        with pytest.raises(REFUSED):
            await fetch(mtls_port, client_context(ca), name)
        status, _, _ = await fetch(mtls_port, client_context(ca, certificate=ours), name)
        assert status == 200


async def test_optional_client_ca_does_not_demand_a_certificate(
    files: Files, registry: CollectorRegistry, ca: KeyPair
) -> None:
    tls = ServerTLS(
        cert_file=files.server_cert,
        key_file=files.server_key,
        client_ca_file=files.ca_cert,
        registry=registry,
    )
    tls.load()
    assert tls.listener_context().verify_mode is ssl.CERT_NONE
    async with serving(tls) as plain_port:
        status, _, _ = await fetch(plain_port, client_context(ca), SERVICE_NAMES[2])
    assert status == 200


# --- the watch loop --------------------------------------------------------------------------


async def test_watch_picks_up_a_change_on_the_next_tick_and_stops(
    tls: ServerTLS, files: Files, ca: KeyPair, first: KeyPair
) -> None:
    clock = VirtualClock()
    stop = asyncio.Event()
    watcher = asyncio.create_task(tls.watch(clock=clock, interval=30.0, stop=stop))
    try:
        await clock.advance(0)
        assert clock.sleepers == 1

        second = issue(ca)
        write(files.ca_cert.parent, ca=ca, server=second)
        await clock.advance(29.0)
        assert tls.certificate.serial_number == serial(first)  # not due yet
        await clock.advance(1.0)
        assert tls.certificate.serial_number == serial(second)
        assert clock.sleepers == 1  # back to sleep for the next tick

        stop.set()
        async with asyncio.timeout(TIMEOUT):
            await watcher
        assert clock.sleepers == 0
    finally:
        watcher.cancel()


async def test_watch_logs_and_counts_unexpected_errors_and_keeps_going(
    tls: ServerTLS,
    registry: CollectorRegistry,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def explode() -> bool:
        calls.append(1)
        raise OSError("disk on fire")

    monkeypatch.setattr(tls, "reload_if_changed", explode)
    clock = VirtualClock()
    stop = asyncio.Event()
    watcher = asyncio.create_task(tls.watch(clock=clock, interval=10.0, stop=stop))
    try:
        with caplog.at_level(logging.ERROR, logger="certs.reloading"):
            await clock.advance(10.0)
            await clock.advance(10.0)
        assert len(calls) == 2
        assert not watcher.done()
        assert registry.get_sample_value(RELOADS, {"result": "failure"}) == 2
        assert "disk on fire" in caplog.text
        stop.set()
        async with asyncio.timeout(TIMEOUT):
            await watcher
    finally:
        watcher.cancel()


async def test_watch_can_be_cancelled(tls: ServerTLS) -> None:
    clock = VirtualClock()
    watcher = asyncio.create_task(tls.watch(clock=clock, interval=5.0, stop=asyncio.Event()))
    await clock.advance(0)
    watcher.cancel()
    with pytest.raises(asyncio.CancelledError):
        await watcher
    assert clock.sleepers == 0
