"""Two ``kubescale serve`` replicas against one API server: only the leader runs the loops.

Both replicas serve TLS and report healthy; the loops run on the Lease holder only; on a clean
stop the leader finishes its iteration, releases the Lease, and the standby takes over at its
next try instead of waiting out the lease. The retry period is short (0.2 s) and the lease long
(10 minutes, renew deadline 5 minutes): the standby can only take the Lease within the test's
hang guard (``GUARD``, far shorter than the lease) because it was released — a mechanism, not
an elapsed time, which a loaded machine stretches (it asserted the handover took < 1.2 s with a
1.5 s lease; issue 32.7). The long renew deadline also keeps a slow renewal on a busy machine
from costing the leader its Lease mid-test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import LoopSpec, Server, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.resources import LEASES
from kubescale.sim.apiserver.server import ApiServer

GUARD = 120.0
"""Seconds any wait lasts at most: a hang guard, a fifth of the 10-minute lease."""


class CountingLoop:
    def __init__(self) -> None:
        self.iterations = 0

    @property
    def name(self) -> str:
        return "counter"

    async def run_once(self, now: datetime) -> None:
        self.iterations += 1


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Path]]:
    async with ApiServer() as api:
        path = tmp_path / "kubeconfig"
        api.write_kubeconfig(path)
        yield api, path


async def _replica(
    cert_dir: Path, kubeconfig: Path, loop: CountingLoop
) -> tuple[Server, asyncio.Task[int]]:
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig),
        "--leader-elect-lease-duration", "10m", "--leader-elect-renew-deadline", "5m",
        "--leader-elect-retry-period", "200ms",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), loops=[LoopSpec(loop=loop, interval=0.05)],
              started=started, install_signal_handlers=False)
    )  # fmt: skip
    return await asyncio.wait_for(started, timeout=GUARD), task


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate`` holds; ``GUARD`` only ends a wait that would hang."""
    deadline = asyncio.get_running_loop().time() + GUARD
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def _healthz(port: int) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/healthz") as resp,
    ):
        return resp.status


async def test_only_the_leader_runs_loops_and_hands_over_on_clean_stop(
    cert_dir: Path, apiserver: tuple[ApiServer, Path]
) -> None:
    api, kubeconfig = apiserver
    loops = (CountingLoop(), CountingLoop())
    replicas = [await _replica(cert_dir, kubeconfig, loop) for loop in loops]
    servers = [server for server, _ in replicas]
    try:
        await _until(lambda: any(s.elector is not None and s.elector.is_leader for s in servers))
        leader = next(i for i, s in enumerate(servers) if s.elector and s.elector.is_leader)
        standby = 1 - leader
        await _until(lambda: loops[leader].iterations >= 5)
        assert loops[standby].iterations == 0
        lease = api.store.get(LEASES, "kubescale", "kube-system")
        elector = servers[leader].elector
        assert elector is not None
        assert lease["spec"]["holderIdentity"] == elector.identity
        # Every replica serves and is live, leading or not.
        assert [await _healthz(s.health_port) for s in servers] == [200, 200]

        servers[leader].stop_event.set()
        assert await asyncio.wait_for(replicas[leader][1], timeout=GUARD) == 0
        released = api.store.get(LEASES, "kubescale", "kube-system")
        assert released["spec"]["holderIdentity"] in ("", servers[standby].elector.identity)  # type: ignore[union-attr]
        # released Lease: taken at a next try (retry 0.2 s), within GUARD (2 minutes) — long
        # before the 10-minute lease it was renewed with could have expired
        await _until(lambda: loops[standby].iterations >= 3)
        taken = api.store.get(LEASES, "kubescale", "kube-system")
        assert taken["spec"]["holderIdentity"] == servers[standby].elector.identity  # type: ignore[union-attr]
    finally:
        for server, task in replicas:
            server.stop_event.set()
            await asyncio.wait_for(task, timeout=GUARD)
