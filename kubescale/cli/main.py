"""``kubescale`` command line: one parser, a subcommand per job.

Every bad flag or value ends the program with exit code 2 and one line naming it, e.g.
``kubescale serve: error: argument --port: port 70000 out of range 0-65535``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from kubescale import __version__
from kubescale.cli import (
    apiserver_command,
    certs_command,
    report_command,
    serve,
    simulate_command,
)

_DASH_DIGIT = re.compile(r"^-\d")


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line (no usage dump) so they are easy to read in pod logs,
    and no prefix abbreviation: ``--min-rep`` is an unknown flag, never ``--min-replicas``
    (an abbreviation that silently meant a flag could come to mean another one, or none,
    when flags are added). Every subcommand's parser is one of these."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        # A value that starts with "-" and a digit (``--duration -5m``) is a value, so its own
        # check answers ("must be positive"), not "expected one argument": argparse treats a
        # token as a value when it matches this and no flag of the parser looks like one.
        self._negative_number_matcher = _DASH_DIGIT

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kubescale",
        description="One process that autoscales a Kubernetes cluster: VPA admission webhook, "
        "scheduler extender, and VPA/HPA/cluster-autoscaler/descheduler loops.",
    )
    parser.add_argument("--version", action="version", version=f"kubescale {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    serve_parser = commands.add_parser(
        "serve",
        help="run the TLS server, health/metrics server and the control loops",
        description="Run the webhook/extender TLS server, the plain health and metrics server, "
        "and the control loops, until SIGTERM.",
    )
    serve.add_arguments(serve_parser)
    serve_parser.set_defaults(handler=serve.run)

    certs_parser = commands.add_parser(
        "certs",
        help="generate a CA and a serving certificate for a Service",
        description="Generate a CA and a serving certificate/key for a Service, write them as "
        "caCert.pem, caKey.pem, serverCert.pem, serverKey.pem and print the base64 "
        "caBundle.",
    )
    certs_command.add_arguments(certs_parser)
    certs_parser.set_defaults(handler=certs_command.run)

    apiserver_parser = commands.add_parser(
        "apiserver",
        help="run the in-process Kubernetes API server standalone (for kubectl)",
        description="Run the simulated Kubernetes API server on 127.0.0.1 over HTTPS and HTTP, "
        "write a kubeconfig for it, and serve until SIGTERM.",
    )
    apiserver_command.add_arguments(apiserver_parser)
    apiserver_parser.set_defaults(handler=apiserver_command.run)

    simulate_parser = commands.add_parser(
        "simulate",
        help="run a scenario on the embedded simulated cluster and report",
        description="Run a scenario (default: the built-in demo) on an in-process simulated "
        "cluster with kubescale, print a summary table and optionally write JSON/HTML reports.",
    )
    simulate_command.add_arguments(simulate_parser)
    simulate_parser.set_defaults(handler=simulate_command.run)

    report_parser = commands.add_parser(
        "report",
        help="a live cluster's resource recommendations (read-only): table, JSON or HTML",
        description="Read a cluster through a kubeconfig and report, per workload with a VPA "
        "(or every workload with --all-workloads), current requests and limits against the "
        "recommendation's lower bound, target and upper bound, savings or risk, the HPA, and "
        "node usage. Writes nothing to the cluster.",
    )
    report_command.add_arguments(report_parser)
    report_parser.set_defaults(handler=report_command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
