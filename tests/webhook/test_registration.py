"""Self-registration: flags → the exact MutatingWebhookConfiguration, create-or-replace against
the in-process API server, and the caBundle re-published after the CA file rotates.

The expected configuration is upstream's ``selfRegistration`` (``config.go``; its
``config_test.go`` checks the same fields): name ``vpa-webhook-config``, one webhook
``vpa.k8s.io`` with ``admissionReviewVersions [v1]``, the pod CREATE rule and the VPA
CREATE/UPDATE rule on ``autoscaling.k8s.io/*``, ``sideEffects: None``, ``failurePolicy``
Ignore/Fail, ``timeoutSeconds``, the caBundle bytes, a Service without path or a URL
``<address>:<port>``, and the namespaceSelector on ``kubernetes.io/metadata.name``.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.certs.authority import generate_ca
from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import ConfigError, serve_config_from_args
from kubescale.controllers.vpa.api.vpa_flags import parse_feature_gates
from kubescale.kube.client import KubeClient
from kubescale.kube.resources import MUTATING_WEBHOOK_CONFIGURATIONS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.registration import (
    WEBHOOK_CONFIG_NAME,
    CaBundleError,
    WebhookRegistration,
    read_ca_bundle,
    register_webhook,
    webhook_configuration,
)
from kubescale.webhook.webhook_config import WebhookSettings, webhook_settings_from_args

from .api_fixtures import api, clock, kube

__all__ = ["api", "clock", "kube"]  # fixtures, re-exported for pytest

CA = b"-----BEGIN CERTIFICATE-----\nnot checked by the builder\n-----END CERTIFICATE-----\n"
CA_B64 = base64.b64encode(CA).decode()
POD_RULE = {
    "operations": ["CREATE"],
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "resources": ["pods"],
}
VPA_RULE = {
    "operations": ["CREATE", "UPDATE"],
    "apiGroups": ["autoscaling.k8s.io"],
    "apiVersions": ["*"],
    "resources": ["verticalpodautoscalers"],
}


def _settings(*flags: str, namespace_env: str = "") -> WebhookSettings:
    args = build_parser().parse_args(["serve", *flags])
    return webhook_settings_from_args(args, environ={"NAMESPACE": namespace_env})


def _expected(
    *,
    client_config: dict[str, Any],
    failure_policy: str = "Ignore",
    timeout: int = 30,
    namespace_selector: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "vpa-webhook-config"}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [
            {
                "name": "vpa.k8s.io",
                "admissionReviewVersions": ["v1"],
                "rules": [POD_RULE, VPA_RULE],
                "failurePolicy": failure_policy,
                "clientConfig": {"caBundle": CA_B64, **client_config},
                "sideEffects": "None",
                "timeoutSeconds": timeout,
                "namespaceSelector": namespace_selector or {},
            }
        ],
    }


def _not_in(*namespaces: str) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": list(namespaces),
            }
        ]
    }


SERVICE = {"service": {"namespace": "kube-system", "name": "vpa-webhook"}}
REGISTRATION_CASES: list[tuple[str, list[str], str, dict[str, Any]]] = [
    ("defaults", [], "", _expected(client_config=SERVICE)),
    (
        "namespace from $NAMESPACE",
        [],
        "vpa",
        _expected(client_config={"service": {"namespace": "vpa", "name": "vpa-webhook"}}),
    ),
    (
        "service flags",
        ["--webhook-service", "kubescale", "--webhook-service-namespace", "ops"],
        "vpa",
        _expected(client_config={"service": {"namespace": "ops", "name": "kubescale"}}),
    ),
    (
        "by URL: <address>:<port>, no path",
        [
            "--register-by-url",
            "--webhook-address",
            "https://vpa.example.com",
            "--webhook-port",
            "8000",
        ],
        "",
        _expected(client_config={"url": "https://vpa.example.com:8000"}),
    ),
    (
        "failure policy Fail and a timeout",
        ["--webhook-failure-policy-fail", "--webhook-timeout-seconds", "10"],
        "",
        _expected(client_config=SERVICE, failure_policy="Fail", timeout=10),
    ),
    (
        "labels, trimmed as upstream",
        ["--webhook-labels", '"team: autoscaling , tier:platform"'],
        "",
        _expected(client_config=SERVICE, labels={"team": "autoscaling", "tier": "platform"}),
    ),
    (
        "ignored namespaces → NotIn",
        ["--ignored-vpa-object-namespaces", "kube-system, monitoring"],
        "",
        _expected(client_config=SERVICE, namespace_selector=_not_in("kube-system", "monitoring")),
    ),
    (
        "one VPA namespace → In",
        ["--vpa-object-namespace", "team-a"],
        "",
        _expected(
            client_config=SERVICE,
            namespace_selector={
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}
                ]
            },
        ),
    ),
]


@pytest.mark.parametrize(
    ("flags", "namespace_env", "expected"),
    [case[1:] for case in REGISTRATION_CASES],
    ids=[case[0] for case in REGISTRATION_CASES],
)
def test_flags_give_upstreams_configuration(
    flags: list[str], namespace_env: str, expected: dict[str, Any]
) -> None:
    settings = _settings(*flags, namespace_env=namespace_env)
    assert webhook_configuration(settings, ca_bundle=CA) == expected


BAD_FLAGS: list[tuple[list[str], str]] = [
    (["--webhook-timeout-seconds", "0"], "--webhook-timeout-seconds: 0 is out of range 1-30"),
    (["--webhook-timeout-seconds", "31"], "--webhook-timeout-seconds: 31 is out of range 1-30"),
    (["--webhook-labels", "team"], "--webhook-labels: 'team' is invalid"),
    (["--webhook-labels", ":x"], "--webhook-labels: ':x' is invalid"),
    (
        ["--vpa-object-namespace", "a", "--ignored-vpa-object-namespaces", "b"],
        "--vpa-object-namespace and --ignored-vpa-object-namespaces are mutually exclusive",
    ),
    (["--register-by-url"], "--register-by-url needs --webhook-address"),
    (["--feature-gates", "InPlaceOrRecreate=true"], "unrecognized feature gate: InPlaceOrRecreate"),
    (["--feature-gates", "InPlace"], "missing bool value for InPlace"),
    (["--feature-gates", "InPlace=maybe"], "invalid value of InPlace=maybe"),
]


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS)
def test_bad_webhook_flags_are_refused_with_the_flag_named(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        serve_config_from_args(build_parser().parse_args(["serve", *flags]))
    assert message in str(raised.value)


def test_feature_gates_default_off_and_parse_go_booleans() -> None:
    assert parse_feature_gates("") == {
        "CPUStartupBoost": False,
        "InPlace": False,
        "PerVPAConfig": False,
    }
    assert parse_feature_gates("InPlace=true, PerVPAConfig=1,CPUStartupBoost=F") == {
        "CPUStartupBoost": False,
        "InPlace": True,
        "PerVPAConfig": True,
    }


def test_the_ca_file_must_hold_pem_certificates(tmp_path: Path) -> None:
    (tmp_path / "empty.pem").write_bytes(b"")
    (tmp_path / "junk.pem").write_bytes(b"not a certificate")
    for name in ("empty.pem", "junk.pem", "missing.pem"):
        with pytest.raises(CaBundleError, match=name):
            read_ca_bundle(tmp_path / name)


# -- against the API server --------------------------------------------------------------------


def _ca_pem(name: str) -> bytes:
    now = datetime.now(UTC)
    return generate_ca(common_name=name, now=now, days=30, key_type="ecdsa").cert_pem


async def test_registration_creates_then_replaces_in_place(kube: KubeClient) -> None:
    first = await register_webhook(kube, WebhookSettings(), ca_bundle=CA)
    relabelled = WebhookSettings(labels={"team": "autoscaling"}, failure_policy_fail=True)
    second = await register_webhook(kube, relabelled, ca_bundle=CA)
    assert second["metadata"]["uid"] == first["metadata"]["uid"]  # replaced, never deleted
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["labels"] == {"team": "autoscaling"}
    assert second["webhooks"][0]["failurePolicy"] == "Fail"


async def test_registration_retries_then_ca_rotation_re_patches_the_ca_bundle(
    kube: KubeClient, api: ApiServer, clock: VirtualClock, tmp_path: Path
) -> None:
    ca_file = tmp_path / "caCert.pem"
    old_ca, new_ca = _ca_pem("old-ca"), _ca_pem("new-ca")
    registration = WebhookRegistration(
        client=kube, settings=WebhookSettings(), ca_file=ca_file, reload=True
    )
    now = clock.now()

    def published() -> str:
        stored = api.store.get(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIG_NAME)
        return str(stored["webhooks"][0]["clientConfig"]["caBundle"])

    await registration.run_once(now)  # no CA file yet: not registered, retried next time
    assert registration.failures == 1
    assert not registration.registered.is_set()
    api.faults.add(verb="create", resource="mutatingwebhookconfigurations", status=403, count=1)
    ca_file.write_bytes(old_ca)
    await registration.run_once(now)  # the API server refuses: retried next time
    assert registration.failures == 2
    await registration.run_once(now)
    assert registration.registered.is_set()
    assert published() == base64.b64encode(old_ca).decode()
    await registration.run_once(now)  # unchanged file: nothing written
    assert registration.refreshes == 0
    ca_file.write_bytes(b"half-written garbage")  # a rotation caught mid-write
    await registration.run_once(now)
    assert registration.failures == 3
    assert published() == base64.b64encode(old_ca).decode()
    ca_file.write_bytes(new_ca)
    await registration.run_once(now)
    assert registration.refreshes == 1
    assert published() == base64.b64encode(new_ca).decode()
    # the configuration deleted behind our back is registered again on the next rotation
    api.store.delete(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIG_NAME, None)
    ca_file.write_bytes(old_ca)
    await registration.run_once(now)
    assert registration.refreshes == 2
    assert published() == base64.b64encode(old_ca).decode()
