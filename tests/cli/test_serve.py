"""``kubescale serve`` and the CLI end to end: real sockets, real TLS, real signals."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser, main
from kubescale.cli.serve import LoopSpec, Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.components import REGISTRY
from kubescale.runtime.server_limits import ServerLimits

SERVICE, NAMESPACE = "kubescale", "kube-system"
SAN_NAMES = [
    "kubescale",
    "kubescale.kube-system",
    "kubescale.kube-system.svc",
    "kubescale.kube-system.svc.cluster.local",
]


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    code = main(
        [
            "certs",
            "--service",
            SERVICE,
            "--namespace",
            NAMESPACE,
            "--out",
            str(out),
            "--key-type",
            "ecdsa",
            "--san",
            "127.0.0.1",
        ]
    )
    assert code == 0
    return out


def _client_context(ca_file: Path, *, max_version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(ca_file))
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if max_version is not None:  # an old client, allowed to offer what the server must refuse
        ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        ctx.maximum_version = max_version
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    return ctx


def _serve_args(cert_dir: Path, *extra: str) -> list[str]:
    return [
        "serve",
        "--port",
        "0",
        "--bind-address",
        "127.0.0.1",
        "--address",
        "127.0.0.1:0",
        "--tls-cert-file",
        str(cert_dir / "serverCert.pem"),
        "--tls-private-key",
        str(cert_dir / "serverKey.pem"),
        "--client-ca-file",
        str(cert_dir / "caCert.pem"),
        *extra,
    ]


def _echo_routes(app: web.Application) -> None:
    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(text=f"read {len(body)} bytes")

    app.router.add_post("/echo", echo)


@pytest.fixture
async def running(cert_dir: Path) -> AsyncIterator[Server]:
    config = serve_config_from_args(build_parser().parse_args(_serve_args(cert_dir)))
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(
            config,
            clock=RealClock(),
            mounts=[_echo_routes],
            started=started,
            install_signal_handlers=False,
        )
    )
    server = await asyncio.wait_for(started, timeout=GUARD)
    yield server
    server.stop_event.set()
    assert await asyncio.wait_for(task, timeout=GUARD) == 0


async def _handshake(port: int, ctx: ssl.SSLContext, name: str) -> bytes:
    _reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname=name
    )
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        cert: bytes = ssl_object.getpeercert(binary_form=True)
        return cert
    finally:
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize("name", SAN_NAMES)
async def test_tls_by_each_service_name(running: Server, cert_dir: Path, name: str) -> None:
    assert await _handshake(running.https_port, _client_context(cert_dir / "caCert.pem"), name)


async def test_tls_refuses_a_wrong_name(running: Server, cert_dir: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(
            running.https_port, _client_context(cert_dir / "caCert.pem"), "other.kube-system.svc"
        )


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_tls_1_1_is_refused(running: Server, cert_dir: Path) -> None:
    ctx = _client_context(cert_dir / "caCert.pem", max_version=ssl.TLSVersion.TLSv1_1)
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        await _handshake(running.https_port, ctx, SAN_NAMES[2])


async def test_readiness_metrics_and_body_limit(running: Server, cert_dir: Path) -> None:
    ctx = _client_context(cert_dir / "caCert.pem")
    health = f"http://127.0.0.1:{running.health_port}"
    resolver = _PinnedResolver({SAN_NAMES[2]: "127.0.0.1"})
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver)) as http:
        async with http.get(f"{health}/readyz") as resp:
            assert (resp.status, await resp.text()) == (200, "ok")
        async with http.get(f"{health}/metrics") as resp:
            assert "kubescale_certificate_expiry_timestamp_seconds" in await resp.text()
        url = f"https://{SAN_NAMES[2]}:{running.https_port}/echo"
        async with http.post(url, data=b"x" * 1024, ssl=ctx) as resp:
            assert (resp.status, await resp.text()) == (200, "read 1024 bytes")
        async with http.post(url, data=b"x" * (5 * 1024 * 1024 + 1), ssl=ctx) as resp:
            assert resp.status == 413

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(6):
                yield b"y" * (1024 * 1024)

        async with http.post(url, data=chunks(), ssl=ctx) as resp:
            assert resp.status == 413  # no Content-Length: refused while reading


class _PinnedResolver(aiohttp.abc.AbstractResolver):
    """Resolves the Service names to loopback, as cluster DNS would to the Service IP."""

    def __init__(self, hosts: dict[str, str]) -> None:
        self._hosts = hosts

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[aiohttp.abc.ResolveResult]:
        return [
            {
                "hostname": host,
                "host": self._hosts[host],
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None


def test_cli_help_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["serve"], ["certs"]):
        with pytest.raises(SystemExit) as exit_info:
            main([*argv, "--help"])
        assert exit_info.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: kubescale")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = capsys.readouterr().out
    for flag in (
        "--port",
        "--address",
        "--tls-cert-file",
        "--tls-private-key",
        "--client-ca-file",
        "--min-tls-version",
        "--kubeconfig",
        "--log-format",
        "--reload-cert",
    ):
        assert flag in text


def test_server_limit_flags_and_their_defaults() -> None:
    # Go http.Server names; defaults: see kubescale/runtime/server_limits.py for why each.
    defaults = serve_config_from_args(build_parser().parse_args(["serve"])).limits
    assert defaults == ServerLimits(
        read_header_timeout=10.0,
        read_timeout=30.0,
        idle_timeout=120.0,
        max_header_bytes=64 * 1024,
        max_connections=512,
        max_in_flight_body_bytes=64 * 1024 * 1024,
    )
    assert defaults.tls_handshake_timeout == 10.0  # Go: the shortest read timeout
    argv = ["serve", "--read-header-timeout", "2s", "--read-timeout", "1m", "--idle-timeout",
            "90s", "--max-header-bytes", "32Ki", "--max-connections", "100",
            "--max-in-flight-body-bytes", "128Mi"]  # fmt: skip
    limits = serve_config_from_args(build_parser().parse_args(argv)).limits
    assert limits == ServerLimits(
        read_header_timeout=2.0,
        read_timeout=60.0,
        idle_timeout=90.0,
        max_header_bytes=32 * 1024,
        max_connections=100,
        max_in_flight_body_bytes=128 * 1024 * 1024,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["serve", "--port", "99999"], "argument --port: port 99999 out of range 0-65535"),
        (["serve", "--address", "8944"], "--address: invalid address '8944'"),
        (["serve", "--min-tls-version", "tls1_1"], "argument --min-tls-version: invalid choice"),
        (["serve", "--tls-ciphers", "TLS_FOO"], "--tls-ciphers: unknown cipher suite 'TLS_FOO'"),
        (["serve", "--log-format", "xml"], "argument --log-format/--logging-format"),
        (["serve", "--bind-address", "nohost"], "--bind-address: invalid IP address 'nohost'"),
        (["serve", "--port", "9000", "--address", ":9000"], "--port and --address both use"),
        (["serve", "--cert-reload-interval", "0s"], "argument --cert-reload-interval"),
        (
            ["serve", "--read-header-timeout", "40s"],
            "--read-header-timeout: must not be longer than --read-timeout (40s > 30s)",
        ),
        (["serve", "--read-timeout", "0s"], "argument --read-timeout: duration must be > 0"),
        (["serve", "--max-connections", "0"], "--max-connections: must be at least 1"),
        (["serve", "--max-connections", "many"], "argument --max-connections: invalid count"),
        (["serve", "--max-header-bytes", "lots"], "argument --max-header-bytes: invalid byte"),
        (["serve", "--max-header-bytes", "1Ki"], "--max-header-bytes: must be at least 4Ki"),
        (
            ["serve", "--max-in-flight-body-bytes", "1Mi"],
            "--max-in-flight-body-bytes: must be at least 5Mi",
        ),
        (
            ["serve", "--leader-elect-resource-name", "../secrets"],
            "--leader-elect-resource-name: '../secrets' is not a valid Lease name",
        ),
        (
            ["serve", "--leader-elect-resource-namespace", "kube system"],
            "--leader-elect-resource-namespace: 'kube system' is not a valid namespace",
        ),
        (["certs", "--service", "Bad_Name", "--namespace", "ns", "--out", "/tmp/x"], "Bad_Name"),
        (
            ["certs", "--service", "s", "--namespace", "ns", "--out", "/tmp/x", "--days", "0"],
            "argument --days: must be at least 1 day",
        ),
        (["nope"], "invalid choice: 'nope'"),
    ],
)
def test_bad_flags_exit_nonzero_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code  # type: ignore[assignment]
    assert code not in (0, None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert message in err


def test_certs_command_writes_files_and_prints_the_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "certs",
                "--service",
                SERVICE,
                "--namespace",
                NAMESPACE,
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    bundle = capsys.readouterr().out.strip()
    ca_pem = (tmp_path / "out" / "caCert.pem").read_bytes()
    assert base64.b64decode(bundle) == ca_pem
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "caCert.pem",
        "caKey.pem",
        "serverCert.pem",
        "serverKey.pem",
    ]
    assert (tmp_path / "out" / "serverKey.pem").stat().st_mode & 0o777 == 0o600
    # rotating the leaf with the same CA keeps the caBundle
    out2 = tmp_path / "rotated"
    assert (
        main(
            [
                "certs",
                "--service",
                SERVICE,
                "--namespace",
                NAMESPACE,
                "--out",
                str(out2),
                "--ca-cert",
                str(tmp_path / "out" / "caCert.pem"),
                "--ca-key",
                str(tmp_path / "out" / "caKey.pem"),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == bundle
    assert (out2 / "serverCert.pem").read_bytes() != (
        tmp_path / "out" / "serverCert.pem"
    ).read_bytes()


GUARD = 600.0
"""Seconds a wait for a process or a task lasts at most: a guard against a hang, never a bound
on how fast it is (a loaded machine stretches start-up; issue 32.7)."""


def _kubescale_command() -> list[str]:
    script = Path(sys.executable).with_name("kubescale")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kubescale"]


def _wait_for(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_process_serves_and_stops_cleanly_on_sigterm(cert_dir: Path, tmp_path: Path) -> None:
    health_port = _free_port()
    argv = _serve_args(cert_dir, "--log-format", "json")
    argv[argv.index("127.0.0.1:0")] = f"127.0.0.1:{health_port}"
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as log_out:
        proc = subprocess.Popen(
            [*_kubescale_command(), *argv],
            stderr=log_out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:

            def ready() -> bool:
                try:
                    with socket.create_connection(("127.0.0.1", health_port), timeout=0.2):
                        return True
                except OSError:
                    assert proc.poll() is None, log_file.read_text()
                    return False

            _wait_for(ready, timeout=GUARD)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=GUARD) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    records = [json.loads(line) for line in log_file.read_text().splitlines() if line.strip()]
    assert {"ts", "level", "component", "msg"} <= set(records[0])
    messages = [(r["component"], r["msg"]) for r in records]
    assert ("serve", "serving") in messages
    assert ("serve", "stopped") in messages


def test_a_missing_certificate_ends_the_process_with_a_clear_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            *_kubescale_command(),
            "serve",
            "--port",
            "0",
            "--address",
            "127.0.0.1:0",
            "--tls-cert-file",
            str(tmp_path / "none.pem"),
            "--tls-private-key",
            str(tmp_path / "none-key.pem"),
        ],
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert proc.returncode == 1
    assert "none.pem" in proc.stderr


async def test_serve_picks_up_rotated_certificates(cert_dir: Path, tmp_path: Path) -> None:
    live = tmp_path / "live"
    shutil.copytree(cert_dir, live)
    args = _serve_args(live, "--cert-reload-interval", "50ms")
    config = serve_config_from_args(build_parser().parse_args(args))
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), started=started, install_signal_handlers=False)
    )
    server = await asyncio.wait_for(started, timeout=GUARD)
    ctx = _client_context(live / "caCert.pem")
    try:
        before = x509.load_der_x509_certificate(
            await _handshake(server.https_port, ctx, SAN_NAMES[3])
        )
        assert (
            main(
                [
                    "certs",
                    "--service",
                    SERVICE,
                    "--namespace",
                    NAMESPACE,
                    "--out",
                    str(live),
                    "--key-type",
                    "ecdsa",
                    "--ca-cert",
                    str(live / "caCert.pem"),
                    "--ca-key",
                    str(live / "caKey.pem"),
                ]
            )
            == 0
        )

        async def served_serial() -> int:
            der = await _handshake(server.https_port, ctx, SAN_NAMES[3])
            return x509.load_der_x509_certificate(der).serial_number

        deadline = asyncio.get_running_loop().time() + 10
        while await served_serial() == before.serial_number:
            assert asyncio.get_running_loop().time() < deadline, "rotation not picked up"
            await asyncio.sleep(0.05)
        assert server.tls is not None
        assert server.tls.certificate.serial_number == await served_serial()
    finally:
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=GUARD) == 0


class _SlowLoop:
    """An iteration that is in progress when SIGTERM arrives, finishing when released."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.completed = 0

    @property
    def name(self) -> str:
        return "slow"

    async def run_once(self, now: datetime) -> None:
        self.entered.set()
        await self.release.wait()
        self.completed += 1


async def test_sigterm_lets_the_running_iteration_finish(cert_dir: Path) -> None:
    argv = _serve_args(cert_dir, "--leader-elect=false")
    config = serve_config_from_args(build_parser().parse_args(argv))
    slow = _SlowLoop()
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(
            config,
            clock=RealClock(),
            loops=[LoopSpec(loop=slow, interval=60)],
            started=started,
            install_signal_handlers=True,
        )
    )
    await asyncio.wait_for(started, timeout=GUARD)
    await asyncio.wait_for(slow.entered.wait(), timeout=GUARD)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.sleep(0.2)
    assert not task.done()  # waiting for the iteration, not killing it
    slow.release.set()
    assert await asyncio.wait_for(task, timeout=GUARD) == 0
    assert slow.completed == 1


def test_serve_runs_only_the_systems_it_is_configured_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # `serve --kubeconfig F` and nothing else: the VPA and the HPA run (auto, with
    # --kubeconfig); the cluster autoscaler (deletes nodes: needs --cloud-provider or
    # --node-group-auto-discovery, as upstream needs --cloud-provider) and the descheduler and
    # its extender (evict pods: need a policy) do not. The log names each and why.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    config = serve_config_from_args(
        build_parser().parse_args(["serve", "--kubeconfig", str(kubeconfig)])
    )
    with caplog.at_level(logging.INFO, logger="kubescale"):
        names = {c.name for c in default_components(config, environ={})}
    assert names == {"webhook", "vpa-recommender", "vpa-updater", "hpa-controller"}
    lines = [r.getMessage() for r in caplog.records if r.name == "kubescale.serve"]
    assert (
        "the cluster autoscaler is off: --cluster-autoscaler auto, but no --cloud-provider and "
        "no --node-group-auto-discovery"
    ) in lines
    assert any(
        line.endswith("is off: --descheduler auto, but no policy (--policy-config-file or "
                      "--descheduler-policy)")
        for line in lines
    ), lines  # fmt: skip
    assert any(line.endswith("runs: --webhook auto, --kubeconfig given") for line in lines), lines
    assert len(lines) == len(REGISTRY)  # one line per system, runs or not
    # configured: the autoscaler runs with --cloud-provider, or with an explicit discovery
    for flags in (["--cloud-provider", "clusterapi"],
                  ["--node-group-auto-discovery", "clusterapi:namespace=default"],
                  ["--cluster-autoscaler", "true"]):  # fmt: skip
        argv = ["serve", "--kubeconfig", str(kubeconfig), *flags]
        config = serve_config_from_args(build_parser().parse_args(argv))
        assert "cluster-autoscaler" in {c.name for c in default_components(config, environ={})}
