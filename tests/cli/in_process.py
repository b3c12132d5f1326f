"""A ``kubescale`` command run in the test's own process (issue 32.7: a child costs an
interpreter start and kubescale's imports, about 2 s of CPU, before it does anything).

``python -m kubescale ARGS`` is ``sys.exit(main(ARGS))``: the exit code is ``main``'s return or
argparse's ``SystemExit``, the output what it wrote to ``sys.stdout``/``sys.stderr`` (pytest's
``capsys``). ``report`` and ``simulate`` route logging to one stderr handler
(``configure_logging`` replaces the root logger's handlers); the handlers and levels are put
back after the call, so no handler outlives the captured stream. Each command keeps at least one
test that runs it as a real child (the entry point itself).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from kubescale.cli.main import main


@dataclass(frozen=True)
class Done:
    """What the command did: its exit code and output (as ``subprocess.CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


def run_main(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> Done:
    """``kubescale ARGV`` in this process (any thread: ``main`` runs its own event loop)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    own_level = logging.getLogger("kubescale").level
    capsys.readouterr()  # only this command's output
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code  # type: ignore[assignment]
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        logging.getLogger("kubescale").setLevel(own_level)
    out, err = capsys.readouterr()
    assert isinstance(code, int), code
    return Done(code, out, err)
