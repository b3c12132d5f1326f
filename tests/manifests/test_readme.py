"""manifests/README.md's commands and overlay match the manifests they are about."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from kubescale.cli.main import build_parser

from .conftest import kubectl_kustomize, needs_kustomize
from .manifest_files import MANIFESTS, find, install_namespace, render

README = MANIFESTS / "README.md"
_FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [body for lang, body in _FENCE.findall(text) if lang == language]


def _command(prefix: str) -> list[str]:
    (line,) = [
        line.strip()
        for block in _blocks("sh")
        for line in block.splitlines()
        if line.strip().startswith(prefix)
    ]
    return shlex.split(line)


def test_the_certificate_command_is_for_the_webhook_service() -> None:
    argv = _command("kubescale certs")
    args = build_parser().parse_args(argv[1:])
    service = find(render(), "Service")
    assert (args.service, args.namespace) == (service["metadata"]["name"], install_namespace())


def test_the_default_install_needs_no_secret_made_by_hand() -> None:
    # no `kubectl create secret` step: the base's Deployment manages its own Secret
    assert _commands("kubectl -n") == []
    deployment = find(render(), "Deployment", "kubescale")
    pod = deployment["spec"]["template"]["spec"]
    assert "--tls-secret-name=vpa-tls-certs" in pod["containers"][0]["args"]
    assert not [v for v in pod["volumes"] if "secret" in v]


def _commands(prefix: str) -> list[list[str]]:
    return [
        shlex.split(line.strip())
        for block in _blocks("sh")
        for line in block.splitlines()
        if line.strip().startswith(prefix)
    ]


def test_the_install_commands_apply_kustomizations_that_exist() -> None:
    applied = _commands("kubectl apply")
    assert ["kubectl", "apply", "-k", "manifests/"] in applied
    assert ["kubectl", "apply", "-k", "manifests/overlays/self-signed/"] in applied
    for argv in applied:
        assert argv[:3] == ["kubectl", "apply", "-k"]
        directory = MANIFESTS.parent / argv[3]
        assert (directory / "kustomization.yaml").is_file(), argv


def test_the_certificates_go_where_the_self_signed_overlay_reads_them() -> None:
    argv = _command("kubescale certs")
    out = argv[argv.index("--out") + 1]
    assert MANIFESTS.parent / out == MANIFESTS / "overlays" / "self-signed" / "certs"


def test_the_overlay_example_builds_on_the_base() -> None:
    (block,) = _blocks("yaml")
    overlay: dict[str, Any] = yaml.safe_load(block)
    assert overlay["resources"] == ["../../manifests/base"]
    assert "bases" not in overlay  # deprecated in Kustomize v5
    assert overlay["namespace"] != install_namespace()
    (image,) = overlay["images"]
    deployment = find(render(), "Deployment", "kubescale")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].split(":")[0] == image["name"]


@needs_kustomize
async def test_the_overlay_example_renders_into_its_namespace(tmp_path: Path) -> None:
    (block,) = _blocks("yaml")
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    overlay = tmp_path / "overlays" / "team-a"
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(block, encoding="utf-8")
    objects = await kubectl_kustomize(overlay, home=tmp_path)
    assert sorted(
        obj["metadata"].get("namespace", "")
        for obj in objects
        if obj["kind"] in ("Role", "Service")
    ) == ["team-a", "team-a"]
    (subject,) = find(objects, "ClusterRoleBinding")["subjects"]
    assert subject["namespace"] == "team-a"
    (container,) = find(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/kubescale:0.1.0"
