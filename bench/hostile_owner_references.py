"""Benchmark: API-server requests caused by 5,000 admissions of pods with hostile owner references.

Issue 11, defect 3: owner references naming unknown kinds, unserved groups, injected
``apiVersion``s (``..``, ``?``, ``#``, ``%``) and names, and objects that do not exist
(:mod:`kubescale.sim.hostile_admissions`, five kinds round robin) — admitted through the
webhook's decision on its caches, the ``/scale`` lookups resolved as the process's loop would
(woken by each miss, swept every 7 s), over 150 s of virtual time, against the in-process API
server. Every request the API server receives is counted by method and raw path (a middleware
of this script, so an older tree can be measured too).

Measured: GETs sent (and other requests), distinct paths, paths outside what the lookups may
ask for (:data:`~kubescale.sim.hostile_admissions.ALLOWED_PATH`), paths naming ``secrets`` or
holding ``..``, and the wall time. ``--kubescale-path DIR`` measures another checkout (e.g.
``git archive main`` unpacked): the script runs again in a child process that imports that
tree's ``kubescale``; the storm itself always comes from this checkout.

Written to ``bench/results/hostile_owner_references.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry

import kubescale
from kubescale.base.clock import VirtualClock
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.kube.client import connect
from kubescale.kube.shared_cache import SharedCache
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

HERE: Final = Path(__file__).resolve().parent
RESULTS: Final = HERE / "results" / "hostile_owner_references.json"


def load_storm() -> ModuleType:
    """This checkout's storm, whatever ``kubescale`` is imported (it imports none of it)."""
    path = HERE.parent / "kubescale" / "sim" / "hostile_admissions.py"
    spec = importlib.util.spec_from_file_location("hostile_admissions", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    storm_module = load_storm()
    received: Counter[tuple[str, str]] = Counter()
    counting = False

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        if counting:
            received[(request.method, request.raw_path)] += 1
        response: web.StreamResponse = await handler(request)
        return response

    class CountingApiServer(ApiServer):
        def build_app(self) -> web.Application:
            app = super().build_app()
            app.middlewares.insert(0, count)
            return app

    clock = VirtualClock()
    settings = WebhookSettings()
    async with CountingApiServer(clock=clock, seed=5) as api:
        api.write_kubeconfig(work / "kubeconfig")
        kube = await connect(kubeconfig=work / "kubeconfig", clock=clock, rng=random.Random(0))
        cache = SharedCache(client=kube, clock=clock)
        caches = AdmissionCaches(
            cache=cache,
            vpa_object_namespace=settings.vpa_object_namespace,
            ignored_namespaces=settings.ignored_vpa_object_namespaces,
            watch_hpas=settings.avoid_hpa_conflict,
            watch_nodes=settings.cap_to_largest_node,
        )
        try:
            cache.start()
            assert await cache.wait_synced(10)
            webhook = AdmissionWebhook(
                settings=settings, registry=CollectorRegistry(), caches=caches
            )
            webhook.controller_wait = 0.0
            counting = True
            began = time.monotonic()
            errors = await storm_module.run_storm(
                webhook=webhook, cache=cache, clock=clock,
                admissions=args.admissions, seconds=args.seconds,
            )  # fmt: skip
            wall = time.monotonic() - began
            counting = False
        finally:
            await cache.stop()
            await kube.close()
    allowed = storm_module.ALLOWED_PATH
    paths = sorted({path for _, path in received})
    stray = [path for path in paths if not allowed.fullmatch(path)]
    return {
        "admissions": args.admissions,
        "virtual_seconds": args.seconds,
        "admission_errors": errors,
        "gets": sum(n for (method, _), n in received.items() if method == "GET"),
        "other_requests": sum(n for (method, _), n in received.items() if method != "GET"),
        "distinct_paths": len(paths),
        "paths_outside_allowed": len(stray),
        "paths_outside_allowed_examples": stray[:12],
        "paths_naming_secrets": sum("secrets" in path for path in paths),
        "paths_with_dotdot": sum(".." in path for path in paths),
        "wall_seconds": round(wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--admissions", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=150)
    parser.add_argument("--kubescale-path", default="", help="import kubescale from this tree")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.kubescale_path:
        # the same script in a child whose `kubescale` is the other tree's
        env = {**os.environ, "PYTHONPATH": str(Path(args.kubescale_path).resolve()),
               "PYTHONSAFEPATH": "1"}  # fmt: skip
        argv = [sys.executable, __file__, "--admissions", str(args.admissions),
                "--seconds", str(args.seconds), "--out", str(args.out)]  # fmt: skip
        sys.exit(subprocess.run(argv, env=env, check=False).returncode)
    with tempfile.TemporaryDirectory(prefix="kubescale-bench-") as directory:
        results = asyncio.run(measure(args, Path(directory)))
    results["server"] = str(Path(kubescale.__file__).resolve().parent.parent)
    results["python"] = platform.python_version()
    results["machine"] = platform.machine()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
