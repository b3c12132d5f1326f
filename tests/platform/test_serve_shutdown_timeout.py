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
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import LoopSpec, Server, serve
from kubescale.cli.serve_config import serve_config_from_args
from tests.cli.test_serve import _serve_args


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
