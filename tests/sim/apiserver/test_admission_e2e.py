"""Admission end to end: webhook configurations and pods written through ``kubernetes.aio``.

The API server reads the MutatingWebhookConfiguration a client created, calls the webhook (a
real TLS server reached through :meth:`ApiServer.register_service`) on the pod create, and
answers the client with the mutated pod, or with kube-apiserver's error when the call fails
and ``failurePolicy`` is Fail.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes.aio import client, config

from kubescale.certs.authority import (
    KeyPair,
    generate_ca,
    issue_serving_certificate,
    service_dns_names,
)
from kubescale.kube.resources import PODS
from kubescale.sim.apiserver.server import ApiServer
from tests.sim.apiserver.test_admission import (
    NOW,
    SERVICE,
    SERVICE_NAMESPACE,
    WEB_POD,
    WebhookServer,
    answer,
    configuration,
    json_patch,
    standard_behaviours,
    webhook,
)


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return generate_ca(common_name="e2e-webhook-ca", now=NOW, days=2, key_type="ecdsa")


@pytest.fixture(scope="module")
def other_ca() -> KeyPair:
    return generate_ca(common_name="not-the-webhooks-ca", now=NOW, days=2, key_type="ecdsa")


@pytest.fixture(scope="module")
def server_tls(ca: KeyPair, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    serving = issue_serving_certificate(
        ca=ca,
        names=service_dns_names(SERVICE, SERVICE_NAMESPACE),
        now=NOW,
        days=1,
        key_type="ecdsa",
    )
    directory = tmp_path_factory.mktemp("e2e-webhook-tls")
    (directory / "cert.pem").write_bytes(serving.cert_pem)
    (directory / "key.pem").write_bytes(serving.key_pem)
    return directory / "cert.pem", directory / "key.pem"


@dataclass
class Cluster:
    server: ApiServer
    webhook: WebhookServer
    api: client.ApiClient

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def admission(self) -> client.AdmissionregistrationV1Api:
        return client.AdmissionregistrationV1Api(self.api)


@pytest.fixture
async def cluster(server_tls: tuple[Path, Path]) -> AsyncIterator[Cluster]:
    hook_server = WebhookServer()
    hook_server.behaviours.update(standard_behaviours(hook_server))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*server_tls)
    app = web.Application()
    app.router.add_post("/{path:.*}", hook_server.handle)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    hook_server.address = runner.addresses[0][:2]
    try:
        async with ApiServer() as server:
            server.register_service(
                namespace=SERVICE_NAMESPACE, name=SERVICE, port=443, address=hook_server.address
            )
            configuration_ = client.Configuration()
            load: Any = config.load_kube_config_from_dict  # untyped in kubernetes 37
            await load(server.kubeconfig(), client_configuration=configuration_)
            async with client.ApiClient(configuration_) as api:
                yield Cluster(server=server, webhook=hook_server, api=api)
    finally:
        hook_server.release.set()
        await runner.cleanup()


async def register(cluster: Cluster, hook: dict[str, Any]) -> None:
    body = client.V1MutatingWebhookConfiguration.from_dict(configuration("inject", hook))
    assert body is not None
    await cluster.admission.create_mutating_webhook_configuration(body=body)


async def create_pod(cluster: Cluster) -> dict[str, Any]:
    body = client.V1Pod.from_dict(WEB_POD(labels={"app": "web"}))
    assert body is not None
    created = await cluster.core.create_namespaced_pod(namespace="default", body=body)
    return dict(created.to_dict())


async def test_a_created_pod_comes_back_mutated(cluster: Cluster, ca: KeyPair) -> None:
    await register(cluster, webhook("inject.example.com", "/mutate", ca=ca))
    created = await create_pod(cluster)

    assert created["metadata"]["labels"] == {"app": "web", "injected": "yes"}
    stored = cluster.server.store.get(PODS, "web-0", "default")
    assert stored["metadata"]["labels"] == {"app": "web", "injected": "yes"}
    [call] = cluster.webhook.calls
    request = call.review["request"]
    assert (request["operation"], request["namespace"]) == ("CREATE", "default")
    assert request["object"]["metadata"]["labels"] == {"app": "web"}


async def test_wrong_ca_bundle_with_fail_policy_rejects_the_create(
    cluster: Cluster, other_ca: KeyPair
) -> None:
    await register(cluster, webhook("inject.example.com", "/mutate", ca=other_ca))
    with pytest.raises(client.ApiException) as raised:
        await create_pod(cluster)

    assert raised.value.status == 500
    status = json.loads(raised.value.body or "{}")
    assert status["reason"] == "InternalError"
    assert status["message"] == (
        'Internal error occurred: failed calling webhook "inject.example.com": failed to call '
        f'webhook: Post "https://{SERVICE}.{SERVICE_NAMESPACE}.svc:443/mutate?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    )
    assert cluster.server.store.peek(PODS, "web-0", "default") is None
    assert cluster.webhook.calls == []


async def test_wrong_ca_bundle_with_ignore_policy_creates_unmutated(
    cluster: Cluster, other_ca: KeyPair
) -> None:
    await register(
        cluster, webhook("inject.example.com", "/mutate", ca=other_ca, failurePolicy="Ignore")
    )
    created = await create_pod(cluster)
    assert created["metadata"]["labels"] == {"app": "web"}
    assert cluster.server.store.get(PODS, "web-0", "default")["metadata"]["labels"] == {
        "app": "web"
    }


async def test_a_denial_reaches_the_client_as_the_webhooks_status(
    cluster: Cluster, ca: KeyPair
) -> None:
    async def deny(review: dict[str, Any]) -> web.StreamResponse:
        uid = review["request"]["uid"]
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": uid,
                    "allowed": False,
                    "status": {"code": 403, "reason": "Forbidden", "message": "no latest tags"},
                },
            }
        )

    cluster.webhook.behaviours["/deny"] = deny
    await register(cluster, webhook("policy.example.com", "/deny", ca=ca))
    with pytest.raises(client.ApiException) as raised:
        await create_pod(cluster)
    assert raised.value.status == 403
    assert json.loads(raised.value.body or "{}")["message"] == (
        'admission webhook "policy.example.com" denied the request: no latest tags'
    )


async def test_limit_ranger_defaults_before_the_webhooks_and_checks_what_they_return(
    cluster: Cluster, ca: KeyPair
) -> None:
    async def raise_cpu(review: dict[str, Any]) -> web.StreamResponse:
        patch = json_patch(
            {"op": "replace", "path": "/spec/containers/0/resources/requests/cpu", "value": "4"},
            {"op": "replace", "path": "/spec/containers/0/resources/limits/cpu", "value": "4"},
        )
        return answer(review, allowed=True, patchType="JSONPatch", patch=patch)

    cluster.webhook.behaviours["/raise"] = raise_cpu
    limits = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "cpu"},
              "spec": {"limits": [{"type": "Container", "max": {"cpu": "50m"}}]}}  # fmt: skip
    body = client.V1LimitRange.from_dict(limits)
    assert body is not None
    await cluster.core.create_namespaced_limit_range("default", body)
    await register(cluster, webhook("raise.example.com", "/raise", ca=ca))
    with pytest.raises(client.ApiException) as raised:
        await create_pod(cluster)
    # LimitRanger's defaults (default and defaultRequest from max) reached the webhook ...
    [call] = cluster.webhook.calls
    resources = call.review["request"]["object"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"cpu": "50m"}, "limits": {"cpu": "50m"}}
    # ... and its checks refused what the webhook returned, as kube-apiserver does.
    assert raised.value.status == 403
    assert json.loads(raised.value.body or "{}")["message"] == (
        'pods "web-0" is forbidden: maximum cpu usage per Container is 50m, but limit is 4'
    )
    assert cluster.server.store.peek(PODS, "web-0", "default") is None
