"""A loops-only ``kubescale serve`` (neither the webhook nor the scheduler extender runs) needs
no serving certificate (issue 32.6): it starts without one, opens no HTTPS listener and serves
its health and metrics on plain HTTP at ``--address``, as upstream's VPA recommender and
updater do (their only listener is ``--address`` ``:8942``/``:8943``, plain HTTP). A process
that runs the webhook still refuses to start without its certificate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.components import by_name
from kubescale.runtime.component import EnabledComponent
from kubescale.runtime.process import serves_https
from kubescale.sim.apiserver.server import ApiServer

from ..conftest import only_components


@pytest.fixture
async def kubeconfig(tmp_path: Path) -> AsyncIterator[Path]:
    async with ApiServer() as api:
        path = tmp_path / "kubeconfig"
        api.write_kubeconfig(path)
        yield path


def _argv(tmp_path: Path, kubeconfig: Path, *components: str) -> list[str]:
    # Certificate paths that do not exist: nothing may read them.
    return [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(tmp_path / "none.pem"),
        "--tls-private-key", str(tmp_path / "none-key.pem"),
        "--client-ca-file", str(tmp_path / "none-ca.pem"),
        "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
        *only_components(*components),
    ]  # fmt: skip


async def test_a_loops_only_replica_starts_without_a_serving_certificate(
    tmp_path: Path, kubeconfig: Path
) -> None:
    argv = _argv(tmp_path, kubeconfig, "vpa-recommender", "vpa-updater")
    config = serve_config_from_args(build_parser().parse_args(argv))
    enabled = default_components(config, environ={})
    assert [c.name for c in enabled] == ["vpa-recommender", "vpa-updater"]
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), components=enabled, started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    waiting: set[asyncio.Future[Any]] = {task, started}
    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    assert started in done, f"serve ended with {task.result()} before starting"
    server = started.result()
    try:
        assert server.tls is None
        assert server.https_port == 0
        base = f"http://127.0.0.1:{server.health_port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/healthz") as answer:
                assert answer.status == 200
            async with session.get(f"{base}/metrics") as answer:
                assert answer.status == 200
                assert "kubescale_cache_watched_collections" in await answer.text()
    finally:
        server.stop_event.set()
        assert await task == 0


async def test_the_webhook_still_needs_its_certificate(tmp_path: Path, kubeconfig: Path) -> None:
    argv = _argv(tmp_path, kubeconfig, "webhook", "vpa-recommender")
    config = serve_config_from_args(build_parser().parse_args(argv))
    enabled = default_components(config, environ={})
    code = await serve(config, clock=RealClock(), components=enabled, install_signal_handlers=False)
    assert code == 1


@pytest.mark.parametrize(
    ("components", "mounts", "expected"),
    [
        # No component given: a bare process (tests, the simulator's routes) serves HTTPS.
        ((), False, True),
        (("vpa-recommender",), False, False),
        (("vpa-recommender", "hpa-controller"), True, True),  # routes mounted by the caller
        (("webhook",), False, True),
        (("scheduler-extender", "descheduler"), False, True),
        (("vpa-recommender", "vpa-updater", "hpa-controller", "cluster-autoscaler",
          "descheduler"), False, False),
    ],
)  # fmt: skip
def test_which_processes_serve_https(
    components: tuple[str, ...], mounts: bool, expected: bool
) -> None:
    specs = [by_name(name) for name in components]
    enabled = [EnabledComponent(spec, settings=None) for spec in specs if spec is not None]
    assert len(enabled) == len(components)
    assert serves_https(enabled, mounts=mounts) is expected
