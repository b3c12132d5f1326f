"""``kubescale --help`` and argument errors import only the CLI (issue 32.6: ``--help`` cost
1.7 s of CPU importing every system): :func:`kubescale.cli.main.main` imports the module of the
command on the command line alone. Checked in a fresh interpreter by the modules it holds
afterwards — a mechanism, not a CPU time."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubescale.cli.main import COMMANDS, build_parser, command_named

ROOT = Path(__file__).resolve().parents[2]
CLI_ONLY = {"kubescale", "kubescale.cli", "kubescale.cli.main"}
HEAVY = ("aiohttp", "cryptography", "kubescale.components", "kubescale.sim", "kubescale.kube")
_PROBE = """
import json, sys
from kubescale.cli.main import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(argv: list[str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        check=True, timeout=600,  # a guard against a hung child only
    )  # fmt: skip
    last = done.stdout.strip().splitlines()[-1]
    return set(json.loads(last))


def _ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "kubescale" or m.startswith("kubescale.")}


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], [], ["bogus"], ["--bogus"], ["-h", "serve"]],
)
def test_help_version_and_top_level_errors_import_only_the_cli(argv: list[str]) -> None:
    modules = _modules_after(argv)
    assert _ours(modules) == CLI_ONLY
    assert not [m for m in modules if m.startswith(HEAVY)]


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (["report", "--help"], "report_command"),
        (["report", "-o", "yaml"], "report_command"),
        (["certs", "--help"], "certs_command"),
        (["simulate", "--help"], "simulate_command"),
    ],
)
def test_a_command_imports_its_own_module_only(argv: list[str], loaded: str) -> None:
    modules = _ours(_modules_after(argv))
    commands = {f"kubescale.cli.{c.module}" for c in COMMANDS}
    assert commands & modules == {f"kubescale.cli.{loaded}"}


def test_certs_help_needs_no_network_stack() -> None:
    modules = _modules_after(["certs", "--help"])
    assert not [m for m in modules if m.startswith(("aiohttp", "kubescale.sim"))]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "--port", "1"], "serve"),
        (["--version"], ""),
        (["-h", "report"], ""),  # the top-level help answers first
        (["report", "-h"], "report"),
        (["bogus", "serve"], ""),  # the first word names the command: an unknown one
        ([], ""),
    ],
)
def test_the_command_is_the_first_word(argv: list[str], expected: str) -> None:
    assert command_named(argv) == expected


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_full_parser_declares_every_command_and_a_lazy_one_only_its_own() -> None:
    full = _subparsers(build_parser())
    assert list(full) == [c.name for c in COMMANDS]
    assert all(callable(sub.get_default("handler")) for sub in full.values())
    lazy = _subparsers(build_parser(only="certs"))
    assert [name for name, sub in lazy.items() if sub.get_default("handler")] == ["certs"]
