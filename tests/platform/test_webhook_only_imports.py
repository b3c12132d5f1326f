"""A ``kubescale serve`` replica that runs the VPA admission webhook alone imports no other
system (issue 29: the webhook alone held 99 MiB where upstream's Go admission controller holds
34; a third of it was the code of systems that do not run — the recommender's numpy model, the
autoscaler, the descheduler, the extender).

The process is real: ``serve`` with ``--webhook true`` and every other system ``false``, in a
child interpreter, against the in-process API server (the parent's), until its caches are
synced and ``/readyz`` answers 200; then its ``sys.modules`` is compared with what a webhook
needs — and it holds no ``kubernetes`` client library (its import alone was 18 MiB). The
registry (:mod:`kubescale.components`) imports each system's flags and settings
(every ``serve`` parses every flag); a system's component and everything under it only when
that system is enabled.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from kubescale.cli.main import main
from kubescale.components import REGISTRY
from kubescale.sim.apiserver.server import ApiServer

# The child: serve, wait for /readyz (caches synced, components started), print sys.modules.
CHILD = """
import asyncio, json, sys
import aiohttp
from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import default_components, serve
from kubescale.cli.serve_config import serve_config_from_args

async def run() -> None:
    parser = build_parser(only="serve")  # as `kubescale serve` does: no other command
    config = serve_config_from_args(parser.parse_args(json.loads(sys.argv[1])))
    started = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(config, clock=RealClock(),
        components=default_components(config), started=started,
        install_signal_handlers=False))
    server = await started
    async with aiohttp.ClientSession() as http:
        while True:
            url = f"http://127.0.0.1:{server.health_port}/readyz"
            async with http.get(url) as response:
                if response.status == 200:
                    break
            await asyncio.sleep(0.05)
    print(json.dumps({"components": [c.name for c in server.components],
                      "modules": sorted(sys.modules)}), flush=True)
    server.stop_event.set()
    await task

asyncio.run(run())
"""

# Every system's package, and the modules of it the registry imports for the flags.
SYSTEMS = (
    "kubescale.controllers.vpa.recommender",
    "kubescale.controllers.vpa.updater",
    "kubescale.controllers.hpa",
    "kubescale.controllers.autoscaler",
    "kubescale.controllers.descheduler",
    "kubescale.extender",
)
DECLARATIONS = (
    "_config",
    "_flags",
    "_settings",
    ".policy",  # the descheduler's policy file format: --policy-config-file is its flag
    "capi_environment",  # CAPI_GROUP / CAPI_VERSION, read with the flags
    ".cloudprovider.clusterapi_versions",
    "eviction_rate_limit",  # the updater's --eviction-rate-limit values
    "eviction_restriction",  # --min-replicas, --eviction-tolerance
    "update_priority",  # the updater's thresholds
    "disruption_budgets",  # the autoscaler's --...-budget flags' values
)
HEAVY = (
    "numpy",
    "kubescale.prometheus.query_api",
    "kubescale.scheduling.fit",
    # the kubernetes client library: importing any part of it loads every generated model,
    # the synchronous client, requests, oauthlib and pydantic (364 modules, 18 MiB); the
    # connection is kubescale's own (kubescale.kube.connection, kubescale.kube.kubeconfig)
    "kubernetes",
    "pydantic",
    "requests",
    "oauthlib",
)


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    out = tmp_path / "certs"
    argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", str(out)]
    assert main([*argv, "--key-type", "ecdsa", "--san", "127.0.0.1"]) == 0
    return out


async def test_a_webhook_only_replica_imports_no_other_system(certs: Path, tmp_path: Path) -> None:
    others = [a for spec in REGISTRY if spec.name != "webhook" for a in (f"--{spec.name}", "false")]
    async with ApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = [
            "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
            "--tls-cert-file", str(certs / "serverCert.pem"),
            "--tls-private-key", str(certs / "serverKey.pem"),
            "--client-ca-file", str(certs / "caCert.pem"),
            "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
            "--register-webhook", "false", "--log-level", "error",
            "--webhook", "true", *others,
        ]  # fmt: skip
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, json.dumps(argv),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(child.communicate(), timeout=600)  # a hang guard only
    assert child.returncode == 0, err.decode()[-3000:]
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["components"] == ["webhook"]
    modules: list[str] = report["modules"]
    assert "kubescale.webhook.component" in modules  # the webhook itself was built
    for system in SYSTEMS:
        ours = [m for m in modules if m.startswith(system + ".")]
        declarations = [m for m in ours if any(d in m for d in DECLARATIONS)]
        # a declaration's packages (their __init__) come with it
        packages = {m.rsplit(".", i)[0] for m in declarations for i in range(1, m.count("."))}
        implementation = [m for m in ours if m not in declarations and m not in packages]
        assert implementation == [], (system, implementation)
        assert f"{system}.component" not in modules
    assert [m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY] == []
    # the recommender's model: only its settings (no histograms, no estimators)
    model = [m for m in modules if m.startswith("kubescale.controllers.vpa.model.")]
    settings_only = ("model_config", "policy", "_config", "oom_log", "recent_peaks")
    assert model
    assert [m for m in model if not m.endswith(settings_only)] == []
