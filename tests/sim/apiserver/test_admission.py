"""The admission chain against real webhooks: an aiohttp HTTPS server with a generated CA.

Every test drives :class:`AdmissionChain` directly and the webhook is a real TLS listener on
127.0.0.1, reached through the service resolver under its Service DNS name. Expected statuses
and messages are kube-apiserver's (``mutating/dispatcher.go``, ``validating/dispatcher.go``,
``errors/statuserror.go``, ``request/admissionreview.go`` and ``util/webhook/error.go`` of
k8s.io/apiserver; client-go's wording for transport and HTTP errors).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import re
import socket
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubescale.certs.authority import (
    KeyPair,
    ca_bundle,
    generate_ca,
    issue_serving_certificate,
    service_dns_names,
    write_key_pairs,
)
from kubescale.kube.resources import (
    DEPLOYMENTS,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
    ResourceType,
)
from kubescale.sim.apiserver.admission import AdmissionChain, AdmissionOutcome
from tests import builders

WEB_POD = functools.partial(
    builders.pods.pod, name="web-0", containers=[builders.pods.container(image="nginx")]
)

NOW = datetime.now(UTC)  # OpenSSL checks certificate validity against the real clock
SERVICE, SERVICE_NAMESPACE = "hook", "webhooks"
SERVICE_HOST = f"{SERVICE}.{SERVICE_NAMESPACE}.svc"
ALL_PODS = {
    "operations": ["CREATE", "UPDATE"],
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "resources": ["pods"],
}

Review = dict[str, Any]
Behaviour = Callable[[Review], Awaitable[web.StreamResponse]]


# --- a webhook server -------------------------------------------------------------------------


def answer(review: Review, **response: Any) -> web.Response:
    """An AdmissionReview response for ``review`` with the given response fields."""
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], **response},
    }
    return web.json_response(body)


def json_patch(*operations: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(list(operations)).encode()).decode()


INJECT_LABEL = json_patch({"op": "add", "path": "/metadata/labels/injected", "value": "yes"})


@dataclass
class Call:
    path: str
    query: str
    content_type: str
    review: Review


@dataclass
class WebhookServer:
    """A TLS webhook: ``behaviours`` by path, every call recorded, SNI names seen."""

    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    address: tuple[str, int] = ("127.0.0.1", 0)

    @property
    def paths(self) -> list[str]:
        return [call.path for call in self.calls]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        review = await request.json()
        self.calls.append(Call(request.path, request.query_string, request.content_type, review))
        behaviour = self.behaviours.get(request.path)
        if behaviour is None:
            return web.Response(status=404, text="no such webhook")
        return await behaviour(review)


def standard_behaviours(server: WebhookServer) -> dict[str, Behaviour]:
    async def allow(review: Review) -> web.StreamResponse:
        return answer(review, allowed=True)

    async def mutate(review: Review) -> web.StreamResponse:
        return answer(review, allowed=True, patchType="JSONPatch", patch=INJECT_LABEL)

    async def slow(review: Review) -> web.StreamResponse:
        await asyncio.wait_for(server.release.wait(), timeout=10)
        return answer(review, allowed=True)

    async def boom(_: Review) -> web.StreamResponse:
        return web.Response(status=500, text="boom\n")

    async def bad_uid(review: Review) -> web.StreamResponse:
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": "nope", "allowed": True},
            }
        )

    async def wrong_kind(review: Review) -> web.StreamResponse:
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1beta1",
                "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": True},
            }
        )

    async def absent(_: Review) -> web.StreamResponse:
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})

    async def not_json(_: Review) -> web.StreamResponse:
        return web.Response(status=200, text="<html>hi</html>", content_type="text/html")

    async def status_503(_: Review) -> web.StreamResponse:
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "warming"}
        return web.json_response(status, status=503)

    return {
        "/allow": allow,
        "/mutate": mutate,
        "/slow": slow,
        "/boom": boom,
        "/bad-uid": bad_uid,
        "/wrong-kind": wrong_kind,
        "/absent": absent,
        "/not-json": not_json,
        "/status-503": status_503,
    }


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return generate_ca(common_name="webhook-test-ca", now=NOW, days=2, key_type="ecdsa")


@pytest.fixture(scope="module")
def other_ca() -> KeyPair:
    return generate_ca(common_name="someone-else", now=NOW, days=2, key_type="ecdsa")


@pytest.fixture(scope="module")
def server_tls(ca: KeyPair, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    serving = issue_serving_certificate(
        ca=ca,
        names=[*service_dns_names(SERVICE, SERVICE_NAMESPACE), "127.0.0.1"],
        now=NOW,
        days=1,
        key_type="ecdsa",
    )
    files = write_key_pairs(tmp_path_factory.mktemp("webhook-tls"), ca=ca, server=serving)
    return files["serverCert.pem"], files["serverKey.pem"]


@pytest.fixture
async def webhook_server(server_tls: tuple[Path, Path]) -> AsyncIterator[WebhookServer]:
    server = WebhookServer()
    server.behaviours.update(standard_behaviours(server))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*server_tls)

    def record_sni(_: ssl.SSLObject, name: str | None, __: ssl.SSLContext) -> None:
        server.sni.append(name)

    context.sni_callback = record_sni
    app = web.Application()
    app.router.add_post("/{path:.*}", server.handle)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.address = (host, port)
    yield server
    server.release.set()
    await runner.cleanup()


@dataclass
class Services:
    """The resolver handed to the chain: (namespace, name, port) → local address."""

    table: dict[tuple[str, str, int], tuple[str, int]] = field(default_factory=dict)

    def __call__(self, namespace: str, name: str, port: int) -> tuple[str, int] | None:
        return self.table.get((namespace, name, port))


@pytest.fixture
def services(webhook_server: WebhookServer) -> Services:
    return Services({(SERVICE_NAMESPACE, SERVICE, 443): webhook_server.address})


@pytest.fixture
async def chain(services: Services) -> AsyncIterator[AdmissionChain]:
    admission = AdmissionChain(resolver=services)
    yield admission
    await admission.close()


def webhook(name: str, path: str, *, ca: KeyPair, **fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "clientConfig": {
            "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE, "path": path},
            "caBundle": ca_bundle(ca.cert_pem),
        },
        "rules": [ALL_PODS],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    spec.update(fields)
    return spec


def configuration(name: str, *webhooks: dict[str, Any], validating: bool = False) -> dict[str, Any]:
    kind = "ValidatingWebhookConfiguration" if validating else "MutatingWebhookConfiguration"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": list(webhooks),
    }


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}


async def admit(
    chain: AdmissionChain,
    *,
    mutating: list[dict[str, Any]] | None = None,
    validating: list[dict[str, Any]] | None = None,
    obj: dict[str, Any] | None = None,
    old_obj: dict[str, Any] | None = None,
    operation: str = "CREATE",
    resource: ResourceType = PODS,
    subresource: str = "",
    dry_run: bool = False,
) -> AdmissionOutcome:
    return await chain.admit(
        operation=operation,
        resource=resource,
        subresource=subresource,
        obj=obj if obj is not None else WEB_POD(labels={"app": "web"}),
        old_obj=old_obj,
        namespace_obj=NAMESPACE,
        mutating=mutating or [],
        validating=validating or [],
        dry_run=dry_run,
    )


# --- the review sent --------------------------------------------------------------------------


async def test_create_sends_a_v1_admission_review(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    config = configuration("cfg", webhook("allow.example.com", "/allow", ca=ca))
    outcome = await admit(chain, mutating=[config])

    assert outcome == AdmissionOutcome(
        allowed=True, object=WEB_POD(labels={"app": "web"}), status=None, warnings=()
    )
    [call] = webhook_server.calls
    assert (call.path, call.query, call.content_type) == (
        "/allow",
        "timeout=10s",
        "application/json",
    )
    assert webhook_server.sni == [SERVICE_HOST]  # the Service name, not the local address
    review = call.review
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    request = review["request"]
    uuid.UUID(request.pop("uid"))
    assert request == {
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "web-0",
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {
            "username": "kubernetes-admin",
            "groups": ["system:masters", "system:authenticated"],
        },
        "object": WEB_POD(labels={"app": "web"}),
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }


async def test_scale_update_sends_old_object_subresource_and_update_options(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    rule = {
        "operations": ["UPDATE"],
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "resources": ["deployments/scale"],
    }
    config = configuration("cfg", webhook("scale.example.com", "/allow", ca=ca, rules=[rule]))
    scale = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 5},
    }
    old = {**scale, "spec": {"replicas": 2}}
    outcome = await admit(
        chain,
        validating=[config],
        obj=scale,
        old_obj=old,
        operation="UPDATE",
        resource=DEPLOYMENTS,
        subresource="scale",
    )

    assert outcome.allowed
    request = webhook_server.calls[0].review["request"]
    assert request["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert request["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert (request["subResource"], request["requestSubResource"]) == ("scale", "scale")
    assert (request["object"], request["oldObject"]) == (scale, old)
    assert request["options"] == {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}


async def test_url_client_config_reaches_an_ip_address(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    host, port = webhook_server.address
    hook = webhook("url.example.com", "/", ca=ca)
    hook["clientConfig"] = {
        "url": f"https://{host}:{port}/allow",
        "caBundle": ca_bundle(ca.cert_pem),
    }
    outcome = await admit(chain, validating=[configuration("cfg", hook, validating=True)])
    assert outcome.allowed
    assert webhook_server.paths == ["/allow"]


async def test_webhook_configurations_are_never_sent_to_webhooks(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    everything = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}
    config = configuration("cfg", webhook("all.example.com", "/boom", ca=ca, rules=[everything]))
    outcome = await admit(
        chain, mutating=[config], obj=config, resource=MUTATING_WEBHOOK_CONFIGURATIONS
    )
    assert outcome.allowed
    assert webhook_server.calls == []


# --- denial -----------------------------------------------------------------------------------

DENIALS: list[tuple[str, dict[str, Any] | None, int, str, str | None]] = [
    # (id, the webhook's status, expected code, expected message suffix, expected reason)
    ("message-and-code", {"code": 403, "message": "no root", "reason": "Forbidden"}, 403,
     ": no root", "Forbidden"),
    ("message-only", {"message": "image must be pinned"}, 400, ": image must be pinned", None),
    ("reason-only", {"reason": "Unauthorized"}, 400, ": Unauthorized", "Unauthorized"),
    ("nothing", None, 400, " without explanation", None),
    ("success-code", {"code": 200, "message": "odd"}, 400, ": odd", None),
]  # fmt: skip


@pytest.mark.parametrize("case", DENIALS, ids=[case[0] for case in DENIALS])
async def test_denial_is_the_webhooks_status_with_the_upstream_prefix(
    chain: AdmissionChain,
    webhook_server: WebhookServer,
    ca: KeyPair,
    case: tuple[str, dict[str, Any] | None, int, str, str | None],
) -> None:
    _, status, code, suffix, reason = case

    async def deny(review: Review) -> web.StreamResponse:
        if status is None:
            return answer(review, allowed=False)
        return answer(review, allowed=False, status=status)

    webhook_server.behaviours["/deny"] = deny
    config = configuration("cfg", webhook("deny.example.com", "/deny", ca=ca))
    outcome = await admit(chain, mutating=[config])

    assert not outcome.allowed
    assert outcome.object is None
    assert outcome.status is not None
    assert outcome.status["kind"] == "Status"
    assert outcome.status["status"] == "Failure"
    assert outcome.status["code"] == code
    assert (
        outcome.status["message"]
        == f'admission webhook "deny.example.com" denied the request{suffix}'
    )
    assert outcome.status.get("reason") == reason


# --- mutation ---------------------------------------------------------------------------------


async def test_patch_is_applied_and_validating_webhooks_see_the_result(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    mutating = configuration("m", webhook("inject.example.com", "/mutate", ca=ca))
    validating = configuration("v", webhook("check.example.com", "/allow", ca=ca), validating=True)
    outcome = await admit(chain, mutating=[mutating], validating=[validating])

    expected = WEB_POD(labels={"app": "web", "injected": "yes"})
    assert outcome.allowed
    assert outcome.object == expected
    assert webhook_server.paths == ["/mutate", "/allow"]
    assert webhook_server.calls[1].review["request"]["object"] == expected


async def test_mutating_configurations_run_in_name_order_webhooks_in_list_order(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    configs = [
        configuration("zeta", webhook("z.example.com", "/z", ca=ca)),
        configuration(
            "alpha",
            webhook("a2.example.com", "/a2", ca=ca),
            webhook("a1.example.com", "/a1", ca=ca),
        ),
    ]

    def appender(tag: str) -> Behaviour:
        async def mutate(review: Review) -> web.StreamResponse:
            seen = review["request"]["object"]["metadata"].get("annotations", {}).get("order", "")
            patch = json_patch(
                {"op": "add", "path": "/metadata/annotations", "value": {"order": seen + tag}}
            )
            return answer(review, allowed=True, patchType="JSONPatch", patch=patch)

        return mutate

    for tag in ("z", "a2", "a1"):
        webhook_server.behaviours[f"/{tag}"] = appender(tag)
    outcome = await admit(chain, mutating=configs)

    assert webhook_server.paths == ["/a2", "/a1", "/z"]
    assert outcome.object is not None
    assert outcome.object["metadata"]["annotations"] == {"order": "a2a1z"}


async def test_reinvocation_if_needed_reruns_earlier_webhooks_after_a_later_change(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    configs = [
        configuration(
            "a", webhook("watch.example.com", "/allow", ca=ca, reinvocationPolicy="IfNeeded")
        ),
        configuration("b", webhook("inject.example.com", "/mutate", ca=ca)),
    ]
    outcome = await admit(chain, mutating=configs)
    assert outcome.allowed
    assert webhook_server.paths == ["/allow", "/mutate", "/allow"]
    assert (
        webhook_server.calls[2].review["request"]["object"]["metadata"]["labels"]["injected"]
        == "yes"
    )

    webhook_server.calls.clear()
    configs[0]["webhooks"][0]["reinvocationPolicy"] = "Never"
    await admit(chain, mutating=configs)
    assert webhook_server.paths == ["/allow", "/mutate"]


async def test_a_patch_that_does_not_apply_is_an_internal_error(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    async def bad_patch(review: Review) -> web.StreamResponse:
        patch = json_patch({"op": "remove", "path": "/spec/nodeName"})
        return answer(review, allowed=True, patchType="JSONPatch", patch=patch)

    webhook_server.behaviours["/bad-patch"] = bad_patch
    config = configuration(
        "m", webhook("bad.example.com", "/bad-patch", ca=ca, failurePolicy="Ignore")
    )
    outcome = await admit(chain, mutating=[config])

    assert not outcome.allowed  # failurePolicy does not cover a patch that fails to apply
    assert outcome.status is not None
    assert (outcome.status["code"], outcome.status["reason"]) == (500, "InternalError")
    assert outcome.status["message"].startswith("Internal error occurred: ")


async def test_warnings_from_every_webhook_are_collected_in_order(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    def warn(text: str) -> Behaviour:
        async def respond(review: Review) -> web.StreamResponse:
            return answer(review, allowed=True, warnings=[text])

        return respond

    webhook_server.behaviours["/w1"] = warn("first")
    webhook_server.behaviours["/w2"] = warn("second")
    outcome = await admit(
        chain,
        mutating=[configuration("m", webhook("w1.example.com", "/w1", ca=ca))],
        validating=[configuration("v", webhook("w2.example.com", "/w2", ca=ca), validating=True)],
    )
    assert outcome.allowed
    assert outcome.warnings == ("first", "second")


# --- validating -------------------------------------------------------------------------------


async def test_every_validating_webhook_is_called_and_any_denial_denies(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    async def deny(review: Review) -> web.StreamResponse:
        return answer(review, allowed=False, status={"message": "nope"})

    webhook_server.behaviours["/deny"] = deny
    config = configuration(
        "v",
        webhook("first.example.com", "/allow", ca=ca),
        webhook("second.example.com", "/deny", ca=ca),
        webhook("third.example.com", "/allow", ca=ca),
        validating=True,
    )
    outcome = await admit(chain, validating=[config])

    assert sorted(webhook_server.paths) == ["/allow", "/allow", "/deny"]
    assert outcome.status is not None
    assert (
        outcome.status["message"]
        == 'admission webhook "second.example.com" denied the request: nope'
    )


async def test_a_validating_webhook_may_not_patch(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    config = configuration("v", webhook("v.example.com", "/mutate", ca=ca), validating=True)
    outcome = await admit(chain, validating=[config])
    assert outcome.status is not None
    assert outcome.status["message"] == (
        'Internal error occurred: failed calling webhook "v.example.com": received invalid '
        "webhook response: validating webhook may not return response.patch"
    )


# --- failures to call: failurePolicy ----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


FAILURES: list[tuple[str, str, dict[str, Any], str]] = [
    # (id, path, webhook fields, expected reason after 'failed calling webhook "<name>": ')
    (
        "wrong-ca",
        "/mutate",
        {"other_ca": True},
        f'failed to call webhook: Post "https://{SERVICE_HOST}:443/mutate?timeout=10s": '
        "tls: failed to verify certificate: x509: certificate signed by unknown authority",
    ),
    (
        "timeout",
        "/slow",
        {"timeoutSeconds": 1},
        f'failed to call webhook: Post "https://{SERVICE_HOST}:443/slow?timeout=1s": '
        "context deadline exceeded",
    ),
    (
        "http-500",
        "/boom",
        {},
        'failed to call webhook: an error on the server ("boom") has prevented the request '
        "from succeeding",
    ),
    ("status-503", "/status-503", {}, "failed to call webhook: warming"),
    (
        "http-404",
        "/nowhere",
        {},
        "failed to call webhook: the server could not find the requested resource",
    ),
    (
        "bad-uid",
        "/bad-uid",
        {},
        r're:received invalid webhook response: expected response\.uid="[0-9a-f-]{36}", got "nope"',
    ),
    (
        "wrong-kind",
        "/wrong-kind",
        {},
        "received invalid webhook response: expected webhook response of admission.k8s.io/v1, "
        "Kind=AdmissionReview, got admission.k8s.io/v1beta1, Kind=AdmissionReview",
    ),
    ("absent", "/absent", {}, "received invalid webhook response: webhook response was absent"),
    ("not-json", "/not-json", {}, "re:failed to call webhook: json parse error: .+"),
    (
        "unknown-service",
        "/mutate",
        {"service": "missing"},
        f'failed to call webhook: Post "https://missing.{SERVICE_NAMESPACE}.svc:443/mutate'
        f'?timeout=10s": service "missing" not found',
    ),
    (
        "connection-refused",
        "/mutate",
        {"refused": True},
        r're:failed to call webhook: Post "https://hook\.webhooks\.svc:443/mutate\?timeout=10s": '
        r"dial tcp 127\.0\.0\.1:\d+: connect: connection refused",
    ),
    (
        "name-not-in-certificate",
        "/mutate",
        {"service": "other"},
        f'failed to call webhook: Post "https://other.{SERVICE_NAMESPACE}.svc:443/mutate'
        f'?timeout=10s": tls: failed to verify certificate: x509: certificate is not valid for '
        f"other.{SERVICE_NAMESPACE}.svc",
    ),
    (
        "review-version",
        "/mutate",
        {"admissionReviewVersions": ["v1beta1"]},
        "could not create admission objects: webhook does not accept known AdmissionReview "
        "versions (v1)",
    ),
    (
        "plain-http-url",
        "/mutate",
        {"clientConfig": {"url": "http://127.0.0.1:1/mutate"}},
        "could not get REST client: webhook URL must use https",
    ),
    (
        "garbage-ca-bundle",
        "/mutate",
        {
            "clientConfig": {
                "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE},
                "caBundle": "bm90IGEgUEVN",
            }
        },
        "could not get REST client: unable to load root certificates: unable to parse bytes as "
        "PEM block",
    ),
]


@dataclass(frozen=True)
class Peers:
    """The webhook's surroundings that a failure case rearranges."""

    server: WebhookServer
    services: Services
    ca: KeyPair
    other_ca: KeyPair


@pytest.fixture
def peers(
    webhook_server: WebhookServer, services: Services, ca: KeyPair, other_ca: KeyPair
) -> Peers:
    return Peers(server=webhook_server, services=services, ca=ca, other_ca=other_ca)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
@pytest.mark.parametrize("case", FAILURES, ids=[case[0] for case in FAILURES])
async def test_failure_policy_decides_what_a_failed_call_does(
    chain: AdmissionChain, peers: Peers, policy: str, case: tuple[str, str, dict[str, Any], str]
) -> None:
    _, path, options, expected = case
    services, webhook_server, ca, other_ca = peers.services, peers.server, peers.ca, peers.other_ca
    fields = {k: v for k, v in options.items() if k not in ("other_ca", "service", "refused")}
    hook = webhook(
        "flaky.example.com", path, ca=other_ca if options.get("other_ca") else ca, **fields
    )
    hook["failurePolicy"] = policy
    if "service" in options:
        hook["clientConfig"]["service"]["name"] = options["service"]
        if options["service"] == "other":
            services.table[(SERVICE_NAMESPACE, "other", 443)] = webhook_server.address
    if options.get("refused"):
        services.table[(SERVICE_NAMESPACE, SERVICE, 443)] = ("127.0.0.1", _free_port())
    outcome = await admit(chain, mutating=[configuration("cfg", hook)])

    if policy == "Ignore":
        assert outcome == AdmissionOutcome(
            allowed=True, object=WEB_POD(labels={"app": "web"}), status=None, warnings=()
        )
        return
    assert not outcome.allowed
    assert outcome.status is not None
    assert (outcome.status["code"], outcome.status["reason"]) == (500, "InternalError")
    reason = outcome.status["details"]["causes"][0]["message"]
    prefix = 'failed calling webhook "flaky.example.com": '
    assert outcome.status["message"] == f"Internal error occurred: {reason}"
    assert reason.startswith(prefix)
    if expected.startswith("re:"):
        assert re.fullmatch(expected[3:], reason[len(prefix) :]), reason
    else:
        assert reason[len(prefix) :] == expected


async def test_failure_policy_defaults_to_fail(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    outcome = await admit(
        chain, mutating=[configuration("cfg", webhook("x.example.com", "/boom", ca=ca))]
    )
    assert outcome.status is not None
    assert outcome.status["code"] == 500


async def test_an_ignored_failure_does_not_stop_later_webhooks(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    config = configuration(
        "cfg",
        webhook("broken.example.com", "/boom", ca=ca, failurePolicy="Ignore"),
        webhook("inject.example.com", "/mutate", ca=ca),
    )
    outcome = await admit(chain, mutating=[config])
    assert outcome.object == WEB_POD(labels={"app": "web", "injected": "yes"})
    assert webhook_server.paths == ["/boom", "/mutate"]


# --- dry run ----------------------------------------------------------------------------------

DRY_RUN_CASES: list[tuple[str, str, bool, int | None]] = [
    # (side effects, failure policy, called, expected status code or None)
    ("None", "Fail", True, None),
    ("NoneOnDryRun", "Fail", True, None),
    ("Some", "Fail", False, 400),
    ("Unknown", "Ignore", False, 400),  # failurePolicy does not soften it
]


@pytest.mark.parametrize("case", DRY_RUN_CASES, ids=[case[0] for case in DRY_RUN_CASES])
async def test_dry_run_calls_only_side_effect_free_webhooks(
    chain: AdmissionChain,
    webhook_server: WebhookServer,
    ca: KeyPair,
    case: tuple[str, str, bool, int | None],
) -> None:
    side_effects, policy, called, code = case
    hook = webhook(
        "dry.example.com", "/allow", ca=ca, sideEffects=side_effects, failurePolicy=policy
    )
    outcome = await admit(
        chain, validating=[configuration("v", hook, validating=True)], dry_run=True
    )

    assert bool(webhook_server.calls) is called
    if called:
        request = webhook_server.calls[0].review["request"]
        assert request["dryRun"] is True
        assert request["options"]["dryRun"] == ["All"]
    if code is None:
        assert outcome.allowed
        return
    assert outcome.status is not None
    assert (outcome.status["code"], outcome.status["reason"]) == (code, "BadRequest")
    assert (
        outcome.status["message"] == 'admission webhook "dry.example.com" does not support dry run'
    )


async def test_side_effects_only_matter_on_dry_run(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    hook = webhook("fx.example.com", "/allow", ca=ca, sideEffects="Some")
    outcome = await admit(chain, validating=[configuration("v", hook, validating=True)])
    assert outcome.allowed
    assert webhook_server.paths == ["/allow"]


# --- selectors through the chain --------------------------------------------------------------


async def test_selectors_decide_which_webhooks_are_called(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    prod_only = webhook(
        "prod.example.com", "/boom", ca=ca, namespaceSelector={"matchLabels": {"env": "prod"}}
    )
    web_only = webhook(
        "web.example.com", "/allow", ca=ca, objectSelector={"matchLabels": {"app": "web"}}
    )
    db_only = webhook(
        "db.example.com", "/boom", ca=ca, objectSelector={"matchLabels": {"app": "db"}}
    )
    outcome = await admit(
        chain, validating=[configuration("v", prod_only, web_only, db_only, validating=True)]
    )
    assert outcome.allowed  # the namespace has no env label and the pod is not a db
    assert webhook_server.paths == ["/allow"]


async def test_the_chain_can_be_closed_and_used_again(
    chain: AdmissionChain, webhook_server: WebhookServer, ca: KeyPair
) -> None:
    config = configuration("cfg", webhook("allow.example.com", "/allow", ca=ca))
    assert (await admit(chain, mutating=[config])).allowed
    await chain.close()
    await chain.close()
    assert (await admit(chain, mutating=[config])).allowed
    assert webhook_server.paths == ["/allow", "/allow"]


async def test_a_service_may_resolve_to_a_host_name(
    chain: AdmissionChain, webhook_server: WebhookServer, services: Services, ca: KeyPair
) -> None:
    services.table[(SERVICE_NAMESPACE, SERVICE, 443)] = ("localhost", webhook_server.address[1])
    config = configuration("cfg", webhook("allow.example.com", "/allow", ca=ca))
    assert (await admit(chain, mutating=[config])).allowed
    assert webhook_server.sni == [SERVICE_HOST]
