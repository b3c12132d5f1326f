"""``kubescale simulate --from-cluster``: capture a live cluster and its history, then run the
what-if on it.

Reads the cluster from a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, in-cluster,
``~/.kube/config``) with LIST calls only and the usage history from Prometheus
(``--prometheus-address``), writes ``scenario.yaml``, ``usage.csv`` and ``replicas.csv`` into
``--write-scenario DIR`` (:mod:`kubescale.sim.scenario.cluster_capture`) and then runs that
scenario three ways like any other. Every failure is one line naming what is missing: a
kubeconfig that cannot be used, an API server that refuses a read, a Prometheus that cannot be
reached or has no such metric.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from kubescale.base.clock import RealClock
from kubescale.base.flag_types import positive_duration
from kubescale.cli.cluster_reads import (
    READ_ERRORS,
    connect_for_reads,
    prometheus_token,
    read_failure,
)
from kubescale.prometheus.client_settings import PrometheusAuth, check_prometheus_address
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.sim.scenario.cluster_capture import (
    CaptureError,
    build_capture,
    workload_key,
    write_capture,
)
from kubescale.sim.scenario.live_reading import read_history, read_live_cluster

__all__ = ["add_arguments", "capture"]

_QUERY_TIMEOUT: Final = 60.0


def _duration(text: str) -> timedelta:
    return timedelta(seconds=positive_duration(text))


def _price(text: str) -> tuple[str, float]:
    instance_type, sep, value = text.partition("=")
    try:
        price = float(value)
    except ValueError:
        price = math.nan
    if not sep or not instance_type or not math.isfinite(price) or price < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not INSTANCE_TYPE=PRICE_PER_HOUR (e.g. m5.large=0.096)"
        )
    return instance_type, price


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("from a live cluster")
    group.add_argument(
        "--from-cluster",
        action="store_true",
        help="build the scenario from a live cluster (read-only) and its Prometheus history",
    )
    group.add_argument("--kubeconfig", default="", help="kubeconfig file (default: $KUBECONFIG, "
                       "in-cluster, ~/.kube/config)")  # fmt: skip
    group.add_argument("--context", default="", help="kubeconfig context (default: current)")
    group.add_argument("--namespace", default="", help="only this namespace (default: all but "
                       "kube-system, kube-public, kube-node-lease)")  # fmt: skip
    group.add_argument("--prometheus-address", default="", help="Prometheus URL (required)")
    group.add_argument("--prometheus-bearer-token-file", type=Path, metavar="FILE")
    group.add_argument(
        "--history-length", type=_duration, default=timedelta(days=7), metavar="DURATION",
        help="how much history to replay (default: 168h)",
    )  # fmt: skip
    group.add_argument(
        "--history-step", type=_duration, default=timedelta(minutes=5), metavar="DURATION",
        help="sample step of the history and the simulation (default: 5m)",
    )  # fmt: skip
    group.add_argument(
        "--node-price", type=_price, action="append", default=[], metavar="TYPE=PRICE",
        help="price per hour of an instance type (repeat per type)",
    )  # fmt: skip
    group.add_argument(
        "--write-scenario", type=Path, default=Path("from-cluster"), metavar="DIR",
        help="where to write scenario.yaml, usage.csv and replicas.csv (default: %(default)s)",
    )  # fmt: skip


async def _capture(args: argparse.Namespace) -> tuple[Path, list[str]]:
    clock = RealClock()
    step = max(1, int(args.history_step.total_seconds()))
    now = clock.now().astimezone(UTC)
    end = datetime.fromtimestamp(int(now.timestamp()) // step * step, tz=UTC)
    start = end - args.history_length
    client = await connect_for_reads(args, clock)
    async with client:
        cluster = await read_live_cluster(client, namespace=args.namespace or None)
    prometheus = PrometheusQueryClient(
        address=args.prometheus_address,
        auth=PrometheusAuth(bearer_token=prometheus_token(args)),
        timeout=_QUERY_TIMEOUT,
        clock=clock,
    )
    try:
        keys = sorted({workload_key(w) for w in cluster.workloads})
        histories = await read_history(
            prometheus, keys, start=start, end=end, step_seconds=step,
            address=args.prometheus_address,
        )  # fmt: skip
    finally:
        await prometheus.close()
    captured = build_capture(
        cluster,
        histories,
        start=start,
        end=end,
        step_seconds=step,
        prices=dict(args.node_price),
    )
    path = write_capture(captured, args.write_scenario, source=args.kubeconfig or "the cluster")
    return path, captured.notes


def capture(args: argparse.Namespace) -> Path | str:
    """Capture the cluster: the written scenario's path, or a one-line error."""
    if not args.prometheus_address:
        return "--prometheus-address is required with --from-cluster (the usage history)"
    try:
        check_prometheus_address(args.prometheus_address)
    except ValueError as exc:
        return f"--prometheus-address: {exc}"
    problem = _output_directory_problem(args.write_scenario)
    if problem is not None:
        return problem
    try:
        path, notes = asyncio.run(_capture(args))
    except CaptureError as err:
        return str(err)
    except READ_ERRORS as err:
        return read_failure(err)
    for note in notes:
        sys.stderr.write(f"kubescale simulate: note: {note}\n")
    sys.stderr.write(f"kubescale simulate: wrote {path} (edit and rerun it)\n")
    return path


def _output_directory_problem(directory: Path) -> str | None:
    if directory.exists() and not directory.is_dir():
        return f"--write-scenario {directory}: not a directory"
    parent = directory if directory.exists() else directory.parent
    if not parent.is_dir():
        return f"--write-scenario {directory}: directory {parent} does not exist"
    return None
