"""``kubescale report``: a live cluster's resource recommendations (Goldilocks-style), read-only.

From a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, in-cluster, ``~/.kube/config``):
every workload with a VPA — or with ``--all-workloads`` every Deployment, StatefulSet and
DaemonSet, those without a VPA getting the recommender model's recommendation from
metrics.k8s.io and, with ``--prometheus-address``, Prometheus history (nothing is created) —
its requests and limits against lower bound / target / upper bound, savings or risk, its HPA,
and the nodes' requests and usage. ``-o table`` (default) on stdout, ``-o json``, ``-o html``;
``--out FILE`` writes to a file instead of stdout.

Every failure is one line on stderr and a non-zero exit: ``2`` for a bad flag, ``1`` for a
kubeconfig that cannot be used, an API server that cannot be reached or refuses a read.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from datetime import timedelta
from pathlib import Path

from kubescale.base.clock import RealClock
from kubescale.base.logs import LOG_LEVELS, configure_logging
from kubescale.cli.cluster_reads import (
    READ_ERRORS,
    connect_for_reads,
    prometheus_token,
    read_failure,
)
from kubescale.controllers.vpa.recommender.prometheus_history import PrometheusHistoryProvider
from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    PrometheusHistoryConfig,
    parse_prometheus_duration,
)
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.rendering.json_text import dumps_report
from kubescale.rendering.text_table import WIDTH
from kubescale.report.cluster_reading import read_cluster
from kubescale.report.html_page import render_html
from kubescale.report.model_recommendations import model_recommendations
from kubescale.report.report_assembly import assemble_report
from kubescale.report.text_report import render_text

PROG = "kubescale report"


def _prometheus_duration(text: str) -> str:
    try:
        parse_prometheus_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"invalid Prometheus duration {text!r}: {err}") from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default="", help="kubeconfig file (default: $KUBECONFIG, "
                        "in-cluster, then ~/.kube/config)")  # fmt: skip
    parser.add_argument("--context", default="", help="kubeconfig context (default: current)")
    parser.add_argument("-n", "--namespace", default="", help="only this namespace (default: all)")
    parser.add_argument(
        "-A",
        "--all-workloads",
        action="store_true",
        help="every Deployment, StatefulSet and DaemonSet, not only those with a VPA",
    )
    parser.add_argument(
        "-o", "--output", choices=("table", "json", "html"), default="table",
        help="(default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, metavar="FILE", help="write here, not to stdout")
    history = parser.add_argument_group("history for --all-workloads (VPA recommender's flags)")
    history.add_argument("--prometheus-address", default="", help="Prometheus URL (default: "
                         "none: only the live metrics.k8s.io sample)")  # fmt: skip
    history.add_argument("--history-length", type=_prometheus_duration, default="8d")
    history.add_argument("--history-resolution", type=_prometheus_duration, default="1h")
    history.add_argument("--prometheus-bearer-token-file", type=Path, metavar="FILE")
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default="error", help="(default: %(default)s)"
    )


def _fail(message: str) -> int:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return 1


async def _report(args: argparse.Namespace) -> str:
    clock = RealClock()
    client = await connect_for_reads(args, clock)
    async with client:
        reading = await read_cluster(client, namespace=args.namespace or None)
    now = clock.now()
    model = None
    if args.all_workloads:
        provider = None
        if args.prometheus_address:
            provider = PrometheusHistoryProvider(
                PrometheusHistoryConfig(
                    address=args.prometheus_address,
                    history_length=args.history_length,
                    history_resolution=args.history_resolution,
                    query_timeout=timedelta(minutes=1),
                ),
                auth=PrometheusAuth(bearer_token=prometheus_token(args)),
                clock=clock,
            )
        try:
            model = await model_recommendations(
                workloads=reading.workloads,
                pods=reading.pods,
                pod_metrics=reading.pod_metrics,
                now=now,
                history=provider,
            )
        finally:
            if provider is not None:
                await provider.close()
    report = assemble_report(
        reading,
        now=now,
        namespace=args.namespace or None,
        all_workloads=args.all_workloads,
        model=model,
    )
    if args.output == "json":
        return dumps_report(report)
    if args.output == "html":
        return render_html(report)
    return render_text(report, width=_text_width(args))


def _text_width(args: argparse.Namespace) -> int:
    """The terminal's width for stdout (``$COLUMNS``, else the terminal's, else 120), 120 for
    a file; never under 40."""
    if args.out is not None:
        return WIDTH
    return max(40, shutil.get_terminal_size((WIDTH, 24)).columns)


def run(args: argparse.Namespace) -> int:
    configure_logging(level=args.log_level, fmt="text")
    try:
        text = asyncio.run(_report(args))
    except READ_ERRORS as err:
        return _fail(read_failure(err))
    if args.out is not None:
        try:
            args.out.write_text(text, encoding="utf-8")
        except OSError as err:
            return _fail(f"cannot write {args.out}: {err}")
    else:
        sys.stdout.write(text)
    return 0
