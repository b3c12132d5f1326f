"""kubescale's TLS server inside a simulated run, reachable from the API server as a Service.

The production machinery is used unchanged: certificates made with
:mod:`kubescale.certs.authority` (a CA and a serving certificate for
``kubescale.kube-system.svc``, written to a private temporary directory as ``kubescale serve``
expects them), :func:`kubescale.runtime.process.serve` with those files and the components'
routes mounted, and the Service registered in the
:class:`~kubescale.sim.apiserver.server.ApiServer` so that a webhook configuration naming
``kube-system/kubescale`` is called over verified TLS by the admission chain.

The components are not given to ``serve``: the simulation builds them and runs their loops
itself (see :mod:`.runner`), so ``serve`` only serves their routes. Certificates are made
against the machine's clock, because the TLS peers verify them against theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from kubescale.base.clock import Clock, RealClock
from kubescale.certs.authority import (
    ca_bundle,
    generate_ca,
    issue_serving_certificate,
    service_dns_names,
    write_key_pairs,
)
from kubescale.runtime.process import Server, serve
from kubescale.runtime.process_config import (
    ProcessConfig,
    add_process_arguments,
    process_config_from_args,
)
from kubescale.sim.apiserver.server import ApiServer

__all__ = ["SERVICE_NAME", "SERVICE_NAMESPACE", "KubescaleTLSServer"]

SERVICE_NAME: Final = "kubescale"
SERVICE_NAMESPACE: Final = "kube-system"
_START_TIMEOUT: Final = 30.0


def _serve_config(directory: Path) -> ProcessConfig:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    add_process_arguments(parser)
    argv = [
        "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(directory / "serverCert.pem"),
        "--tls-private-key", str(directory / "serverKey.pem"),
        "--client-ca-file", str(directory / "caCert.pem"),
        "--reload-cert", "false", "--leader-elect", "false",
    ]  # fmt: skip
    return process_config_from_args(parser.parse_args(argv))


class KubescaleTLSServer:
    """Certificates when made; :meth:`start` serves and registers the Service; :meth:`stop`."""

    def __init__(self, api: ApiServer, *, clock: Clock) -> None:
        """Make the certificates (so :attr:`ca_bundle` is known before anything is mounted)."""
        self._api = api
        self._clock = clock
        self._tmp: tempfile.TemporaryDirectory[str] | None = tempfile.TemporaryDirectory(
            prefix="kubescale-sim-certs-"
        )
        self._directory = Path(self._tmp.name)
        now = RealClock().now()
        ca = generate_ca(common_name="kubescale-sim-ca", now=now, days=30, key_type="ecdsa")
        serving = issue_serving_certificate(
            ca=ca,
            names=service_dns_names(SERVICE_NAME, SERVICE_NAMESPACE),
            now=now,
            days=30,
            key_type="ecdsa",
        )
        write_key_pairs(self._directory, ca=ca, server=serving)
        self.ca_file = self._directory / "caCert.pem"
        """The CA file, as ``--client-ca-file`` names it (the webhook publishes it)."""
        self.ca_bundle = ca_bundle(ca.cert_pem)
        """base64 of the CA certificate, for a webhook configuration's ``caBundle``."""
        self._task: asyncio.Task[int] | None = None
        self.server: Server | None = None

    async def start(self, *, mounts: Sequence[Callable[[web.Application], None]] = ()) -> None:
        """Serve with ``mounts`` (the components' routes) and register the Service."""
        if self._task is not None:
            raise RuntimeError("the kubescale TLS server is already running")
        started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(
            serve(
                _serve_config(self._directory),
                clock=self._clock,
                mounts=mounts,
                started=started,
                install_signal_handlers=False,
            )
        )
        self.server = await asyncio.wait_for(started, timeout=_START_TIMEOUT)
        self._api.register_service(
            namespace=SERVICE_NAMESPACE,
            name=SERVICE_NAME,
            port=443,
            address=("127.0.0.1", self.server.https_port),
        )

    def extender(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """A scheduler extender entry whose ``urlPrefix`` is a path on this server, made
        absolute (``https://127.0.0.1:<port><path>``) and trusting this server's CA."""
        if self.server is None:
            raise RuntimeError("start the kubescale TLS server first")
        resolved = dict(entry)
        resolved["urlPrefix"] = f"https://127.0.0.1:{self.server.https_port}{entry['urlPrefix']}"
        resolved["enableHTTPS"] = True
        resolved["tlsConfig"] = {
            **dict(entry.get("tlsConfig") or {}),
            "caData": self.ca_bundle,
            "serverName": f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc",
        }
        return resolved

    async def stop(self) -> None:
        task, self._task = self._task, None
        if self.server is not None:
            self.server.stop_event.set()
        if task is not None:
            await asyncio.wait_for(task, timeout=_START_TIMEOUT)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
