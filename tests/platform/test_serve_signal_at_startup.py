"""SIGTERM during ``serve``'s start-up (issue 32.6): logged, the start-up cancelled, exit 0 —
not death by the signal (exit 143, no log line). The start-up is held by an API server that
does not answer (connection refused: the client retries with backoff), the case that once took
more than 5 s to stop: the signal cancels what the start-up waits on, so the process does not
wait for a retry to give up. Asserted on the mechanism (the log lines, the exit code), not on
elapsed time."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from ..conftest import only_components

ROOT = Path(__file__).resolve().parents[2]
GUARD = 600.0
"""Seconds before a hung child fails the test (only a broken run gets there)."""
UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


async def _lines_until(stream: asyncio.StreamReader, marker: str, seen: list[str]) -> None:
    while True:
        line = (await stream.readline()).decode()
        if not line:
            raise AssertionError(f"stderr ended before {marker!r}: {seen}")
        seen.append(line)
        if marker in line:
            return


async def test_sigterm_during_start_up_is_logged_and_exits_cleanly(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE, encoding="utf-8")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubescale", "serve", "--kubeconfig", str(kubeconfig),
        "--address", "127.0.0.1:0", *only_components("vpa-recommender"),
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert child.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(GUARD):
            # start-up is under way and held: the API server refuses, the client retries
            await _lines_until(child.stderr, "connection refused", seen)
            child.send_signal(signal.SIGTERM)
            rest = (await child.stderr.read()).decode()
            code = await child.wait()
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    log = "".join(seen) + rest
    assert code == 0, log
    assert "SIGTERM during start-up: stopping" in rest, log
    assert "stopped" in rest.splitlines()[-1], log
    assert "Traceback" not in log
