"""The install, rehearsed: kubectl renders manifests/ and applies it to the in-process API
server, and every object exists as written.

``kubectl kustomize`` is the Kustomize built into ``$KUBECTL_KUSTOMIZE`` (v5.8.1 in kubectl 1.37,
which tests/run.sh installs), and it warns about nothing; ``kubectl apply`` is Debian's kubectl
1.20 (``$KUBECTL``) over HTTPS to :class:`~kubescale.sim.apiserver.server.ApiServer` started
without CRDs, so the CRDs come from the manifests too. The self-signed overlay is rendered from
a copy of ``manifests/`` with the files ``kubescale certs`` writes, as README.md's steps do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubescale.base.clock import VirtualClock
from kubescale.cli.main import main as kubescale_main
from kubescale.sim.apiserver.server import ApiServer

from .conftest import kubectl_for, kubectl_kustomize, kustomize_build, needs_kubectl
from .manifest_files import BASE, CLUSTER_SCOPED_KINDS, MANIFESTS, overlays, render


def _identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (str(obj["kind"]), str(meta.get("namespace", "")), str(meta["name"]))


def _contains(actual: Any, expected: Any, where: str = "") -> list[str]:
    """Where ``actual`` differs from ``expected`` (every field written must be there, equal;
    the server may add defaults and metadata)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: {actual!r} is not a mapping"]
        return [
            problem
            for key, value in expected.items()
            for problem in _contains(actual.get(key), value, f"{where}.{key}")
        ]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: {actual!r} != {expected!r}"]
        return [
            problem
            for i, (a, e) in enumerate(zip(actual, expected, strict=True))
            for problem in _contains(a, e, f"{where}[{i}]")
        ]
    return [] if actual == expected else [f"{where}: {actual!r} != {expected!r}"]


def _self_signed_copy(tmp_path: Path) -> Path:
    """A copy of manifests/ with the certificate files the self-signed overlay generates from."""
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy, symlinks=True)
    certs = copy / "overlays" / "self-signed" / "certs"
    shutil.rmtree(certs, ignore_errors=True)
    code = kubescale_main(
        ["certs", "--service", "vpa-webhook", "--namespace", "kube-system",
         "--out", str(certs), "--key-type", "ecdsa"]
    )  # fmt: skip
    assert code == 0
    return copy


@pytest.mark.parametrize(
    "directory",
    [MANIFESTS, BASE, *overlays()],
    ids=lambda p: str(p.relative_to(MANIFESTS.parent)),
)
async def test_kustomize_builds_every_kustomization_without_a_warning(
    directory: Path, tmp_path: Path
) -> None:
    # Kustomize v5 prints "# Warning: 'bases' is deprecated. Please use 'resources' instead. …"
    # (and the same for patchesStrategicMerge, patchesJson6902, vars, commonLabels) on stderr at
    # every build, so at every `kubectl apply -k` (issue 32.5): nothing at all may be printed.
    copy = _self_signed_copy(tmp_path)
    built = await kustomize_build(copy / directory.relative_to(MANIFESTS), home=tmp_path)
    assert built.objects
    assert built.stderr == ""


async def test_kubectl_renders_the_base_and_every_overlay(tmp_path: Path) -> None:
    base = await kubectl_kustomize(MANIFESTS, home=tmp_path)
    assert sorted(map(_identity, base)) == sorted(map(_identity, render()))
    copy = _self_signed_copy(tmp_path)
    rendered = {
        overlay.name: await kubectl_kustomize(copy / "overlays" / overlay.name, home=tmp_path)
        for overlay in overlays()
    }
    assert sorted(rendered) == ["cert-manager", "self-signed", "service-monitor"]
    base_ids = set(map(_identity, base))
    added = {name: set(map(_identity, objs)) - base_ids for name, objs in rendered.items()}
    # the generated Secret's name carries a hash of its content, which the Deployment names
    (secret,) = [obj for obj in rendered["self-signed"] if obj["kind"] == "Secret"]
    assert secret["metadata"]["name"].startswith("vpa-tls-certs-")
    assert sorted(secret["data"]) == ["caCert.pem", "serverCert.pem", "serverKey.pem"]
    assert added["cert-manager"] == {
        ("Certificate", "kube-system", "kubescale-serving"),
        ("Issuer", "kube-system", "kubescale-selfsigned"),
        ("MutatingWebhookConfiguration", "", "vpa-webhook-config"),
    }
    assert added["service-monitor"] == {
        ("Service", "kube-system", "kubescale-metrics"),
        ("ServiceMonitor", "kube-system", "kubescale"),
    }
    for name, objects in rendered.items():
        (deployment,) = [obj for obj in objects if obj["kind"] == "Deployment"]
        pod = deployment["spec"]["template"]["spec"]
        args = pod["containers"][0]["args"]
        (tls_volume,) = [v for v in pod["volumes"] if v["name"] == "tls-certs"]
        if name == "service-monitor":  # the base's self-managed certificates
            assert tls_volume == {"name": "tls-certs", "emptyDir": {}}
            assert "--tls-secret-name=vpa-tls-certs" in args
            continue
        # the certificate overlays mount their Secret instead; kubescale does not manage it
        assert not [a for a in args if a.startswith("--tls-secret-name")], name
        (volume,) = [v for v in pod["volumes"] if "secret" in v]
        assert volume is tls_volume
        if name == "self-signed":
            assert volume["secret"]["secretName"] == secret["metadata"]["name"]
        if name == "cert-manager":
            assert "--register-webhook=false" in args
            assert {i["path"] for i in volume["secret"]["items"]} == {
                "caCert.pem", "serverCert.pem", "serverKey.pem"}  # fmt: skip
        # no $(VAR) left unresolved but the container's own $(NAMESPACE)
        text = json.dumps(objects).replace("$(NAMESPACE)", "")
        assert "$(" not in text, name


@needs_kubectl
async def test_kubectl_apply_installs_the_self_signed_overlay_as_written(tmp_path: Path) -> None:
    copy = _self_signed_copy(tmp_path)
    objects = await kubectl_kustomize(copy / "overlays" / "self-signed", home=tmp_path)
    async with ApiServer(clock=VirtualClock(), crd_dirs=[]) as server:
        kubectl = kubectl_for(server, tmp_path)
        stdin = yaml.safe_dump_all(objects)  # (kubectl 1.20 panics on long JSON documents)
        applied = await kubectl.ok("apply", "-f", "-", stdin=stdin)
        assert applied.stdout.count("created") == len(objects), applied.stdout
        problems: list[str] = []
        for obj in objects:
            kind, namespace, name = _identity(obj)
            where = [] if kind in CLUSTER_SCOPED_KINDS else ["-n", namespace]
            got = await kubectl.ok("get", f"{kind}.{_group(obj)}".rstrip("."), name, *where,
                                   "-o", "json")  # fmt: skip
            problems += _contains(json.loads(got.stdout), obj, f"{kind}/{name}")
        assert problems == []
        # applying again creates nothing and leaves every object as written (kubectl 1.20
        # re-sends a PodDisruptionBudget's selector, patchStrategy replace: "configured")
        again = await kubectl.ok("apply", "-f", "-", stdin=stdin)
        lines = again.stdout.splitlines()
        assert len(lines) == len(objects), again.stdout
        assert all(line.endswith((" unchanged", " configured")) for line in lines), lines
        assert [line for line in lines if line.endswith(" configured")] in (
            [],
            ["poddisruptionbudget.policy/kubescale configured"],
        )


def _group(obj: dict[str, Any]) -> str:
    api_version = str(obj["apiVersion"])
    return api_version.rpartition("/")[0] if "/" in api_version else ""
