"""Fixtures shared by every topic's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubescale.cli.main import main
from kubescale.components import REGISTRY


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving certificate for ``kubescale.kube-system`` (``kubescale certs``)."""
    out = tmp_path_factory.mktemp("certs")
    argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", str(out)]
    assert main([*argv, "--key-type", "ecdsa"]) == 0
    return out


def only_components(*names: str) -> list[str]:
    """``serve`` flags that turn every registered component off except ``names`` (tests that
    run one system; new systems need no edit here)."""
    flags: list[str] = []
    for spec in REGISTRY:
        flags += [f"--{spec.mode_flag}", "true" if spec.name in names else "false"]
    return flags


def component_names() -> list[str]:
    """Every registered component's name, in registry order."""
    return [spec.name for spec in REGISTRY]
