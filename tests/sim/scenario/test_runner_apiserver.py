"""The API server pieces the runner relies on: ``ApiServer(seed=)`` reproducibility,
``create_admitted`` through the real admission chain, and kubescale's TLS server reachable as
the Service ``kube-system/kubescale`` (the production ``serve`` with generated certificates)."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import (
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
)
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.served_kinds import VALIDATING_WEBHOOK_CONFIGURATIONS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.kubescale_server import (
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    KubescaleTLSServer,
)
from tests import builders

WEB_POD = functools.partial(builders.pods.pod, containers=[builders.pods.container(image="nginx")])

REQUESTS_PATCH = [
    {"op": "add", "path": "/spec/containers/0/resources", "value": {"requests": {"cpu": "321m"}}}
]


def _identities(api: ApiServer) -> list[tuple[str, str]]:
    return [(p["metadata"]["name"], p["metadata"]["uid"]) for p in api.store.snapshots(PODS)]


def _make_pods(api: ApiServer) -> None:
    api.store.create(WEB_POD(name="fixed"))
    for _ in range(3):
        api.store.create(WEB_POD(name=None, metadata_extra={"generateName": "web-"}))


def test_the_same_seed_gives_the_same_uids_and_generated_names() -> None:
    runs = []
    for _ in range(2):
        api = ApiServer(clock=VirtualClock(), crd_dirs=[], seed=42)
        _make_pods(api)
        runs.append(_identities(api))
    assert runs[0] == runs[1]
    other = ApiServer(clock=VirtualClock(), crd_dirs=[], seed=43)
    _make_pods(other)
    assert _identities(other) != runs[0]
    assert _identities(other)[0][0] == "fixed"


def test_without_a_seed_runs_differ() -> None:
    identities = []
    for _ in range(2):
        api = ApiServer(clock=VirtualClock(), crd_dirs=[])
        _make_pods(api)
        identities.append(_identities(api))
    assert identities[0] != identities[1]


def _webhook_routes(app: web.Application) -> None:
    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        response = {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(REQUESTS_PATCH).encode()).decode(),
        }
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "response": response})  # fmt: skip

    async def deny(request: web.Request) -> web.Response:
        review = await request.json()
        name = review["request"]["object"]["metadata"].get("name", "")
        allowed = not name.startswith("forbidden")
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": allowed}
        if not allowed:
            response["status"] = {"code": 403, "message": "pods named forbidden-* are refused"}
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "response": response})  # fmt: skip

    app.router.add_post("/mutate", mutate)
    app.router.add_post("/validate", deny)


def _configuration(kind: str, path: str, ca_bundle: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": f"test-{path.strip('/')}"},
        "webhooks": [{
            "name": f"{path.strip('/')}.kubescale.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "clientConfig": {
                "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE_NAME, "path": path},
                "caBundle": ca_bundle,
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
        }],
    }  # fmt: skip


@pytest.fixture
async def webhook_api() -> AsyncIterator[ApiServer]:
    clock = VirtualClock()
    async with ApiServer(clock=clock, crd_dirs=[], seed=1) as api:
        tls = KubescaleTLSServer(api, clock=clock)
        await tls.start(mounts=[_webhook_routes])
        try:
            api.store.create(
                _configuration("MutatingWebhookConfiguration", "/mutate", tls.ca_bundle)
            )
            api.store.create(
                _configuration("ValidatingWebhookConfiguration", "/validate", tls.ca_bundle)
            )
            yield api
        finally:
            await tls.stop()


async def test_create_admitted_runs_the_mutating_webhooks(webhook_api: ApiServer) -> None:
    created = await webhook_api.create_admitted(WEB_POD(name="mutated"))
    assert created["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "321m"}}
    stored = webhook_api.store.get(PODS, "mutated", "default")
    assert stored["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "321m"}}
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_create_admitted_raises_the_denial(webhook_api: ApiServer) -> None:
    with pytest.raises(ApiError) as raised:
        await webhook_api.create_admitted(WEB_POD(name="forbidden-1"))
    assert raised.value.code == 403
    assert "pods named forbidden-* are refused" in raised.value.status["message"]
    assert webhook_api.store.peek(PODS, "forbidden-1", "default") is None


async def test_store_create_bypasses_admission(webhook_api: ApiServer) -> None:
    webhook_api.store.create(WEB_POD(name="forbidden-direct"))
    stored = webhook_api.store.get(PODS, "forbidden-direct", "default")
    assert "resources" not in stored["spec"]["containers"][0]
    configs = webhook_api.store.snapshots(MUTATING_WEBHOOK_CONFIGURATIONS)
    assert len(configs) == 1
    assert len(webhook_api.store.snapshots(VALIDATING_WEBHOOK_CONFIGURATIONS)) == 1
