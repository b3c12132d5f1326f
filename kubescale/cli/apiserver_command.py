"""``kubescale apiserver``: the in-process API server as a standalone process, for kubectl.

Starts :class:`kubescale.sim.apiserver.server.ApiServer` (HTTPS with its own CA, plus plain HTTP),
with the CRDs of ``manifests/crds`` (or ``--crd-dir``) preloaded, writes a kubeconfig for it to
``--kubeconfig-out`` (HTTPS unless ``--insecure-kubeconfig``) and serves until SIGTERM or
SIGINT, then exits 0. ``kubectl --kubeconfig FILE get pods`` works against it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from kubescale.base.flag_types import parse_port
from kubescale.base.logs import LOG_LEVELS, component_logger, configure_logging
from kubescale.sim.apiserver.server import ApiServer

log = component_logger("apiserver")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig-out",
        type=Path,
        required=True,
        metavar="FILE",
        help="where to write a kubeconfig for the server",
    )
    parser.add_argument(
        "--port", type=parse_port, default=0, help="HTTPS port (default: a free port)"
    )
    parser.add_argument(
        "--http-port", type=parse_port, default=0, help="plain HTTP port (default: a free port)"
    )
    parser.add_argument(
        "--bind-address", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--insecure-kubeconfig",
        action="store_true",
        help="point the kubeconfig at the plain HTTP port instead of HTTPS",
    )
    parser.add_argument(
        "--crd-dir",
        type=Path,
        action="append",
        default=None,
        metavar="DIR",
        help="directory of CRD YAML files to preload; repeatable (default: manifests/crds)",
    )
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default="info", help="(default: %(default)s)"
    )
    parser.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="(default: %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    configure_logging(level=args.log_level, fmt=args.log_format)
    for directory in args.crd_dir or ():
        if not Path(directory).is_dir():
            sys.stderr.write(
                f"kubescale apiserver: error: --crd-dir {directory}: not a directory\n"
            )
            return 2
    try:
        return asyncio.run(serve(args))
    except OSError as exc:
        sys.stderr.write(f"kubescale apiserver: error: {exc}\n")
        return 1


async def serve(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM/SIGINT; the exit code."""
    server = ApiServer(crd_dirs=args.crd_dir)
    await server.start(host=args.bind_address, port=args.port, http_port=args.http_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        server.write_kubeconfig(args.kubeconfig_out, tls=not args.insecure_kubeconfig)
        log.info(
            "kubeconfig written",
            extra={"fields": {"path": str(args.kubeconfig_out), "server": server.https_url}},
        )
        await stop.wait()
        log.info("stopping")
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await server.stop()
