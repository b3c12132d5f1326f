"""Benchmark: resident memory per idle TLS connection of the guarded listener, per event loop.

The listener (:mod:`kubescale.runtime.guarded_connections`) runs asyncio's TLS protocol with a
32 KiB read buffer on the standard loop and uvloop's TLS (a 256 KiB ``malloc``-ed read buffer per
connection) under uvloop. This opens ``--connections`` TLS connections to a listener in a child
process, has each complete one request (kept alive, as kube-apiserver's are), and reports the
child's resident-set growth per connection (``VmRSS`` of ``/proc/<pid>/status``).

    .venv/bin/python bench/tls_idle_memory.py --out bench/results/tls_idle_memory.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.cli.main import main as cli
from kubescale.runtime.guarded_listener import GuardedListener
from kubescale.runtime.server_limits import ServerLimits

SERVER_NAME = "kubescale.kube-system.svc"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def _server(loop_name: str, cert_dir: Path) -> None:
    async def hello(_request: web.BaseRequest) -> web.StreamResponse:
        return web.Response(text="ok")

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_dir / "serverCert.pem", cert_dir / "serverKey.pem")
    limits = ServerLimits(max_connections=100_000, read_timeout=600.0, idle_timeout=600.0)
    listener = GuardedListener(
        server=web.Server(hello),
        ssl_context=context,
        limits=limits,
        host="127.0.0.1",
        port=0,
        registry=CollectorRegistry(),
        logger=logging.getLogger("bench"),
    )
    await listener.start()
    print(listener.port, flush=True)
    await asyncio.Event().wait()


async def _clients(port: int, count: int, cert_dir: Path) -> list[Any]:
    context = ssl.create_default_context(cafile=str(cert_dir / "caCert.pem"))
    writers = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname=SERVER_NAME
        )
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        await reader.readuntil(b"ok")
        writers.append(writer)
    return writers


def measure(loop_name: str, count: int, cert_dir: Path) -> dict[str, Any]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", loop_name, "--cert-dir", str(cert_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())

        async def run() -> dict[str, Any]:
            warm = await _clients(port, 20, cert_dir)  # imports, first handshakes
            await asyncio.sleep(0.5)
            before = _rss_kib(child.pid)
            writers = await _clients(port, count, cert_dir)
            await asyncio.sleep(1.0)
            after = _rss_kib(child.pid)
            for writer in [*warm, *writers]:
                writer.close()
            return {
                "loop": loop_name,
                "connections": count,
                "rss_before_kib": before,
                "rss_after_kib": after,
                "kib_per_idle_connection": round((after - before) / count, 1),
            }

        return asyncio.run(run())
    finally:
        child.kill()
        child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=400)
    parser.add_argument("--out", default="bench/results/tls_idle_memory.json")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--cert-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        runner = uvloop.run if args.serve == "uvloop" else asyncio.run
        runner(_server(args.serve, Path(args.cert_dir)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp)
        argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", tmp]
        assert cli([*argv, "--key-type", "ecdsa"]) == 0
        results = [measure(name, args.connections, certs) for name in ("asyncio", "uvloop")]
    for result in results:
        print(json.dumps(result))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"benchmark": "tls_idle_memory", "runs": results}, indent=2)
    )


if __name__ == "__main__":
    main()
