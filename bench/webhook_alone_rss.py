"""``kubescale serve`` running the VPA admission webhook alone: its RSS at start and with the
cluster synced (issue 29's webhook goal: ≤ 60 MiB; upstream's Go admission controller: 34).

The cluster and the way ``serve`` is started are :mod:`bench.scale_cluster`'s (its loaded API
server child, ``--pods`` pods on ``pods / 30`` nodes with their Deployments, ReplicaSets, VPAs,
HPAs and PDBs; ``serve --webhook true`` and every other component ``false``, leader election
off). Measured on the serve process (``/proc/<pid>/status``):

- ``import``: a fresh interpreter that imports ``kubescale.cli.serve`` (what ``kubescale serve``
  loads before it parses its flags): ``VmRSS`` and the number of modules;
- per ``--pods``: ``rss_mib_when_synced`` (``/readyz`` 200), ``rss_mib`` after
  ``--settle-seconds`` more, ``peak_rss_mib`` (``VmHWM``), ``threads``; once with the default
  allocator and once with ``MALLOC_ARENA_MAX=2`` (glibc's per-thread arenas: the process has
  the election, off-loop and executor threads).

    .venv/bin/python bench/webhook_alone_rss.py --pods 1000 10000 --label after
    PYTHONPATH=/tmp/before .venv/bin/python /tmp/before/bench/webhook_alone_rss.py --label before

Results: ``bench/results/webhook_alone_rss.json`` (runs by ``--label``, other labels kept).
The machine is shared (two cores, several other processes): the JSON records the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import scale_cluster as cluster

RESULTS = cluster.REPO / "bench" / "results" / "webhook_alone_rss.json"
IMPORT_PROBE = (
    "import sys\n"
    "import kubescale.cli.serve\n"
    "rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]\n"
    "print(int(rss), len(sys.modules), 'numpy' in sys.modules)\n"
)


def import_cost() -> dict[str, Any]:
    """RSS and module count of an interpreter that imported ``kubescale.cli.serve``."""
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        cwd=cluster.REPO,
        env={**os.environ, "PYTHONPATH": str(cluster.REPO)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {"rss_mib": round(int(out[0]) / 1024, 1), "modules": int(out[1]), "numpy": out[2]}


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


async def measure_size(pods: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    api = await cluster.start_apiserver(pods, work)
    assert api.stdin is not None
    assert api.stdout is not None
    result: dict[str, Any] = {"pods": pods, "load_average_1m_before": os.getloadavg()[0]}
    try:
        result["apiserver"] = json.loads(await api.stdout.readline())
        for arenas in ("default", "2"):
            if arenas == "2":
                os.environ["MALLOC_ARENA_MAX"] = "2"
            try:
                serve = await cluster.start_serve(
                    work, webhook_only=True, flags=cluster.component_flags()
                )
            finally:
                os.environ.pop("MALLOC_ARENA_MAX", None)
            try:
                synced = await cluster.wait_synced(serve, limit=args.sync_limit)
                synced["rss_mib_when_synced"] = cluster.proc_status(serve.process.pid)["VmRSS"]
                await asyncio.sleep(args.settle_seconds)
                status = cluster.proc_status(serve.process.pid)
                synced.update(
                    rss_mib=status["VmRSS"],
                    peak_rss_mib=status["VmHWM"],
                    threads=threads(serve.process.pid),
                )
            finally:
                await cluster.stop_process(serve.process)
            result[f"malloc_arena_max_{arenas}"] = synced
        api.stdin.write(b"stop\n")
        await api.stdin.drain()
        await api.stdout.readline()
    finally:
        await cluster.stop_api_child(api)
    result["load_average_1m_after"] = os.getloadavg()[0]
    return result


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    runs = []
    with tempfile.TemporaryDirectory(prefix="kubescale-webhook-rss-") as directory:
        work = Path(directory)
        cluster.write_serving_certificates(work)
        for pods in args.pods:
            run = await measure_size(pods, args, work)
            runs.append(run)
            print(json.dumps(run), flush=True)
    return {
        "label": args.label,
        "import": import_cost(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine_shared": "2 cores shared with ~8 engineers' processes (not idle)",
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--settle-seconds", type=float, default=10.0)
    parser.add_argument("--sync-limit", type=float, default=600.0)
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    report = asyncio.run(measure(args))
    merged: dict[str, Any] = {}
    if args.out.exists():
        with contextlib.suppress(ValueError):
            merged = json.loads(args.out.read_text())
    merged[report["label"]] = report
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(merged, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
