"""The informers' initial sync alone (issue 29): LIST, decode, project and index, client side.

The cluster is :mod:`bench.scale_cluster`'s (its bulk-loaded API server child, ``--pods`` pods
on ``pods / 30`` nodes with their Deployments, ReplicaSets, VPAs, HPAs and PDBs), served by the
in-process API server in a child process, so the CPU measured here is the client's only. This
process builds one :class:`~kubescale.kube.informer_set.InformerSet` (projected, as ``serve``
builds it) with an informer per ``--kinds`` collection, starts it and waits until every informer
has synced. No component runs: no event handler, only the built-in indexes — the cost of the
access layer alone. ``--lookup-reads``: the controller kinds are requested as the webhook alone
requests them (``InformerSet.reading(LOOKUP_READS)``: no pod template).

Measured, per run: ``cpu_seconds`` (``time.process_time()`` of this process from start to
synced), ``server_cpu_seconds`` (the API server child's utime + stime over the same span: the
LISTs served) and ``server_rss_mib`` (its ``VmRSS`` when synced), ``wall_seconds``, ``rss_mib``
(``VmRSS``) and ``peak_rss_mib`` (``VmHWM``) when synced;
with ``--profile FILE`` the sync runs under ``cProfile`` and the top functions by cumulative
and own time are written to ``FILE`` (the profiler's own cost inflates the CPU figure then).

    .venv/bin/python bench/informer_sync.py --pods 50000 --profile /tmp/sync50k.txt

Results are printed as JSON lines (one per run); the machine's load average is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import scale_cluster as cluster
from kubescale.kube.client import connect
from kubescale.kube.controller_lookups import LOOKUP_READS
from kubescale.kube.informer import InformerSettings
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import ALL, ResourceType

DEFAULT_KINDS = (
    "pods",
    "nodes",
    "namespaces",
    "replicasets",
    "deployments",
    "verticalpodautoscalers",
    "horizontalpodautoscalers",
    "poddisruptionbudgets",
)


def _resource(plural: str) -> ResourceType:
    for resource in ALL:
        if resource.plural == plural:
            return resource
    raise SystemExit(f"--kinds: unknown resource {plural!r}")


def deep_size(value: object, seen: set[int]) -> int:
    """Bytes held by ``value`` and everything it references, each object counted once in
    ``seen`` (shared, interned strings count for the first cache that holds them)."""
    total, stack = 0, [value]
    while stack:
        each = stack.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        total += sys.getsizeof(each)
        if isinstance(each, dict):
            stack.extend(each.keys())
            stack.extend(each.values())
        elif isinstance(each, list | tuple):
            stack.extend(each)
    return total


async def sync_once(
    kubeconfig: Path,
    kinds: list[str],
    page_size: int | None,
    *,
    lookup_reads: bool = False,
    server_pid: int | None = None,
) -> dict[str, Any]:
    client = await connect(kubeconfig=kubeconfig)
    try:
        settings = InformerSettings()
        if page_size is not None:
            settings = replace(settings, page_size=page_size)
        informers = InformerSet(client=client, settings=settings)
        with informers.reading(LOOKUP_READS if lookup_reads else {}):
            for plural in kinds:
                informers.informer(_resource(plural))
        server = cluster.cpu_seconds(server_pid) if server_pid is not None else 0.0
        cpu, wall = time.process_time(), time.monotonic()
        informers.start()
        await informers.wait_synced()
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
        server_rss = None
        if server_pid is not None:
            server = cluster.cpu_seconds(server_pid) - server
            server_rss = cluster.proc_status(server_pid).get("VmRSS")
        status = cluster.proc_status(os.getpid())
        objects = {i.name: len(i.cache) for i in informers.informers}
        seen: set[int] = set()
        sizes = {
            i.name: round(deep_size(i.cache.values(), seen) / 2**20, 4) for i in informers.informers
        }
        await informers.stop()
    finally:
        await client.close()
    return {
        "cpu_seconds": round(cpu, 2),
        "server_cpu_seconds": round(server, 2) if server_pid is not None else None,
        "server_rss_mib": server_rss,
        "wall_seconds": round(wall, 2),
        "rss_mib": status.get("VmRSS"),
        "peak_rss_mib": status.get("VmHWM"),
        "objects": objects,
        "cache_mib": sizes,
    }


async def run(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    work = Path(args.work)
    api = await cluster.start_apiserver(args.pods, work)
    assert api.stdout is not None
    try:
        loaded = json.loads(await api.stdout.readline())
        load = os.getloadavg()[0]
        profiler = cProfile.Profile() if args.profile else None
        summary = io.StringIO()
        if profiler is not None:
            profiler.enable()
        result = await sync_once(
            work / "kubeconfig",
            args.kinds,
            args.page_size,
            lookup_reads=args.lookup_reads,
            server_pid=api.pid,
        )
        if profiler is not None:
            profiler.disable()
            stats = pstats.Stats(profiler, stream=summary)
            stats.sort_stats("cumulative").print_stats(45)
            stats.sort_stats("tottime").print_stats(30)
        return {
            "label": args.label,
            "pods": args.pods,
            "apiserver": loaded,
            "load_average_1m_before": round(load, 2),
            "load_average_1m_after": round(os.getloadavg()[0], 2),
            "profiled": profiler is not None,
            **result,
        }, summary.getvalue()
    finally:
        await cluster.stop_api_child(api)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--kinds", nargs="+", default=list(DEFAULT_KINDS))
    parser.add_argument("--page-size", type=int, help="LIST page size (default: the informer's)")
    parser.add_argument("--profile", help="write a cProfile summary of the sync to this file")
    parser.add_argument(
        "--lookup-reads",
        action="store_true",
        help="cache the controller kinds as the controller lookups read them (the webhook alone)",
    )
    parser.add_argument("--label", default="current")
    parser.add_argument("--work", default="/tmp/kubescale-informer-sync")
    args = parser.parse_args(argv)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    result, summary = asyncio.run(run(args))
    if args.profile:
        Path(args.profile).write_text(summary)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
