"""Fixtures: the in-process API server with ``manifests/crds`` loaded, a real client, kubectl.

Every request goes over HTTPS to :class:`kubescale.sim.apiserver.server.ApiServer` through the real
``kubernetes.aio`` client or the real ``kubectl`` (``$KUBECTL``, else the one on PATH; the kubectl
tests skip without one). Nothing is patched.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio import client, config

from kubescale.base.clock import VirtualClock
from kubescale.sim.apiserver.server import ApiServer

from .manifest_files import CRD_DIR

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")
KUBECTL_TIMEOUT = 60.0


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    """An API server that loaded the CRDs of ``manifests/crds`` at start, as it does by default."""
    async with ApiServer(clock=VirtualClock(), crd_dirs=[CRD_DIR]) as api_server:
        yield api_server


@pytest.fixture
async def api(server: ApiServer) -> AsyncIterator[Any]:
    """A ``kubernetes.aio`` ApiClient configured from the server's TLS kubeconfig."""
    configuration = client.Configuration()
    load: Any = config.load_kube_config_from_dict  # untyped in kubernetes 37
    await load(server.kubeconfig(), client_configuration=configuration)
    async with client.ApiClient(configuration=configuration) as api_client:
        yield api_client


@dataclass(frozen=True)
class KubectlResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"kubectl {' '.join(self.args)} → {self.returncode}\n{self.stdout}\n{self.stderr}"


@dataclass(frozen=True)
class Kubectl:
    """kubectl pointed at one API server through a kubeconfig file."""

    kubeconfig: Path
    home: Path

    async def run(self, *args: str, stdin: str | None = None) -> KubectlResult:
        assert KUBECTL is not None
        process = await asyncio.create_subprocess_exec(
            KUBECTL,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.home / 'cache'}",
            "--request-timeout=20s",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(self.home)},
        )
        data = stdin.encode() if stdin is not None else None
        out, err = await asyncio.wait_for(process.communicate(data), KUBECTL_TIMEOUT)
        assert process.returncode is not None
        return KubectlResult(args, process.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None) -> KubectlResult:
        result = await self.run(*args, stdin=stdin)
        assert result.returncode == 0, result.explain()
        return result


@functools.cache
def kubectl_minor() -> int:
    """The minor version of ``$KUBECTL`` (CI uses Debian's 1.20; operators mostly newer ones)."""
    assert KUBECTL is not None
    out = subprocess.run(
        [KUBECTL, "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT,
        check=True,
    ).stdout
    return int(json.loads(out)["clientVersion"]["minor"].rstrip("+"))


async def kubectl_kustomize(directory: Path, *, home: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize <directory>`` renders (kustomize built into kubectl:
    v2.0.3 in Debian's kubectl 1.20, which the manifests are written for)."""
    assert KUBECTL is not None
    process = await asyncio.create_subprocess_exec(
        KUBECTL,
        "kustomize",
        str(directory),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home)},
    )
    out, err = await asyncio.wait_for(process.communicate(), KUBECTL_TIMEOUT)
    if process.returncode != 0 and b"unknown command" in err:
        pytest.skip("this kubectl has no built-in kustomize")
    assert process.returncode == 0, err.decode()
    return [doc for doc in yaml.safe_load_all(out) if doc]


def kubectl_for(server: ApiServer, tmp_path: Path) -> Kubectl:
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    return Kubectl(kubeconfig=kubeconfig, home=tmp_path)


needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
