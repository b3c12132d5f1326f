"""Every bench script imports as a module of ``bench`` (issue 30 item 3): tests and other
scripts reuse their builders (``from bench.scale_cluster import ...``), which a script that
finds its siblings only as top-level modules (``import scale_cluster``, true only when run as
``python bench/x.py``) breaks. Importing runs no bench: each script's work is behind its
``if __name__ == "__main__"`` guard."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPT_ONLY = {
    # Its server child runs this script with PYTHONPATH set to another tree (--tree) to
    # measure that tree: the sibling it imports must come from this script's directory, not
    # from the tree's bench/, so it stays a top-level import.
    "serving_under_cpu_load": "imports descheduler_pass from its own directory",
}
"""Scripts that run only as scripts, and why: may only shrink."""

SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", [n for n in SCRIPTS if n not in SCRIPT_ONLY])
def test_each_bench_script_imports_as_a_module(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert Path(module.__file__ or "").resolve() == BENCH / f"{name}.py"


def test_the_script_only_list_names_scripts_that_exist() -> None:
    assert set(SCRIPT_ONLY) <= set(SCRIPTS)
