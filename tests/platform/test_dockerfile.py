"""The image build file: two stages, the wheel and its dependencies only, a non-root user that
matches the Deployment's. (No image is built in the tests: there is no container runtime.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import yaml

ROOT: Final = Path(__file__).resolve().parents[2]
DOCKERFILE: Final = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (word.upper(), rest.strip())
        for line in lines
        if line and not line.startswith("#")
        for word, _, rest in [line.partition(" ")]
    ]


def test_two_stages_on_a_slim_python_base() -> None:
    instructions = _instructions()
    stages = [rest for word, rest in instructions if word == "FROM"]
    assert stages == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    (base,) = [rest for word, rest in instructions if word == "ARG"]
    # pinned by digest: a tag moves, the digest names one image (issue 32.2)
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.1[1-9]-slim-\w+@sha256:[0-9a-f]{64}", base)


def test_the_build_stage_copies_only_what_the_wheel_is_made_of() -> None:
    copied = [rest.split()[0] for word, rest in _instructions() if word == "COPY"]
    assert copied == ["pyproject.toml", "kubescale/", "manifests/crds/"]
    (first,) = [rest for word, rest in _instructions() if word == "COPY" and "pyproject" in rest]
    assert first == "pyproject.toml README.md constraints.txt ./"
    for source in ("pyproject.toml", "README.md", "constraints.txt", "kubescale", "manifests/crds"):
        assert (ROOT / source).exists()
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "*" in ignored  # nothing goes into the build context but the exceptions
    assert {"!pyproject.toml", "!README.md", "!constraints.txt", "!kubescale/",
            "!manifests/crds/"} <= set(ignored)  # fmt: skip


def test_every_dependency_is_built_from_the_constraints() -> None:
    build = next(rest for word, rest in _instructions() if word == "RUN")
    assert "pip wheel" in build
    assert "--constraint constraints.txt" in build


def test_the_final_stage_installs_wheels_only_and_runs_as_the_deployments_user() -> None:
    instructions = _instructions()
    final = instructions[[w for w, _ in instructions].index("FROM", 2) :]
    (run,) = [rest for word, rest in final if word == "RUN"]
    assert "--no-index --find-links=/wheels kubescale" in run
    assert "--no-cache-dir" in run
    (user,) = [rest for word, rest in final if word == "USER"]
    deployment = yaml.safe_load((ROOT / "manifests/base/deployment.yaml").read_text())
    context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert user == f"{context['runAsUser']}:{context['runAsGroup']}"
    assert ("ENTRYPOINT", '["kubescale"]') in final
