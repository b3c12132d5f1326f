"""The Deployment, Service, ServiceAccount and PodDisruptionBudget fit together and fit kubescale.

Checked on the rendered objects (what ``kubectl apply -k manifests/`` creates): the container's
arguments, after Kubernetes expands ``$(VAR)`` from the container's environment, parse with
``kubescale serve``'s own parser, and the ports, probe paths, certificate paths, Lease namespace
and shutdown timing they configure are the ones the other objects point at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

import kubescale
from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import ServeConfig, serve_config_from_args
from kubescale.objects.selectors import label_selector_from_dict, label_selector_from_set
from kubescale.runtime.health import HealthChecks, make_health_app

from .manifest_files import find, install_namespace, render

UPSTREAM_WEBHOOK_SERVICE = "vpa-webhook"  # reference §1.1: --webhook-service default
UPSTREAM_SECRET_FILES = ("caCert.pem", "serverCert.pem", "serverKey.pem")
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of command and args: ``$$`` escapes, unknown refs stay."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(replace, text)


def _objects() -> list[dict[str, Any]]:
    return render()


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = find(_objects(), "Deployment", "kubescale")["spec"]["template"]["spec"]
    return spec


def _container() -> dict[str, Any]:
    (container,) = _pod_spec()["containers"]
    assert isinstance(container, dict)
    return container


def _env(container: dict[str, Any], namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet resolves it (fieldRef metadata.namespace)."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = expand(entry["value"], env)
        elif entry["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[entry["name"]] = namespace
        else:
            raise AssertionError(f"unexpected env source {entry}")
    return env


def _argv(namespace: str | None = None) -> list[str]:
    container = _container()
    env = _env(container, namespace or install_namespace())
    command = [expand(part, env) for part in container["command"]]
    args = [expand(part, env) for part in container["args"]]
    assert command == ["kubescale"]
    return command[1:] + args


def _serve_config(namespace: str | None = None) -> tuple[Any, ServeConfig]:
    args = build_parser().parse_args(_argv(namespace))
    return args, serve_config_from_args(args)


def _container_port(reference: int | str) -> int:
    """A port number or a named container port, resolved as the kubelet/endpoints do."""
    if isinstance(reference, int):
        assert reference in [p["containerPort"] for p in _container()["ports"]], reference
        return reference
    (port,) = [p for p in _container()["ports"] if p.get("name") == reference]
    number: int = port["containerPort"]
    return number


def test_the_container_runs_kubescale_serve_with_flags_its_parser_accepts() -> None:
    args, config = _serve_config()
    assert args.command == "serve"
    assert args.handler.__module__ == "kubescale.cli.serve"
    assert config.leader_elect  # two replicas: only the Lease holder runs the loops
    assert find(_objects(), "Deployment", "kubescale")["spec"]["replicas"] == 2


def test_the_image_is_this_version_of_kubescale() -> None:
    # the image the release workflow publishes for this version (.github/workflows/release.yml)
    assert _container()["image"] == f"ghcr.io/kubescale/kubescale:{kubescale.__version__}"


def test_the_service_reaches_the_https_port_kubescale_listens_on() -> None:
    _, config = _serve_config()
    service = find(_objects(), "Service")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443  # kube-apiserver's default port for a webhook Service
    assert _container_port(port["targetPort"]) == config.port == 8000


def test_the_service_is_the_one_self_registration_points_at() -> None:
    args, _ = _serve_config()
    service = find(_objects(), "Service")
    expected = getattr(args, "webhook_service", UPSTREAM_WEBHOOK_SERVICE)
    assert service["metadata"]["name"] == expected == UPSTREAM_WEBHOOK_SERVICE
    # The Service's and the status Lease's namespace come from NAMESPACE (upstream), i.e. the
    # pod's own namespace: no flag may override them with another one.
    for flag in ("webhook_service_namespace", "status_lease_namespace"):
        assert getattr(args, flag, "") == "", flag
    assert _env(_container(), install_namespace())["NAMESPACE"] == install_namespace()
    assert service["metadata"]["namespace"] == install_namespace()


def test_selectors_pick_the_kubescale_pods() -> None:
    objects = _objects()
    deployment = find(objects, "Deployment", "kubescale")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert label_selector_from_dict(deployment["spec"]["selector"]).matches(labels)
    assert label_selector_from_set(find(objects, "Service")["spec"]["selector"]).matches(labels)
    budget = find(objects, "PodDisruptionBudget")
    assert label_selector_from_dict(budget["spec"]["selector"]).matches(labels)
    assert budget["spec"]["maxUnavailable"] == 1
    anti_affinity = _pod_spec()["affinity"]["podAntiAffinity"]
    (preferred,) = anti_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    term = preferred["podAffinityTerm"]
    assert label_selector_from_dict(term["labelSelector"]).matches(labels)


def test_the_service_account_exists_in_the_pods_namespace() -> None:
    objects = _objects()
    deployment = find(objects, "Deployment", "kubescale")
    account = find(objects, "ServiceAccount", _pod_spec()["serviceAccountName"])
    assert account["metadata"]["namespace"] == deployment["metadata"]["namespace"]


async def test_the_probes_hit_kubescales_health_endpoints() -> None:
    _, config = _serve_config()
    container = _container()
    probes = {
        "liveness": container["livenessProbe"]["httpGet"],
        "readiness": container["readinessProbe"]["httpGet"],
    }
    assert {name: probe["path"] for name, probe in probes.items()} == {
        "liveness": "/healthz",
        "readiness": "/readyz",
    }
    for probe in probes.values():
        assert _container_port(probe["port"]) == config.metrics_port == 8944
        assert probe.get("scheme", "HTTP") == "HTTP"  # --address is plain HTTP
    app = make_health_app(checks=HealthChecks(), registry=CollectorRegistry())
    async with TestClient(TestServer(app)) as http:
        for probe in probes.values():
            response = await http.get(probe["path"])
            assert response.status == 200, probe


def test_the_certificate_files_are_written_from_the_self_managed_secret() -> None:
    _, config = _serve_config()
    (mount,) = [m for m in _container()["volumeMounts"] if m["name"] == "tls-certs"]
    assert not mount.get("readOnly", False)  # kubescale writes the Secret's files there
    (volume,) = [v for v in _pod_spec()["volumes"] if v["name"] == mount["name"]]
    assert volume == {"name": "tls-certs", "emptyDir": {}}
    assert config.tls_secret_name == "vpa-tls-certs"  # upstream's Secret name
    files = (config.client_ca_file, config.tls_cert_file, config.tls_private_key)
    assert tuple(str(f.parent) for f in files) == (mount["mountPath"],) * 3
    assert tuple(f.name for f in files) == UPSTREAM_SECRET_FILES


@pytest.mark.parametrize("namespace", [None, "team-a"], ids=["default", "overlay"])
def test_the_leader_lease_lives_where_the_role_grants_leases(namespace: str | None) -> None:
    # Installed anywhere, the Lease follows the pod's namespace, and so does the Role.
    _, config = _serve_config(namespace)
    role = find(render(namespace=namespace), "Role", "kubescale-leases")
    expected = namespace or install_namespace()
    assert config.leader_elect_resource_namespace == expected
    assert role["metadata"]["namespace"] == expected


def test_termination_grace_outlasts_the_graceful_shutdown() -> None:
    _, config = _serve_config()
    assert _pod_spec()["terminationGracePeriodSeconds"] > config.graceful_shutdown_timeout


def test_the_container_runs_locked_down() -> None:
    context = _container()["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]
    assert _pod_spec()["securityContext"]["runAsNonRoot"] is True


def test_expansion_follows_kubernetes_rules() -> None:
    env = {"NAMESPACE": "team-a"}
    assert expand("--ns=$(NAMESPACE)", env) == "--ns=team-a"
    assert expand("$$(NAMESPACE)", env) == "$(NAMESPACE)"
    assert expand("$(UNSET)", env) == "$(UNSET)"
