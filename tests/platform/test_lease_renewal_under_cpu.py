"""The leader keeps renewing its Lease while CPU work holds the serving loop (issue 27 item 11).

A leader-only loop whose iteration is pure CPU (a busy Python loop, standing in for a heavy
autoscaler or descheduler decision, or for a flood of extender filters) holds ``serve``'s event
loop. The Lease is renewed on a thread and loop of its own
(:mod:`kubescale.runtime.election_thread`), so renewals go on *while* the iteration computes,
and the replica is still the leader when it ends. Before, the elector shared the serving loop:
no renewal could happen until the iteration returned, and an iteration longer than the renew
deadline cost the leader its Lease.

Measured by the elector's renewal counter, read by the busy iteration itself — not by elapsed
time. The API server runs on a thread of its own, as a real one runs elsewhere: a server on the
blocked loop could not answer anyone. Election timings are scaled down (lease 1.5 s, renew
deadline 1 s, retry 0.2 s).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import LoopSpec, Server, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.resources import LEASES
from kubescale.sim.apiserver.server import ApiServer

RENEWALS_WANTED = 5
"""Renewals to see during one iteration: 5 × retry 0.2 s = 1 s, the whole renew deadline."""
GIVE_UP_SECONDS = 30.0
"""Only so that a broken build ends the iteration at all (the assertion is on the counter)."""


class _ThreadedApiServer:
    """The in-process API server on its own thread and event loop."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = kubeconfig
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.api: ApiServer | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with ApiServer() as api:
            api.write_kubeconfig(self._kubeconfig)
            self.api = api
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> ApiServer:
        self._thread.start()
        assert self._ready.wait(timeout=10), "API server thread did not start"
        assert self.api is not None
        return self.api

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)


@pytest.fixture
def threaded_apiserver(tmp_path: Path) -> Iterator[tuple[ApiServer, Path]]:
    path = tmp_path / "kubeconfig"
    with _ThreadedApiServer(path) as api:
        yield api, path


class BusyLoop:
    """A leader-only loop whose first iteration computes (holding the serving loop) until the
    elector has renewed ``RENEWALS_WANTED`` times during it."""

    def __init__(self) -> None:
        self.server: Server | None = None
        self.renewed_while_busy: int | None = None
        self.leading_after: bool | None = None
        self.iterations = 0

    @property
    def name(self) -> str:
        return "busy"

    async def run_once(self, now: datetime) -> None:
        self.iterations += 1
        server = self.server
        if self.renewed_while_busy is not None or server is None or server.elector is None:
            return  # done, or ran before the test got hold of the server
        elector = server.elector
        before = elector.renewals
        give_up = time.monotonic() + GIVE_UP_SECONDS
        spins = 0
        # Pure CPU, no await: nothing else runs on this loop until it ends.
        while elector.renewals - before < RENEWALS_WANTED and time.monotonic() < give_up:
            spins = (spins * 31 + 7) % 1_000_003
        self.renewed_while_busy = elector.renewals - before
        self.leading_after = elector.is_leader and elector.may_write


async def test_lease_is_renewed_while_a_cpu_bound_iteration_holds_the_serving_loop(
    cert_dir: Path, threaded_apiserver: tuple[ApiServer, Path]
) -> None:
    api, kubeconfig = threaded_apiserver
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig),
        "--leader-elect-lease-duration", "1500ms", "--leader-elect-renew-deadline", "1s",
        "--leader-elect-retry-period", "200ms", "--log-level", "error",
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    busy = BusyLoop()
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()

    task = asyncio.create_task(
        serve(config, clock=RealClock(), loops=[LoopSpec(loop=busy, interval=0.05)],
              started=started, install_signal_handlers=False)
    )  # fmt: skip
    server = await asyncio.wait_for(started, timeout=10)
    busy.server = server
    try:
        while busy.renewed_while_busy is None:
            assert not task.done(), "serve ended early"
            await asyncio.sleep(0.02)
        # Renewals went on while the iteration held the loop (0 when they share the loop) ...
        assert busy.renewed_while_busy >= RENEWALS_WANTED
        # ... so the replica was still the leader, and may still write, when it ended,
        assert busy.leading_after is True
        # and the Lease names it: no other replica could have taken over.
        assert server.elector is not None
        lease = api.store.get(LEASES, "kubescale", "kube-system")
        assert lease["spec"]["holderIdentity"] == server.elector.identity
        assert int(lease["spec"].get("leaseTransitions") or 0) == 0
    finally:
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=15) == 0
    # The clean stop released the Lease from the election thread.
    released = api.store.get(LEASES, "kubescale", "kube-system")
    assert released["spec"]["holderIdentity"] in ("", None)
