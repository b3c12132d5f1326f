"""Release artefacts (issue 32.2): what can be checked without GitHub, a registry or Docker.

* ``.github/workflows/release.yml`` is a valid workflow (GitHub's workflow JSON schema through
  ``check-jsonschema --builtin-schema vendor.github-workflows`` when ``$CHECK_JSONSCHEMA`` or
  PATH has it; its structure always) that builds the image for amd64 and arm64, pushes the
  chart to an OCI registry and publishes ``kubescale.yaml`` — and the image it pushes is the one
  the chart and the manifests name, at the version they name.
* ``release/render-manifest.sh`` renders ``kubescale.yaml`` with kubectl 1.37's Kustomize
  (``$KUBECTL_KUSTOMIZE``) and Debian's kubectl applies it; the in-process
  API server (what ``kubescale apiserver`` serves) creates every object of it: one ``kubectl
  apply -f`` installs everything.
* ``constraints.txt`` pins every dependency (offline, by name and range); with
  ``KUBESCALE_PIP_DRY_RUN=1``, ``pip install --dry-run`` of the project with it resolves to
  exactly the pinned versions and nothing unpinned (a minute against the index).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from packaging.requirements import Requirement

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import DEPLOYMENTS
from kubescale.sim.apiserver.server import ApiServer

from .conftest import (
    KUBECTL_KUSTOMIZE,
    KUBECTL_TIMEOUT,
    kubectl_for,
    kustomize_major,
    needs_kubectl,
    needs_kustomize,
)
from .manifest_files import MANIFESTS, find, render

ROOT: Final = MANIFESTS.parent
WORKFLOW: Final = ROOT / ".github" / "workflows" / "release.yml"
RENDER: Final = ROOT / "release" / "render-manifest.sh"
CONSTRAINTS: Final = ROOT / "constraints.txt"
CHART: Final = ROOT / "charts" / "kubescale"
CHECK_JSONSCHEMA: Final = os.environ.get("CHECK_JSONSCHEMA") or shutil.which("check-jsonschema")


def _workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _steps(job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _workflow()["jobs"][job]["steps"]
    return steps


def _chart_version() -> str:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["version"] == chart["appVersion"]
    return str(chart["version"])


@pytest.mark.skipif(CHECK_JSONSCHEMA is None, reason="check-jsonschema is not installed")
def test_the_workflow_meets_githubs_workflow_schema() -> None:
    assert CHECK_JSONSCHEMA is not None
    result = subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_workflow_runs_on_version_tags_and_publishes_image_chart_and_manifest() -> None:
    workflow = _workflow()
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as "on"
    trigger = workflow.get("on", workflow.get(True))
    assert trigger == {"push": {"tags": ["v[0-9]+.[0-9]+.[0-9]+*"]}}
    assert workflow["permissions"] == {"contents": "read"}  # jobs widen it where they write
    jobs = workflow["jobs"]
    assert set(jobs) == {"version", "image", "chart", "manifest"}
    (build,) = [s for s in _steps("image") if s.get("uses", "").startswith("docker/build-push")]
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True
    assert build["with"]["tags"] == "${{ env.IMAGE }}:${{ needs.version.outputs.version }}"
    assert any(s.get("uses", "").startswith("docker/setup-qemu") for s in _steps("image"))
    assert jobs["image"]["permissions"]["packages"] == "write"
    chart_script = "\n".join(s.get("run", "") for s in _steps("chart"))
    assert 'helm push "kubescale-${VERSION}.tgz" "${CHART_REPOSITORY}"' in chart_script
    assert workflow["env"]["CHART_REPOSITORY"].startswith("oci://")
    manifest_script = "\n".join(s.get("run", "") for s in _steps("manifest"))
    assert 'release/render-manifest.sh "${VERSION}" "${IMAGE}" > kubescale.yaml' in manifest_script
    assert "gh release upload" in manifest_script
    for job in ("chart", "manifest"):
        assert "image" in jobs[job]["needs"]  # nothing names an image that was not pushed


def test_the_chart_and_the_manifests_name_the_image_the_workflow_pushes() -> None:
    image = _workflow()["env"]["IMAGE"]
    version = _chart_version()
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert f"{values['image']['repository']}:{values['image']['tag']}" == f"{image}:{version}"
    deployment = find(render(), "Deployment", "kubescale")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"{image}:{version}"


@pytest.mark.parametrize("bump", [False, True])
def test_the_version_job_accepts_the_tag_of_this_version_only(bump: bool, tmp_path: Path) -> None:
    version = _chart_version()
    if bump:  # a tag the chart and the manifests do not name
        major, rest = version.split(".", 1)
        version = f"{int(major) + 1}.{rest}"
    (check,) = [s["run"] for s in _steps("version") if s.get("id") == "version"]
    output = tmp_path / "github_output"
    result = subprocess.run(
        ["bash", "-e", "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=30,
        check=False, env={"PATH": os.environ["PATH"], "GITHUB_REF_NAME": f"v{version}",
                          "GITHUB_OUTPUT": str(output), "IMAGE": _workflow()["env"]["IMAGE"]},
    )  # fmt: skip
    if bump:
        assert result.returncode != 0
        assert not output.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert output.read_text(encoding="utf-8") == f"version={version}\n"


def _render_release(version: str, image: str) -> list[dict[str, Any]]:
    assert KUBECTL_KUSTOMIZE is not None
    if kustomize_major() < 5:
        pytest.skip(f"{KUBECTL_KUSTOMIZE}'s Kustomize is older than v5 ($KUBECTL_KUSTOMIZE)")
    result = subprocess.run(
        ["sh", str(RENDER), version, image], capture_output=True, text=True,
        timeout=KUBECTL_TIMEOUT, check=False, env={**os.environ, "KUBECTL": KUBECTL_KUSTOMIZE},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@needs_kustomize
def test_the_release_manifest_is_the_base_with_the_releases_image() -> None:
    objects = _render_release("9.8.7", "registry.example.com/kubescale")
    base = render()

    def ids(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return sorted((o["kind"], o["metadata"]["name"]) for o in items)

    assert ids(objects) == ids(base)
    deployment = find(objects, "Deployment", "kubescale")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/kubescale:9.8.7"
    assert {o["kind"] for o in objects} >= {"CustomResourceDefinition", "Deployment", "Role"}


@needs_kubectl
def test_a_bad_version_is_refused_by_the_renderer() -> None:
    result = subprocess.run(
        ["sh", str(RENDER), "1.0; rm -rf /"], capture_output=True, text=True, timeout=30,
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "is not a version" in result.stderr


@needs_kubectl
@needs_kustomize
async def test_kubectl_apply_of_the_release_manifest_installs_everything(tmp_path: Path) -> None:
    version = _chart_version()
    objects = _render_release(version, _workflow()["env"]["IMAGE"])
    text = yaml.safe_dump_all(objects)  # (kubectl 1.20 panics on long JSON documents)
    release = tmp_path / "kubescale.yaml"
    release.write_text(text, encoding="utf-8")
    # no CRDs loaded at start: the release manifest brings its own
    async with ApiServer(clock=VirtualClock(), crd_dirs=[]) as server:
        kubectl = kubectl_for(server, tmp_path)
        # (kubectl 1.20 refuses --dry-run=server here: it looks for the dryRun parameter in
        # the OpenAPI document, which the in-process server does not list; so: create)
        assert server.store.list(DEPLOYMENTS, namespace="kube-system") == []
        applied = await kubectl.ok("apply", "-f", str(release))
        assert applied.stdout.count("created") == len(objects), applied.stdout
        got = await kubectl.ok("get", "deployment", "kubescale", "-n", "kube-system", "-o", "json")
        container = json.loads(got.stdout)["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == f"{_workflow()['env']['IMAGE']}:{version}"
        served = await kubectl.ok("get", "crd", "-o", "name")
        assert "verticalpodautoscalers.autoscaling.k8s.io" in served.stdout


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"{line!r} is not pinned with =="
        pins[_key(name)] = version
    return pins


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_constraints_pin_every_dependency_within_its_range() -> None:
    """Offline: each of pyproject's dependencies, and each installed dependency of theirs (by
    name: their versions here may differ), is pinned, within pyproject's range."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = _pins()
    names: set[str] = set()
    pending = [Requirement(r) for r in project["dependencies"]]
    for requirement in pending:
        assert requirement.specifier.contains(pins[_key(requirement.name)]), requirement
    while pending:
        requirement = pending.pop()
        if _key(requirement.name) in names:
            continue
        names.add(_key(requirement.name))
        for text in metadata.requires(requirement.name) or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                pending.append(sub)
    assert names == set(pins)


@pytest.mark.skipif(
    not os.environ.get("KUBESCALE_PIP_DRY_RUN"),
    reason="resolves against the package index (about a minute): set KUBESCALE_PIP_DRY_RUN=1",
)
async def test_the_constraints_pin_exactly_what_installing_kubescale_resolves(
    tmp_path: Path,
) -> None:
    report = tmp_path / "report.json"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
        "--disable-pip-version-check", "--report", str(report), "-c", str(CONSTRAINTS),
        str(ROOT), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await process.communicate()
    if process.returncode != 0 and b"ConnectionError" in err:
        pytest.skip("no package index reachable")
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    resolved = {
        re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text(encoding="utf-8"))["install"]
    }
    assert resolved.pop("kubescale") == _chart_version()
    assert resolved == _pins()
