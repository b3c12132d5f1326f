"""/healthz, /readyz and /metrics over real HTTP, with loop liveness on a virtual clock."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from datetime import datetime

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.runtime.health import HealthChecks, make_health_app, new_process_registry
from kubescale.runtime.loop_runner import LoopRunner


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


async def test_checks_decide_status_and_body(session: aiohttp.ClientSession) -> None:
    checks = HealthChecks()
    state = {"ready": False}
    checks.add_readiness("certificates", lambda: None if state["ready"] else "not loaded")
    checks.add_liveness("loops", lambda: None)
    runner, base = await _serve(make_health_app(checks=checks, registry=CollectorRegistry()))
    try:
        async with session.get(f"{base}/readyz") as resp:
            assert resp.status == 500
            body = await resp.text()
        assert "[-]certificates failed: not loaded" in body
        assert "readyz check failed" in body
        state["ready"] = True
        async with session.get(f"{base}/readyz") as resp:
            assert (resp.status, await resp.text()) == (200, "ok")
        async with session.get(f"{base}/readyz?verbose") as resp:
            assert resp.status == 200
            assert "[+]certificates ok" in await resp.text()
        for path in ("/healthz", "/livez", "/health-check"):
            async with session.get(f"{base}{path}") as resp:
                assert (resp.status, await resp.text()) == (200, "ok")
    finally:
        await runner.cleanup()


async def test_a_raising_check_fails_the_probe_instead_of_crashing(
    session: aiohttp.ClientSession,
) -> None:
    checks = HealthChecks()

    def broken() -> str | None:
        raise KeyError("x")

    checks.add_liveness("broken", broken)
    runner, base = await _serve(make_health_app(checks=checks, registry=CollectorRegistry()))
    try:
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 500
            assert "[-]broken failed: check raised KeyError" in await resp.text()
    finally:
        await runner.cleanup()


class _Wedge:
    """Completes its first iteration, then hangs until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = 0

    @property
    def name(self) -> str:
        return "recommender"

    async def run_once(self, now: datetime) -> None:
        self.calls += 1
        if self.calls > 1:
            await self.release.wait()


async def test_healthz_turns_unhealthy_when_a_loop_stalls(session: aiohttp.ClientSession) -> None:
    clock = VirtualClock()
    registry = new_process_registry()
    loops = LoopRunner(clock=clock, registry=registry, rng=random.Random(0))
    wedge = _Wedge()
    loops.add(wedge, interval=60, jitter=0)
    checks = HealthChecks()
    checks.add_liveness("loops", loops.liveness_check)
    runner, base = await _serve(make_health_app(checks=checks, registry=registry))
    task = asyncio.create_task(loops.run())
    try:
        await clock.advance(60)  # second iteration starts and hangs
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        await clock.advance(250)  # 310 s since the last completion > 5 x 60 s
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 500
            assert "recommender" in await resp.text()
        wedge.release.set()
        await asyncio.sleep(0)
        async with session.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        async with session.get(f"{base}/metrics") as resp:
            text = await resp.text()
        count = re.search(
            r'^kubescale_loop_execution_latency_seconds_count\{loop="recommender"\} (\S+)$',
            text,
            re.MULTILINE,
        )
        assert count is not None
        assert float(count.group(1)) >= 2  # the wedged iteration was measured when it ended
        assert "process_cpu_seconds_total" in text  # process collector on
        assert "python_info" in text  # platform collector on
    finally:
        loops.stop()
        wedge.release.set()
        await asyncio.wait_for(task, timeout=5)
        await runner.cleanup()
