"""kubescale's own TLS server as a mutating webhook, called by the API server's admission chain.

The pieces are the production ones: ``kubescale certs`` makes the CA and serving certificate,
``kubescale.cli.serve.serve`` serves them (with a test ``/mutate`` route mounted the way the VPA
webhook will mount its own), the API server reaches the Service through its resolver and
verifies the certificate against the configuration's ``caBundle``, and the client is the
access layer's ``KubeClient``. With the wrong ``caBundle`` the TLS handshake fails and
``failurePolicy`` decides, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser, main
from kubescale.cli.serve import Server, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import MUTATING_WEBHOOK_CONFIGURATIONS, PODS
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

WEB_POD = functools.partial(
    builders.pods.pod, labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
)

SERVICE, NAMESPACE = "kubescale", "kube-system"
LABEL_PATCH = [{"op": "add", "path": "/metadata/labels/mutated-by", "value": "kubescale"}]


def _mutate_route(app: web.Application) -> None:
    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        response = {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(LABEL_PATCH).encode()).decode(),
        }
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    app.router.add_post("/mutate", mutate)


@pytest.fixture(scope="module")
def cert_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The webhook's certificates, and a second CA that did not sign them."""
    good = tmp_path_factory.mktemp("webhook-certs")
    other = tmp_path_factory.mktemp("other-ca")
    for out in (good, other):
        argv = ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out", str(out)]
        assert main([*argv, "--key-type", "ecdsa"]) == 0
    return good, other


@dataclass
class Setup:
    api: ApiServer
    client: KubeClient
    webhook: Server


@pytest.fixture
async def setup(cert_dirs: tuple[Path, Path], tmp_path: Path) -> AsyncIterator[Setup]:
    good, _ = cert_dirs
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(good / "serverCert.pem"),
        "--tls-private-key", str(good / "serverKey.pem"),
        "--client-ca-file", str(good / "caCert.pem"),
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), mounts=[_mutate_route], started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    webhook = await asyncio.wait_for(started, timeout=10)
    try:
        async with ApiServer() as api:
            api.register_service(
                namespace=NAMESPACE, name=SERVICE, port=443,
                address=("127.0.0.1", webhook.https_port),
            )  # fmt: skip
            api.write_kubeconfig(tmp_path / "kubeconfig")
            client = await connect(kubeconfig=tmp_path / "kubeconfig")
            try:
                yield Setup(api=api, client=client, webhook=webhook)
            finally:
                await client.close()
    finally:
        webhook.stop_event.set()
        assert await asyncio.wait_for(task, timeout=10) == 0


def _configuration(ca_file: Path, *, failure_policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kubescale-test"},
        "webhooks": [{
            "name": "mutate.kubescale.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": failure_policy,
            "timeoutSeconds": 5,
            "clientConfig": {
                "service": {"namespace": NAMESPACE, "name": SERVICE, "path": "/mutate"},
                "caBundle": base64.b64encode(ca_file.read_bytes()).decode(),
            },
            "rules": [{
                "operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                "resources": ["pods"],
            }],
        }],
    }  # fmt: skip


async def test_kubescale_tls_server_mutates_pods_through_admission(
    setup: Setup, cert_dirs: tuple[Path, Path]
) -> None:
    good, _ = cert_dirs
    await setup.client.create(
        MUTATING_WEBHOOK_CONFIGURATIONS, _configuration(good / "caCert.pem", failure_policy="Fail")
    )
    created = await setup.client.create(PODS, WEB_POD(name="web-1"), namespace="default")
    assert created["metadata"]["labels"] == {"app": "web", "mutated-by": "kubescale"}
    stored = setup.api.store.get(PODS, "web-1", "default")
    assert stored["metadata"]["labels"]["mutated-by"] == "kubescale"


async def test_wrong_ca_bundle_and_fail_policy_rejects_the_pod(
    setup: Setup, cert_dirs: tuple[Path, Path]
) -> None:
    _, other = cert_dirs
    await setup.client.create(
        MUTATING_WEBHOOK_CONFIGURATIONS, _configuration(other / "caCert.pem", failure_policy="Fail")
    )
    with pytest.raises(KubeApiError) as raised:
        await setup.client.create(PODS, WEB_POD(name="web-2"), namespace="default")
    assert raised.value.code == 500
    assert 'failed calling webhook "mutate.kubescale.dev"' in raised.value.message
    assert "x509" in raised.value.message or "certificate" in raised.value.message
    assert setup.api.store.peek(PODS, "web-2", "default") is None
    assert setup.webhook.tls is not None
    assert setup.webhook.tls.loaded  # the server itself was fine: the client refused to trust it


async def test_wrong_ca_bundle_and_ignore_policy_creates_the_pod_unmutated(
    setup: Setup, cert_dirs: tuple[Path, Path]
) -> None:
    _, other = cert_dirs
    await setup.client.create(
        MUTATING_WEBHOOK_CONFIGURATIONS,
        _configuration(other / "caCert.pem", failure_policy="Ignore"),
    )
    created = await setup.client.create(PODS, WEB_POD(name="web-3"), namespace="default")
    assert created["metadata"]["labels"] == {"app": "web"}
