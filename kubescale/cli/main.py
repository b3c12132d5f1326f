"""``kubescale`` command line: one parser, a subcommand per job.

Every bad flag or value ends the program with exit code 2 and one line naming it, e.g.
``kubescale serve: error: argument --port: port 70000 out of range 0-65535``.

Commands are loaded by name: :data:`COMMANDS` lists each command's module (its
``add_arguments(parser)`` and ``run(args)``), and :func:`main` imports only the module of the
command on the command line (:func:`importlib.import_module`, the one place the package imports
a module by name; ``tests/platform/test_layers.py`` holds it to this table). ``kubescale
--help``, ``--version`` and an unknown command import nothing but this module (issue 32.6:
``--help`` cost 1.7 s of CPU in imports); ``kubescale report --help`` imports the report
command, not the simulator or the systems.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol, cast

from kubescale import __version__

__all__ = ["COMMANDS", "Command", "asks_for_help", "build_parser", "main"]

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


class _CommandModule(Protocol):
    """What a command's module provides."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, its module under ``kubescale.cli`` and its help texts."""

    name: str
    module: str
    help: str
    description: str
    help_module: str | None = None
    """A module under ``kubescale.cli`` whose ``add_arguments`` declares the command's flags
    for ``--help`` alone, without importing what the command runs (``serve``: every system)."""

    def load(self) -> _CommandModule:
        """Import the command's module (by name: only the command that runs is imported)."""
        return cast(_CommandModule, _load(self.module))

    def help_flags(self) -> Callable[[argparse.ArgumentParser], None]:
        """What declares the command's flags for ``--help``: its help module's, if it has one,
        else its own module's."""
        if self.help_module is None:
            return self.load().add_arguments
        declare: Callable[[argparse.ArgumentParser], None] = _load(self.help_module).add_arguments
        return declare


def _load(module: str) -> Any:
    """Import ``kubescale.cli.<module>`` (the one import by name; see the module docstring)."""
    return importlib.import_module(f"kubescale.cli.{module}")


COMMANDS: Final = (
    Command(
        "serve",
        "serve",
        help="run the TLS server, health/metrics server and the control loops",
        description="Run the webhook/extender TLS server, the plain health and metrics server, "
        "and the control loops, until SIGTERM.",
        help_module="serve_help",
    ),
    Command(
        "certs",
        "certs_command",
        help="generate a CA and a serving certificate for a Service",
        description="Generate a CA and a serving certificate/key for a Service, write them as "
        "caCert.pem, caKey.pem, serverCert.pem, serverKey.pem and print the base64 "
        "caBundle.",
    ),
    Command(
        "apiserver",
        "apiserver_command",
        help="run the in-process Kubernetes API server standalone (for kubectl)",
        description="Run the simulated Kubernetes API server on 127.0.0.1 over HTTPS and HTTP, "
        "write a kubeconfig for it, and serve until SIGTERM.",
    ),
    Command(
        "simulate",
        "simulate_command",
        help="run a scenario on the embedded simulated cluster and report",
        description="Run a scenario (default: the built-in demo) on an in-process simulated "
        "cluster with kubescale, print a summary table and optionally write JSON/HTML reports.",
    ),
    Command(
        "report",
        "report_command",
        help="a live cluster's resource recommendations (read-only): table, JSON or HTML",
        description="Read a cluster through a kubeconfig and report, per workload with a VPA "
        "(or every workload with --all-workloads), current requests and limits against the "
        "recommendation's lower bound, target and upper bound, savings or risk, the HPA, and "
        "node usage. Writes nothing to the cluster.",
    ),
)
"""Every subcommand, in the order ``--help`` lists them."""


def build_parser(*, only: str | None = None, for_help: bool = False) -> argparse.ArgumentParser:
    """The parser; with ``only``, the flags of that command alone are declared (its module alone
    imported): the other commands are listed, with no flags. ``None``: every command's.
    ``for_help``: the command line asks for ``only``'s help, so a command with a help module
    declares its flags from it (for display: nothing of the command is imported)."""
    parser = _Parser(
        prog="kubescale",
        description="One process that autoscales a Kubernetes cluster: VPA admission webhook, "
        "scheduler extender, and VPA/HPA/cluster-autoscaler/descheduler loops.",
    )
    parser.add_argument("--version", action="version", version=f"kubescale {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.description)
        if for_help and only == command.name:
            command.help_flags()(sub)
        elif only is None or only == command.name:
            module = command.load()
            module.add_arguments(sub)
            sub.set_defaults(handler=module.run)
    return parser


def command_named(argv: Sequence[str]) -> str:
    """The command a command line runs: its first word that is not a flag (the top-level flags,
    ``--help`` and ``--version``, take no value); ``""`` when none names a command or a
    top-level ``--help``/``--version`` comes first (it answers before any command is read)."""
    names = {command.name for command in COMMANDS}
    for word in argv:
        if word in ("-h", "--help", "--version"):
            return ""
        if not word.startswith("-"):
            return word if word in names else ""
    return ""


def asks_for_help(argv: Sequence[str]) -> bool:
    """``-h`` or ``--help`` among the words before a ``--``."""
    for word in argv:
        if word == "--":
            return False
        if word in ("-h", "--help"):
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=command_named(words), for_help=asks_for_help(words))
    args = parser.parse_args(words)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
