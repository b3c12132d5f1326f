"""Where ``kubescale serve``'s memory is at scale, and what grows in a steady state (issue 29).

``scale_cluster.py``'s bulk-loaded API server child and ``kubescale serve`` (every component)
under ``bench/traced_serve.py``: a ``tracemalloc`` snapshot when the caches synced (after
``--settle-seconds``), then one after each steady minute with ``scale_cluster``'s churn on
(1 % of the pods a minute: label and status updates). Each snapshot is written to ``--out``
(``trace-<pods>.<n>``: the files and lines holding the most, and what grew since the previous
one), and the RSS from ``/proc`` (tracing itself costs memory: compare RSS figures only with
another traced run) is printed as JSON lines.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python bench/issue29_memory.py --pods 10000 --out /tmp/m
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scale_cluster import (
    component_flags,
    proc_status,
    start_apiserver,
    start_serve,
    stop_api_child,
    stop_process,
    wait_synced,
    write_serving_certificates,
)


def _written(target: Path) -> None:
    while not target.exists():
        time.sleep(0.5)


async def snapshot(pid: int, out: Path, number: int) -> None:
    """SIGUSR1 to the traced serve, then wait until its snapshot file is written."""
    os.kill(pid, signal.SIGUSR1)
    await asyncio.to_thread(_written, Path(f"{out}.{number}"))


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kubescale-mem-") as directory:
        work = Path(directory)
        write_serving_certificates(work)
        api = await start_apiserver(args.pods, work)
        assert api.stdin is not None
        assert api.stdout is not None
        try:
            if not await api.stdout.readline():
                raise RuntimeError("the API server child exited before loading")
            args.out.mkdir(parents=True, exist_ok=True)
            trace = args.out / f"trace-{args.pods}"
            serve = await start_serve(
                work, webhook_only=False, flags=component_flags(), trace=trace
            )
            try:
                synced = await wait_synced(serve, limit=args.sync_limit)
                await asyncio.sleep(args.settle_seconds)
                pid = serve.process.pid
                await snapshot(pid, trace, 0)
                print(json.dumps({**synced, "minute": 0, **proc_status(pid)}), flush=True)
                api.stdin.write(f"churn {args.pods * args.churn_percent / 100.0}\n".encode())
                await api.stdin.drain()
                for minute in range(1, args.minutes + 1):
                    await asyncio.sleep(args.steady_seconds)
                    await snapshot(pid, trace, minute)
                    row = {"minute": minute, **proc_status(pid), "load": os.getloadavg()[0]}
                    print(json.dumps(row), flush=True)
            finally:
                await stop_process(serve.process)
        finally:
            await stop_api_child(api)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    parser.add_argument("--settle-seconds", type=float, default=30.0)
    parser.add_argument("--churn-percent", type=float, default=1.0)
    parser.add_argument("--sync-limit", type=float, default=900.0)
    parser.add_argument("--out", type=Path, required=True)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
