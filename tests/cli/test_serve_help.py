"""``kubescale serve --help`` comes from the stored flag catalogue (:mod:`kubescale.cli.serve_help`)
and imports no system; the catalogue matches the real parser byte for byte.

Regenerate the catalogue after a flag changes: ``python -m tests.cli.test_serve_help``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubescale.cli import serve_help
from kubescale.cli.main import asks_for_help, build_parser

ROOT = Path(__file__).resolve().parents[2]
_PROBE = """
import json, sys
from kubescale.cli.main import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _serve_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub: argparse.ArgumentParser = action.choices["serve"]
    return sub


def _real() -> argparse.ArgumentParser:
    return _serve_parser(build_parser(only="serve"))


def _from_catalogue() -> argparse.ArgumentParser:
    return _serve_parser(build_parser(only="serve", for_help=True))


def test_the_stored_catalogue_is_the_real_parsers() -> None:
    fresh = serve_help.catalogue_of(_real())
    assert fresh == serve_help.load_catalogue(), (
        "serve's flags changed: regenerate with `python -m tests.cli.test_serve_help`"
    )


@pytest.mark.parametrize("columns", ["80", "100", "237"])
def test_the_help_from_the_catalogue_is_the_real_help(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # argparse wraps to the terminal's width ($COLUMNS): equal at each width.
    monkeypatch.setenv("COLUMNS", columns)
    real = _real().format_help()
    assert len(real.splitlines()) > 200  # every component's flags are in it
    assert _from_catalogue().format_help() == real


@pytest.mark.parametrize(
    "argv", [["serve", "--help"], ["serve", "-h"], ["serve", "--port", "1", "-h"]]
)
def test_serve_help_imports_no_system(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        check=True, timeout=600,  # a guard against a hung child only
    )  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["code"] == 0
    assert "--vpa-recommender" in done.stdout  # the components' flags are listed
    heavy = ("kubescale.controllers", "kubescale.components", "kubescale.webhook", "aiohttp")
    assert [m for m in out["modules"] if m.startswith(heavy)] == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "--help"], True),
        (["serve", "-h", "--port", "1"], True),
        (["serve", "--port", "1"], False),
        (["serve", "--", "--help"], False),
    ],
)
def test_asks_for_help(argv: list[str], expected: bool) -> None:
    assert asks_for_help(argv) is expected


def test_serve_without_help_still_checks_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser(only="serve")
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["serve", "--port", "70000"])
    assert exit_info.value.code == 2
    assert "--port" in capsys.readouterr().err


if __name__ == "__main__":
    serve_help.CATALOGUE_PATH.write_text(
        json.dumps(serve_help.catalogue_of(_real()), indent=1, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
