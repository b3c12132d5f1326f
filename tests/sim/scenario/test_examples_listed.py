"""The examples as a new user meets them (issue 32.6): every scenario is in
``examples/README.md``; one that runs no kubescale component says so, in its own comment and in
the README; and what the webhook did shows in the text summary (it used to say "Decisions:
none" after the webhook had resized every pod)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kubescale.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"
NO_COMPONENT = "no kubescale component"


def _rows() -> dict[str, str]:
    """The README's table: each example's file name and its description."""
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `([\w.-]+\.yaml)` \| (.*) \|$", text, re.MULTILINE))


def _scenarios() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


def test_every_example_is_in_the_readme() -> None:
    rows = _rows()
    assert [p.name for p in _scenarios() if p.name not in rows] == []
    assert [name for name in rows if not (EXAMPLES / name).is_file()] == []


@pytest.mark.parametrize("path", _scenarios(), ids=lambda p: p.name)
def test_an_example_without_kubescale_says_so(path: Path) -> None:
    scenario = yaml.safe_load(path.read_text(encoding="utf-8"))
    runs_kubescale = bool(scenario.get("kubescale")) or "trace" in scenario
    comment = " ".join(
        line.lstrip("# ") for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    )  # fmt: skip
    row = _rows()[path.name]
    if runs_kubescale:
        assert NO_COMPONENT not in row.lower()
    else:
        assert NO_COMPONENT in comment.lower(), path.name
        assert NO_COMPONENT in row.lower(), path.name


def test_the_webhooks_resizes_are_decisions_in_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # vpa-webhook.yaml: the webhook sizes web's 3 pods from the VPA (batch has no VPA)
    code = main(["simulate", str(EXAMPLES / "vpa-webhook.yaml"), "--quiet", "--duration", "4m"])
    assert code == 0
    out = capsys.readouterr().out
    assert "Decisions: none" not in out
    resizes = re.findall(r"webhook resize  shop/(web-\S+): Pod resources updated by web", out)
    assert len(resizes) == 3
    assert not re.search(r"webhook resize  shop/batch", out)
