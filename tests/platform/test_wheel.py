"""The wheel: everything under the ``kubescale`` namespace, CRDs and examples inside, and the
main job running from it.

``pip wheel .`` builds it; its contents are checked, then it is installed (without its
dependencies, which the test environment has) into a directory of its own and
``kubescale simulate examples/vpa-webhook.yaml`` runs from there, in a directory away from the
checkout, so nothing comes from the source tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("kubescale-*.whl")
    return built


def test_the_wheel_holds_only_the_kubescale_namespace_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"kubescale"}
    assert "kubescale/crds/verticalpodautoscalers.yaml" in names
    assert "kubescale/crds/verticalpodautoscalercheckpoints.yaml" in names
    assert "kubescale/sim/scenario/examples/vpa-webhook.yaml" in names
    assert "kubescale/py.typed" in names
    (dist_info,) = {t for t in top if t.endswith(".dist-info")}
    top_level = zipfile.ZipFile(wheel).read(f"{dist_info}/top_level.txt").decode().split()
    assert top_level == ["kubescale"]


def test_simulate_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target)}
    report = tmp_path / "report.json"
    where = subprocess.run(
        [sys.executable, "-c", "import kubescale.sim.apiserver.server as s; print(s.__file__);"
         "print(s.DEFAULT_CRD_DIR)"],
        cwd=tmp_path, env=env, check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(line).is_relative_to(target) for line in where), where
    result = subprocess.run(
        [sys.executable, "-m", "kubescale", "simulate", str(REPO / "examples" / "vpa-webhook.yaml"),
         "--quiet", "--report-json", str(report), "--duration", "4m"],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,  # a guard against a hung child only
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "shop/web" in result.stdout
    workloads = {w["name"] for w in json.loads(report.read_text())["workloads"]}
    assert workloads == {"web", "batch"}
