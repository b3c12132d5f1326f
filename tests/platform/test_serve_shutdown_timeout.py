"""``serve``'s stop when a loop's iteration outlasts ``--graceful-shutdown-timeout``.

With the loops' decisions on worker threads (``kubescale/runtime/off_loop.py``) the event loop
handles SIGTERM while a long decision computes, so the grace period can run out and the loops
be cancelled. The gather that waited for them then ends with their ``CancelledError``: it is
retrieved, so asyncio logs no "exception was never retrieved" error with a traceback for what
is an expected stop (it did on the bench's ``real_loops`` run).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import LoopSpec, Server, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.resources import LEASES
from kubescale.runtime.off_loop import OffLoop
from kubescale.sim.apiserver.server import ApiServer
from tests.cli.test_serve import _serve_args

ROOT = Path(__file__).resolve().parents[2]


class _Endless:
    name = "endless"

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def run_once(self, now: datetime) -> None:
        self.entered.set()
        await asyncio.Event().wait()  # never ends on its own: only a cancellation stops it


async def test_loops_cancelled_at_the_grace_period_leave_no_unretrieved_error(
    cert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    argv = _serve_args(cert_dir, "--leader-elect=false")
    config = serve_config_from_args(build_parser().parse_args(argv))
    config = replace(config, graceful_shutdown_timeout=0.01)
    endless = _Endless()
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(
            config,
            clock=RealClock(),
            loops=[LoopSpec(loop=endless, interval=60)],
            started=started,
            install_signal_handlers=False,
        )
    )
    server = await asyncio.wait_for(started, timeout=10)
    await asyncio.wait_for(endless.entered.wait(), timeout=10)
    with caplog.at_level(logging.WARNING):
        server.stop_event.set()
        assert await asyncio.wait_for(task, timeout=10) == 0
        del task
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
    messages = [r.getMessage() for r in caplog.records]
    assert any("loops did not finish within" in m for m in messages)  # the path was taken
    assert not [m for m in messages if "never retrieved" in m]


# ---- a decision still computing on its worker thread (bench 27.11) ---------------------------

GUARD = 120.0
"""Seconds before a hung shutdown fails a test (only a broken run gets there): a hang guard."""


class _Computing:
    """A loop whose iteration's decision runs on its OffLoop worker and blocks on a
    ``threading.Event`` nobody sets during the shutdown: it cannot be interrupted."""

    name = "computing"

    def __init__(self) -> None:
        self.off_loop = OffLoop("computing")
        self.release = threading.Event()
        self.entered = threading.Event()

    def _decide(self) -> None:
        self.entered.set()
        self.release.wait()

    async def run_once(self, now: datetime) -> None:
        await self.off_loop.run(self._decide)


async def test_shutdown_releases_the_lease_without_waiting_for_a_computing_decision(
    cert_dir: Path, tmp_path: Path
) -> None:
    # client-go ReleaseOnCancel: on cancel the leader's renew loop ends and release() writes
    # the record with an empty holderIdentity, without waiting for OnStartedLeading's work.
    # Before the fix the loops' task waited for the decision to return (never, here): the Lease
    # stayed held and serve never returned (the hang guard failed the test).
    async with ApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = _serve_args(
            cert_dir, "--kubeconfig", str(kubeconfig),
            "--leader-elect-lease-duration", "10m", "--leader-elect-renew-deadline", "5m",
            "--leader-elect-retry-period", "200ms",
        )  # fmt: skip
        config = replace(
            serve_config_from_args(build_parser().parse_args(argv)), graceful_shutdown_timeout=0.01
        )
        computing = _Computing()
        started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(
                config,
                clock=RealClock(),
                loops=[LoopSpec(loop=computing, interval=60)],
                started=started,
                install_signal_handlers=False,
            )
        )
        try:
            server = await asyncio.wait_for(started, timeout=GUARD)
            assert await asyncio.to_thread(computing.entered.wait, GUARD)
            elector = server.elector
            assert elector is not None
            held = api.store.get(LEASES, "kubescale", "kube-system")
            assert held["spec"]["holderIdentity"] == elector.identity
            server.stop_event.set()
            assert await asyncio.wait_for(task, timeout=GUARD) == 0
            assert computing.off_loop.computing  # the decision still computes: not waited for
            assert not elector.may_write  # the leader gate refuses every write
            released = api.store.get(LEASES, "kubescale", "kube-system")
            assert released["spec"]["holderIdentity"] == ""
            # released_record: renewTime and acquireTime stamped at the release, as upstream
            assert released["spec"]["renewTime"] == released["spec"]["acquireTime"]
        finally:
            computing.release.set()
            if not task.done():
                task.cancel()


CHILD = """\
import asyncio, sys, threading
from dataclasses import replace
from datetime import datetime

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import LoopSpec, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.runtime import event_loop
from kubescale.runtime.off_loop import OffLoop

never = threading.Event()


class Computing:
    name = "computing"
    off_loop = OffLoop("computing")

    def decide(self) -> None:
        print("computing", flush=True)
        never.wait()  # nobody sets it: only the process's exit ends this thread

    async def run_once(self, now: datetime) -> None:
        await self.off_loop.run(self.decide)


config = serve_config_from_args(build_parser().parse_args(sys.argv[1:]))
config = replace(config, graceful_shutdown_timeout=0.01)
code = event_loop.run(
    serve(config, clock=RealClock(), loops=[LoopSpec(loop=Computing(), interval=60)])
)
print("serve returned", code, flush=True)
sys.exit(code)
"""


async def test_the_process_exits_with_a_decision_still_computing(cert_dir: Path) -> None:
    # Before the fix the child never exited: the loops waited for the decision, and the
    # interpreter's exit joins concurrent.futures workers (killed at 60 s on the bench).
    argv = _serve_args(cert_dir, "--leader-elect=false")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stderr is not None
    try:
        async with asyncio.timeout(GUARD):
            first = (await child.stdout.readline()).decode().strip()
            assert first == "computing", (await child.stderr.read()).decode()
            child.send_signal(signal.SIGTERM)
            out = (await child.stdout.read()).decode()
            err = (await child.stderr.read()).decode()
            code = await child.wait()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert code == 0, err
    assert "serve returned 0" in out, err
    assert "Traceback" not in err, err
