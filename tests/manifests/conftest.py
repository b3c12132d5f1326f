"""Fixtures: the in-process API server with ``manifests/crds`` loaded, a real client, kubectl.

Every request goes over HTTPS to :class:`kubescale.sim.apiserver.server.ApiServer` through the real
``kubernetes.aio`` client or the real ``kubectl`` (``$KUBECTL``, else the one on PATH; the kubectl
tests skip without one). Nothing is patched.

``kubectl kustomize`` alone runs ``$KUBECTL_KUSTOMIZE`` (else the kubectl on PATH): tests/run.sh
installs kubectl 1.37 (Kustomize v5.8.1) for it, since the manifests use ``resources``,
``patches`` and ``replacements``, which the Kustomize v2.0.3 of Debian's kubectl 1.20 (still
``$KUBECTL``, for the API server conformance and ``kubectl apply`` tests) cannot build.
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
from typing import Any, Final

import pytest
import yaml
from kubernetes.aio import client, config

from kubescale.base.clock import VirtualClock
from kubescale.sim.apiserver.server import ApiServer

from .manifest_files import CRD_DIR

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")
KUBECTL_KUSTOMIZE = os.environ.get("KUBECTL_KUSTOMIZE") or shutil.which("kubectl")
KUBECTL_TIMEOUT = 60.0
KUSTOMIZE_MAJOR: Final = 5
"""The Kustomize the manifests are written for (``replacements`` with ``options.delimiter``,
``patches`` by path, ``resources`` naming directories; none of the deprecated fields)."""


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


@functools.cache
def kustomize_major() -> int:
    """The major version of the Kustomize built into ``$KUBECTL_KUSTOMIZE`` (0 when it does not
    say: kubectl before 1.24 prints no ``kustomizeVersion``)."""
    assert KUBECTL_KUSTOMIZE is not None
    out = subprocess.run(
        [KUBECTL_KUSTOMIZE, "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT,
        check=True,
    ).stdout
    version = str(json.loads(out).get("kustomizeVersion") or "v0")
    return int(version.lstrip("v").split(".")[0])


@dataclass(frozen=True)
class Kustomized:
    objects: list[dict[str, Any]]
    stderr: str


async def kustomize_build(directory: Path, *, home: Path) -> Kustomized:
    """``kubectl kustomize <directory>`` with ``$KUBECTL_KUSTOMIZE``: the objects and what it
    printed on stderr (where kustomize writes its deprecation warnings). Skips when there is no
    kubectl, or its Kustomize is older than :data:`KUSTOMIZE_MAJOR`."""
    if KUBECTL_KUSTOMIZE is None:
        pytest.skip("no kubectl for kustomize ($KUBECTL_KUSTOMIZE; tests/run.sh installs it)")
    if kustomize_major() < KUSTOMIZE_MAJOR:
        pytest.skip(
            f"{KUBECTL_KUSTOMIZE}'s Kustomize is older than v{KUSTOMIZE_MAJOR}; set "
            "$KUBECTL_KUSTOMIZE to a kubectl >= 1.27 (tests/run.sh installs 1.37)"
        )
    process = await asyncio.create_subprocess_exec(
        KUBECTL_KUSTOMIZE,
        "kustomize",
        str(directory),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home)},
    )
    out, err = await asyncio.wait_for(process.communicate(), KUBECTL_TIMEOUT)
    assert process.returncode == 0, err.decode()
    return Kustomized([doc for doc in yaml.safe_load_all(out) if doc], err.decode())


async def kubectl_kustomize(directory: Path, *, home: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize <directory>`` renders (:func:`kustomize_build`)."""
    return (await kustomize_build(directory, home=home)).objects


def kubectl_for(server: ApiServer, tmp_path: Path) -> Kubectl:
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    return Kubectl(kubeconfig=kubeconfig, home=tmp_path)


needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
needs_kustomize = pytest.mark.skipif(
    KUBECTL_KUSTOMIZE is None, reason="no kubectl for kustomize ($KUBECTL_KUSTOMIZE)"
)
