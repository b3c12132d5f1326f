"""Prometheus stand-ins for the history provider's tests.

* :class:`FakePrometheus` — a small aiohttp server answering ``/api/v1/query_range`` and
  ``/api/v1/query`` with canned bodies per PromQL text, recording every request (method, path,
  form, headers) so tests can assert exactly what the provider sent.
* :func:`write_openmetrics` and :class:`RealPrometheus` — Debian's ``prometheus``/``promtool``:
  history is written as OpenMetrics text, turned into TSDB blocks with ``promtool tsdb
  create-blocks-from openmetrics`` and served by a ``prometheus`` process on a free loopback
  port (bounded by coreutils ``timeout`` and stopped at the end).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

import aiohttp
from aiohttp import web

PROMETHEUS_LIFETIME = 600
"""Seconds after which ``timeout`` kills a test Prometheus whatever happens to the test: a guard
against a leaked process only, never reached by a test that runs (it was 60 s, which a test on a
loaded machine outlasted: the what-if's queries then met a closed port; issue 32.7)."""
READY_GUARD = 600.0
"""Seconds a test waits at most for Prometheus to answer ``/-/ready`` (a hang guard only)."""


# --- the fake ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    method: str
    path: str
    url_query: dict[str, list[str]]
    form: dict[str, list[str]]
    headers: dict[str, str]

    @property
    def params(self) -> dict[str, str]:
        """The API parameters wherever they were sent (form for POST, URL for GET)."""
        source = self.form if self.method == "POST" else self.url_query
        return {key: values[-1] for key, values in source.items()}


@dataclass(kw_only=True)
class CannedAnswer:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0


def success(data: Any) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


def matrix(*series: tuple[Mapping[str, str], Sequence[tuple[float | int, str]]]) -> bytes:
    """A ``matrix`` success body; timestamps are written as JSON numbers, values as strings."""
    result = [
        {"metric": dict(metric), "values": [[t, v] for t, v in values]} for metric, values in series
    ]
    return success({"resultType": "matrix", "result": result})


EMPTY_MATRIX = matrix()


@dataclass(kw_only=True)
class FakePrometheus:
    """Canned answers keyed by the PromQL text; anything else gets an empty matrix."""

    answers: dict[str, CannedAnswer] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    post_status: int | None = None
    """When set, every POST gets this status (405/501 make the client fall back to GET)."""
    address: str = ""
    """``http://127.0.0.1:<port>`` once started."""
    on_query: Callable[[str], Awaitable[None]] | None = None
    """Awaited with the PromQL before a query is answered, while the client waits for it (a
    test moves its virtual clock there)."""
    _runner: web.AppRunner | None = None
    _closing: asyncio.Event = field(default_factory=asyncio.Event)

    async def closed(self) -> None:
        """Return once :meth:`stop` was called: a query held here is never answered."""
        await self._closing.wait()

    def answer(self, query: str, body: bytes, *, status: int = 200, delay: float = 0.0) -> None:
        self.answers[query] = CannedAnswer(status=status, body=body, delay=delay)

    async def _handle(self, request: web.Request) -> web.Response:
        raw_form = (await request.read()).decode()
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            url_query=parse_qs(request.query_string, keep_blank_values=True),
            form=parse_qs(raw_form, keep_blank_values=True),
            headers=dict(request.headers),
        )
        self.requests.append(recorded)
        if request.method == "POST" and self.post_status is not None:
            return web.Response(status=self.post_status, text="method not allowed")
        query = recorded.params.get("query", "")
        canned = self.answers.get(query, CannedAnswer(body=EMPTY_MATRIX))
        if self.on_query is not None:
            await self.on_query(query)
        if canned.delay:  # a slow query; stop() cuts the wait short
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=canned.delay)
        return web.Response(status=canned.status, body=canned.body, content_type="application/json")

    async def start(self, *, tls: ssl.SSLContext | None = None) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.address = f"{'https' if tls else 'http'}://{host}:{port}"
        return self.address

    async def stop(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


# --- the real Prometheus ----------------------------------------------------------------------


def prometheus_tools() -> tuple[str, str] | str:
    """``(prometheus, promtool)`` paths (``$PROMETHEUS``/``$PROMTOOL`` or on PATH), or why
    they cannot be used."""
    prometheus = os.environ.get("PROMETHEUS") or shutil.which("prometheus")
    promtool = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not prometheus or not promtool:
        return (
            "Debian's prometheus package is not installed (no prometheus/promtool on PATH, "
            "PROMETHEUS/PROMTOOL unset); tests/run.sh installs it when run as root"
        )
    return prometheus, promtool


Series = tuple[str, Mapping[str, str], Sequence[tuple[int, float]]]
"""``(metric name, labels, [(unix seconds, value), ...])``."""


def _om_value(value: float) -> str:
    return repr(float(value))


def write_openmetrics(path: Path, series: Iterable[Series]) -> None:
    """OpenMetrics text for ``promtool tsdb create-blocks-from openmetrics``: one family after
    another, each series' samples in time order, ``# EOF`` at the end."""
    by_name: dict[str, list[Series]] = {}
    for item in series:
        by_name.setdefault(item[0], []).append(item)
    lines: list[str] = []
    for name, family in by_name.items():
        for _, labels, samples in family:
            rendered = ",".join(f"{key}={json.dumps(value)}" for key, value in labels.items())
            lines.extend(f"{name}{{{rendered}}} {_om_value(v)} {t}" for t, v in samples)
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


async def _run(*argv: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await process.communicate()
    text = output.decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({process.returncode}): {text}")
    return text


async def create_blocks(promtool: str, openmetrics: Path, tsdb: Path) -> None:
    await _run(
        promtool,
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        "--quiet",
        str(openmetrics),
        str(tsdb),
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RealPrometheus:
    """``prometheus`` serving a TSDB directory on loopback for the duration of a ``with``."""

    def __init__(self, *, binary: str, tsdb: Path, workdir: Path) -> None:
        self._binary = binary
        self._tsdb = tsdb
        self._workdir = workdir
        self._process: asyncio.subprocess.Process | None = None
        self.address = ""
        self.log_path = workdir / "prometheus.log"

    async def __aenter__(self) -> RealPrometheus:
        config = self._workdir / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n", encoding="utf-8")
        port = _free_port()
        argv = [
            self._binary,
            f"--storage.tsdb.path={self._tsdb}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--config.file={config}",
            "--storage.tsdb.retention.time=100y",
        ]
        bound = shutil.which("timeout")
        if bound is not None:
            argv = [bound, "--kill-after=5", str(PROMETHEUS_LIFETIME), *argv]
        log = self.log_path.open("wb")
        try:
            self._process = await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=self._workdir
            )
        finally:
            log.close()
        self.address = f"http://127.0.0.1:{port}"
        await self._wait_ready()
        return self

    async def _wait_ready(self) -> None:
        # Until it answers or exits: no count of tries, which a loaded machine outlasts (issue
        # 32.7); READY_GUARD only ends a wait that would otherwise hang the suite.
        async with aiohttp.ClientSession() as session, asyncio.timeout(READY_GUARD):
            while self._process is None or self._process.returncode is None:
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"{self.address}/-/ready") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.1)
        log = self.log_path.read_text(errors="replace")
        raise RuntimeError(f"prometheus did not become ready; its log:\n{log}")

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()
