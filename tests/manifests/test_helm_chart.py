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

from .conftest import kubectl_kustomize
from .manifest_files import CRD_DIR, MANIFESTS, install_namespace, load_documents, render

CHART: Final = MANIFESTS.parent / "charts" / "kubescale"
HELM: Final = os.environ.get("HELM") or shutil.which("helm")


def _helm_python() -> Any:
    try:  # optional: without it (and without helm) the comparisons skip
        return importlib.import_module("helm_python.chart")
    except ImportError:
        return None


def _render_files(values: dict[str, Any], *, namespace: str) -> dict[str, str] | None:
    """Every rendered template by path (NOTES.txt included), or ``None`` without the bindings."""
    bindings = _helm_python()
    if bindings is None:
        return None
    with bindings.Chart.load(str(CHART)) as chart:
        rendered: dict[str, str] = chart.render(
            values=values, name="kubescale", namespace=namespace
        )
    return rendered


def helm_template(values: dict[str, Any], *, namespace: str) -> list[dict[str, Any]]:
    """The chart's objects for ``values``, as ``helm template kubescale charts/kubescale``."""
    rendered = _render_files(values, namespace=namespace)
    if rendered is not None:
        texts = [rendered[key] for key in sorted(rendered) if not key.endswith("NOTES.txt")]
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


def _made_by_the_chart_or_kubescale(
    objects: list[dict[str, Any]],
) -> tuple[set[tuple[str, str]], list[str]]:
    """What the rendered objects make — ``(kind, name)`` of every Secret and ConfigMap the chart
    renders or a cert-manager Certificate writes — and the Deployment's arguments."""
    made = {
        (o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in ("Secret", "ConfigMap")
    }
    made |= {("Secret", o["spec"]["secretName"]) for o in objects if o["kind"] == "Certificate"}
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    return made, deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def _mounted(pod: dict[str, Any]) -> set[tuple[str, str]]:
    """``(kind, name)`` of every Secret and ConfigMap a pod's volumes need."""
    needed: set[tuple[str, str]] = set()
    for volume in pod["volumes"]:
        sources = [volume, *(volume.get("projected") or {}).get("sources", [])]
        for source in sources:
            if "secret" in source:
                needed.add(
                    ("Secret", source["secret"].get("secretName") or source["secret"]["name"])
                )
            if "configMap" in source:
                needed.add(("ConfigMap", source["configMap"]["name"]))
    return needed


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"deschedulerPolicy": "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"},
        {"certificates": {"mode": "helm"}},
        {"certificates": {"mode": "cert-manager"}},
    ],
    ids=["defaults", "descheduler-policy", "helm", "cert-manager"],
)
def test_nothing_is_mounted_that_nothing_creates(values: dict[str, Any]) -> None:
    objects = helm_template(values, namespace="team-a")
    made, args = _made_by_the_chart_or_kubescale(objects)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    missing = _mounted(deployment["spec"]["template"]["spec"]) - made
    assert missing == set()
    # A Secret kubescale makes itself (self-managed certificates) is not mounted but written to
    # an emptyDir, and the Role lets kubescale create it and read and replace it by name.
    secret_flags = [a.split("=", 1)[1] for a in args if a.startswith("--tls-secret-name=")]
    if not values:
        assert secret_flags == ["vpa-tls-certs"]
    for name in secret_flags:
        (role,) = [o for o in objects if o["kind"] == "Role"]
        assert role["metadata"]["namespace"] == "team-a"
        rules = [r for r in role["rules"] if "secrets" in r["resources"]]
        assert {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]} in rules
        assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name],
                "verbs": ["get", "update"]} in rules  # fmt: skip


def test_an_unknown_certificates_mode_is_refused() -> None:
    with pytest.raises(Exception, match=r"certificates/mode|certificates\.mode") as caught:
        helm_template({"certificates": {"mode": "cert_manager"}}, namespace="kube-system")
    assert "self-managed" in str(caught.value)


def test_the_notes_say_what_was_installed_and_how_to_check_it() -> None:
    rendered = _render_files({}, namespace="team-a")
    if rendered is None:
        pytest.skip("the NOTES need helm-python-sdk")
    (notes,) = [text for path, text in rendered.items() if path.endswith("NOTES.txt")]
    assert "namespace team-a" in notes
    assert "Secret vpa-tls-certs" in notes  # the self-managed certificates' Secret
    assert "kubectl -n team-a rollout status deployment/kubescale" in notes
    assert "{{" not in notes
