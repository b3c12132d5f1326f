"""The Helm chart (charts/kubescale) renders the same objects as the kustomize manifests.

Rendered by Helm's own template engine: the ``helm_python`` bindings (package
``helm-python-sdk``, which tests/run.sh installs into .venv when the index has it: Helm's Go
library, no binary, offline) or else ``helm template`` from ``$HELM``/PATH; without either the
comparisons skip. The kustomize side is :func:`.manifest_files.render` (the base, itself
compared with ``kubectl kustomize``) and, for the overlays' modes, Debian's kubectl.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from cryptography import x509

from .conftest import KUBECTL, kubectl_kustomize
from .manifest_files import CRD_DIR, MANIFESTS, install_namespace, load_documents, render

CHART: Final = MANIFESTS.parent / "charts" / "kubescale"
HELM: Final = os.environ.get("HELM") or shutil.which("helm")


def _helm_python() -> Any:
    try:  # optional: without it (and without helm) the comparisons skip
        return importlib.import_module("helm_python.chart")
    except ImportError:
        return None


def helm_template(values: dict[str, Any], *, namespace: str) -> list[dict[str, Any]]:
    """The chart's objects for ``values``, as ``helm template kubescale charts/kubescale``."""
    bindings = _helm_python()
    if bindings is not None:
        with bindings.Chart.load(str(CHART)) as chart:
            rendered = chart.render(values=values, name="kubescale", namespace=namespace)
        texts = [rendered[key] for key in sorted(rendered)]
    elif HELM is not None:
        out = subprocess.run(
            [HELM, "template", "kubescale", str(CHART), "--namespace", namespace,
             "--values", "-"],
            input=json.dumps(values), capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        texts = [out]
    else:
        pytest.skip("no Helm renderer: install helm-python-sdk (tests/run.sh does) or helm")
    return [doc for text in texts for doc in yaml.safe_load_all(text) if doc]


def _by_identity(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def test_the_chart_ships_the_crds_unchanged() -> None:
    ours = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert ours == sorted(p.name for p in CRD_DIR.glob("*.yaml"))
    for name in ours:
        assert load_documents(CHART / "crds" / name) == load_documents(CRD_DIR / name)


def test_default_values_render_the_base() -> None:
    namespace = install_namespace()
    chart = _by_identity(helm_template({}, namespace=namespace))
    base = _by_identity([o for o in render() if o["kind"] != "CustomResourceDefinition"])
    assert sorted(chart) == sorted(base)
    for key, obj in base.items():
        assert chart[key] == obj, key


def test_the_release_namespace_goes_where_kustomize_puts_it() -> None:
    chart = _by_identity(helm_template({}, namespace="team-a"))
    base = _by_identity(
        [o for o in render(namespace="team-a") if o["kind"] != "CustomResourceDefinition"]
    )
    assert chart == base


def test_every_flag_group_reaches_the_arguments() -> None:
    flags = {
        "server": {"max-connections": "256"},
        "logging": {"log-level": "debug"},
        "leaderElection": {"leader-elect-lease-duration": "20s"},
        "webhook": {"webhook-timeout-seconds": "10"},
        "recommender": {"recommender-interval": "2m"},
        "updater": {"updater-interval": "2m"},
        "hpa": {"horizontal-pod-autoscaler-sync-period": "30s"},
        "clusterAutoscaler": {"expander": "priority"},
        "descheduler": {"descheduling-interval": "10m"},
        "extender": {"extender": "true"},
    }
    chart = _by_identity(helm_template({"flags": flags}, namespace="kube-system"))
    args = chart[("Deployment", "kubescale")]["spec"]["template"]["spec"]["containers"][0]["args"]
    expected = [f"--{name}={value}" for group in flags.values() for name, value in group.items()]
    base = render()
    (deployment,) = [o for o in base if o["kind"] == "Deployment"]
    assert args == deployment["spec"]["template"]["spec"]["containers"][0]["args"] + expected


async def _overlay(name: str, tmp_path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    return _by_identity(await kubectl_kustomize(MANIFESTS / "overlays" / name, home=tmp_path))


async def test_cert_manager_mode_renders_the_cert_manager_overlay(tmp_path: Path) -> None:
    chart = _by_identity(
        helm_template({"certificates": {"mode": "cert-manager"}}, namespace="kube-system")
    )
    overlay = await _overlay("cert-manager", tmp_path)
    overlay = {k: v for k, v in overlay.items() if k[0] != "CustomResourceDefinition"}
    assert sorted(chart) == sorted(overlay)
    for key, obj in overlay.items():
        assert chart[key] == obj, key


async def test_service_monitor_renders_the_service_monitor_overlay(tmp_path: Path) -> None:
    chart = _by_identity(
        helm_template({"serviceMonitor": {"enabled": True}}, namespace="kube-system")
    )
    overlay = await _overlay("service-monitor", tmp_path)
    overlay = {k: v for k, v in overlay.items() if k[0] != "CustomResourceDefinition"}
    assert sorted(chart) == sorted(overlay)
    for key, obj in overlay.items():
        assert chart[key] == obj, key


def test_helm_generated_certificates_serve_the_webhook_service() -> None:
    objects = helm_template({"certificates": {"mode": "helm"}}, namespace="team-a")
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    serving = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["serverCert.pem"]))
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "vpa-webhook.team-a.svc" in names.get_values_for_type(x509.DNSName)
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["caCert.pem"]))
    assert serving.issuer == ca.subject
