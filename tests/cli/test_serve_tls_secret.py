"""``kubescale serve --tls-secret-name``: no certificate files at start, two replicas, one Secret.

What ``helm install`` with default values runs: the serving files are not mounted but written
from the Secret the first replica creates; the second replica serves the same certificate.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.resources import SECRETS
from kubescale.runtime.process_config import ConfigError
from kubescale.runtime.tls_secret import SecretContent
from kubescale.sim.apiserver.server import ApiServer


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    async with ApiServer() as api:
        path = tmp_path / "kubeconfig"
        api.write_kubeconfig(path)
        yield api, path


async def _replica(directory: Path, kubeconfig: Path) -> tuple[Server, asyncio.Task[int]]:
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(directory / "serverCert.pem"),
        "--tls-private-key", str(directory / "serverKey.pem"),
        "--client-ca-file", str(directory / "caCert.pem"),
        "--kubeconfig", str(kubeconfig),
        "--tls-secret-name", "vpa-tls-certs",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), started=started, install_signal_handlers=False)
    )
    return await asyncio.wait_for(started, timeout=30), task


async def _served_certificate(port: int, ca_file: Path) -> x509.Certificate:
    context = ssl.create_default_context(cafile=str(ca_file))
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="vpa-webhook.kube-system.svc"
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_two_replicas_without_certificate_files_serve_the_secret_they_share(
    apiserver: tuple[ApiServer, Path], tmp_path: Path
) -> None:
    api, kubeconfig = apiserver
    first, first_task = await _replica(tmp_path / "a", kubeconfig)
    second, second_task = await _replica(tmp_path / "b", kubeconfig)
    try:
        assert first.kube is not None
        stored = SecretContent.from_secret(
            await first.kube.get(SECRETS, "vpa-tls-certs", namespace="kube-system")
        )
        leaf = x509.load_pem_x509_certificate(stored.server_cert)
        assert first.tls is not None
        assert second.tls is not None
        assert first.tls.certificate == second.tls.certificate == leaf
        # a client trusting the Secret's CA verifies what either replica serves
        for server, directory in ((first, tmp_path / "a"), (second, tmp_path / "b")):
            assert (directory / "caCert.pem").read_bytes() == stored.ca_cert
            assert await _served_certificate(server.https_port, directory / "caCert.pem") == leaf
        assert api.requests.count(verb="create", resource="secrets") == 1
    finally:
        for server in (first, second):
            server.stop_event.set()
        assert await first_task == 0
        assert await second_task == 0


async def test_an_invalid_secret_name_is_one_clear_error() -> None:
    parser = build_parser()
    args = parser.parse_args(["serve", "--tls-secret-name", "Not_A_Name"])
    with pytest.raises(ConfigError, match=r"--tls-secret-name: 'Not_A_Name' is not a valid name"):
        serve_config_from_args(args)
