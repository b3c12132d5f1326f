"""Fixtures shared by every topic's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubescale.cli.main import main


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving certificate for ``kubescale.kube-system`` (``kubescale certs``)."""
    out = tmp_path_factory.mktemp("certs")
    argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", str(out)]
    assert main([*argv, "--key-type", "ecdsa"]) == 0
    return out
