"""Calling one admission webhook over HTTPS, as kube-apiserver's webhook client does.

The chain (:mod:`.admission`) hands a matched webhook and the request to
:meth:`WebhookClient.review`; what comes back is the webhook's verified AdmissionResponse, and
every way the call can fail is a :class:`WebhookCallFailure` whose text is upstream's, so the
chain can apply ``failurePolicy`` and the client sees the message a cluster would print.

Contract (upstream: ``k8s.io/apiserver/pkg/admission/plugin/webhook/...`` and
``k8s.io/apiserver/pkg/util/webhook``):

* Call: AdmissionReview ``admission.k8s.io/v1`` (``request.CreateV1AdmissionReview``) POSTed to
  ``clientConfig.url`` or ``https://<svc>.<ns>.svc:<port><path>`` with ``?timeout=<n>s``; the
  service name is resolved through the injected :data:`ServiceResolver` but stays the TLS
  server name, and the server certificate is verified against ``clientConfig.caBundle`` only,
  with ``VERIFY_X509_STRICT``.
* Failure texts: transport failures as ``failed to call webhook: Post "<url>?timeout=<n>s":
  <Go-style error>`` (``tls: failed to verify certificate: x509: ...``, ``context deadline
  exceeded``, ``dial tcp ...: connect: connection refused``), a non-2xx answer as client-go's
  text for it (no URL), a bad review (``request.VerifyAdmissionResponse``: wrong uid, version,
  patch fields) as ``received invalid webhook response: ...``; each prefixed with
  ``failed calling webhook "<name>": `` (``webhookutil.ErrCallingWebhook``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import ipaddress
import json
import socket
import ssl
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from .admission_matching import RequestAttributes, Webhook
from .json_copy import json_copy

__all__ = ["ServiceResolver", "WebhookCallFailure", "WebhookClient"]

ServiceResolver = Callable[[str, str, int], tuple[str, int] | None]
"""``(namespace, name, port)`` of a Service → the local ``(host, port)`` serving it, or None."""

_REVIEW_VERSION: Final = "admission.k8s.io/v1"
_USER_INFO: Final = {
    "username": "kubernetes-admin",
    "groups": ["system:masters", "system:authenticated"],
}
_UNSTRUCTURED_TEXT_LIMIT: Final = 2048  # client-go rest: maxUnstructuredResponseTextBytes
_GENERIC_HTTP_MESSAGES: Final = {  # apimachinery errors.NewGenericServerResponse
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    406: "the server was unable to respond with a content type that the client supports",
    409: "the server reported a conflict",
    415: "the server does not support the media type transmitted in the request",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: (
        "the server was unable to return a response in the time allotted, "
        "but may still be processing the request"
    ),
}
_UNKNOWN_AUTHORITY_CODES: Final = frozenset({18, 19, 20, 21, 2})  # OpenSSL X509_V_ERR_*
_VALIDITY_CODES: Final = frozenset({9, 10})
_HOSTNAME_MISMATCH: Final = 62


class WebhookCallFailure(Exception):
    """``webhookutil.ErrCallingWebhook``: the call failed; failurePolicy decides."""

    def __init__(self, hook: Webhook, reason: str) -> None:
        super().__init__(f"failed calling webhook {json.dumps(hook.name)}: {reason}")


# --- the review -------------------------------------------------------------------------------


def _review(
    attrs: RequestAttributes, uid: str, obj: Mapping[str, Any], old_obj: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``request.CreateV1AdmissionReview``."""
    group, version, kind = attrs.kind
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {
        "group": attrs.resource.group,
        "version": attrs.resource.version,
        "resource": attrs.resource.plural,
    }
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(
        attrs.operation, "DeleteOptions"
    )
    options: dict[str, Any] = {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}
    if attrs.dry_run:
        options["dryRun"] = ["All"]
    request: dict[str, Any] = {
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": dict(gvk),
        "requestResource": dict(gvr),
        "operation": attrs.operation,
        "userInfo": json_copy(_USER_INFO),
        "object": obj,
        "oldObject": old_obj,
        "dryRun": attrs.dry_run,
        "options": options,
    }
    if attrs.subresource:
        request["subResource"] = request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    return {"apiVersion": _REVIEW_VERSION, "kind": "AdmissionReview", "request": request}


def _verified_response(hook: Webhook, uid: str, answer: Any) -> Mapping[str, Any]:
    """``request.VerifyAdmissionResponse`` for admission.k8s.io/v1."""

    def invalid(detail: str) -> WebhookCallFailure:
        return WebhookCallFailure(hook, f"received invalid webhook response: {detail}")

    response = answer.get("response") if isinstance(answer, dict) else None
    if not isinstance(response, dict):
        raise invalid("webhook response was absent")
    got_uid = str(response.get("uid") or "")
    if got_uid != uid:
        raise invalid(f"expected response.uid={json.dumps(uid)}, got {json.dumps(got_uid)}")
    api_version, kind = str(answer.get("apiVersion") or ""), str(answer.get("kind") or "")
    if (api_version, kind) != (_REVIEW_VERSION, "AdmissionReview"):
        raise invalid(
            f"expected webhook response of {_REVIEW_VERSION}, Kind=AdmissionReview, "
            f"got {api_version}, Kind={kind}"
        )
    patch, patch_type = response.get("patch"), response.get("patchType")
    if hook.mutating:
        if patch and patch_type is None:
            raise invalid("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise invalid("webhook returned response.patchType but not response.patch")
        if patch_type is not None and not patch_type:
            raise invalid(f'webhook returned invalid response.patchType of "{patch_type}"')
    else:
        if patch:
            raise invalid("validating webhook may not return response.patch")
        if patch_type is not None:
            raise invalid("validating webhook may not return response.patchType")
    return response


# --- transport --------------------------------------------------------------------------------


def _service_host(host: str) -> tuple[str, str] | None:
    """``<name>.<namespace>.svc`` → ``(namespace, name)``."""
    parts = host.rstrip(".").split(".")
    if len(parts) == 3 and parts[2] == "svc":
        return parts[1], parts[0]
    return None


class _ServiceDnsResolver(AbstractResolver):
    """Resolves ``<svc>.<ns>.svc`` through the ServiceResolver; other names the usual way.

    The result keeps the service name as ``hostname``, which aiohttp uses for SNI and for the
    certificate name check, while it connects to the local address (and port) returned.
    """

    def __init__(self, services: ServiceResolver) -> None:
        self._services = services
        self._fallback = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        service = _service_host(host)
        if service is None:
            return await self._fallback.resolve(host, port, family)
        address = self._services(service[0], service[1], port)
        if address is None:
            raise OSError(errno.EHOSTUNREACH, f'service "{service[1]}" not found')
        try:
            ip = ipaddress.ip_address(address[0])
        except ValueError:  # a name such as "localhost": resolve it, keep the service name
            found = await self._fallback.resolve(address[0], address[1], family)
            return [ResolveResult(**{**result, "hostname": host}) for result in found]
        return [
            ResolveResult(
                hostname=host,
                host=str(ip),
                port=address[1],
                family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        await self._fallback.close()


def _tls_context(ca_bundle: str) -> ssl.SSLContext:
    """Trust exactly the configuration's caBundle (no system roots), verified strictly."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED + check_hostname
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    if ca_bundle:
        try:
            pem = base64.b64decode(ca_bundle, validate=True).decode("ascii")
            context.load_verify_locations(cadata=pem)
        except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
            raise ValueError(
                "unable to load root certificates: unable to parse bytes as PEM block"
            ) from exc
    return context


def _tls_failure_text(exc: ssl.SSLCertVerificationError, host: str) -> str:
    """The Go crypto/x509 wording for the usual verification failures."""
    code = exc.verify_code
    if code in _UNKNOWN_AUTHORITY_CODES:
        detail = "x509: certificate signed by unknown authority"
    elif code in _VALIDITY_CODES:
        detail = "x509: certificate has expired or is not yet valid"
    elif code == _HOSTNAME_MISMATCH:
        detail = f"x509: certificate is not valid for {host}"
    else:
        detail = f"x509: {exc.verify_message}"
    return f"tls: failed to verify certificate: {detail}"


def _http_error_text(status: int, content_type: str, body: bytes) -> str:
    """client-go's error for a non-2xx answer: the Status it carries, or the generic text."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status" and decoded.get("status"):
        return str(decoded.get("message", ""))
    server_message = "unknown"
    if content_type == "text/plain":
        server_message = body[:_UNSTRUCTURED_TEXT_LIMIT].decode("utf-8", "replace").strip()
    if status == 403:
        return server_message
    if status in _GENERIC_HTTP_MESSAGES:
        return _GENERIC_HTTP_MESSAGES[status]
    if status >= 500:
        quoted = json.dumps(server_message)
        return f"an error on the server ({quoted}) has prevented the request from succeeding"
    return f"the server responded with the status code {status} but did not return more information"


class WebhookClient:
    """HTTPS POSTs of AdmissionReviews; every failure becomes a :class:`WebhookCallFailure`.

    Safe to use from more than one event loop in turn: the HTTP session is remade for the loop
    it is used on, and :meth:`close` may be followed by more calls.
    """

    def __init__(self, resolver: ServiceResolver) -> None:
        self._services = resolver
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _session_for_loop(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # a session belongs to the loop it was made on; one left on another loop is dropped
            self._loop = loop
            # no pooling and no DNS cache: a re-registered or restarted service is found anew
            connector = aiohttp.TCPConnector(
                resolver=_ServiceDnsResolver(self._services),
                use_dns_cache=False,
                force_close=True,
            )
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    def _context(self, hook: Webhook) -> ssl.SSLContext:
        bundle = str((hook.spec.get("clientConfig") or {}).get("caBundle") or "")
        if bundle not in self._contexts:
            try:
                self._contexts[bundle] = _tls_context(bundle)
            except ValueError as exc:
                raise WebhookCallFailure(hook, f"could not get REST client: {exc}") from exc
        return self._contexts[bundle]

    def _target(self, hook: Webhook) -> tuple[str, str | None]:
        """The URL to POST to (with ``?timeout=``) and, for a Service, where it resolves."""
        client_config = hook.spec.get("clientConfig") or {}
        query = f"timeout={hook.timeout}s"
        if client_config.get("url"):
            url = str(client_config["url"])
            if not url.startswith("https://"):
                raise WebhookCallFailure(
                    hook, "could not get REST client: webhook URL must use https"
                )
            return f"{url}{'&' if '?' in url else '?'}{query}", None
        service = client_config.get("service") or {}
        name, namespace = str(service.get("name", "")), str(service.get("namespace", ""))
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/")
        url = f"https://{name}.{namespace}.svc:{port}{path}?{query}"
        address = self._services(namespace, name, port)
        if address is None:
            raise WebhookCallFailure(
                hook, f'failed to call webhook: Post "{url}": service "{name}" not found'
            )
        return url, f"{address[0]}:{address[1]}"

    async def review(
        self,
        hook: Webhook,
        attrs: RequestAttributes,
        obj: Mapping[str, Any],
        old_obj: Mapping[str, Any] | None,
    ) -> Mapping[str, Any]:
        """Send ``hook`` the AdmissionReview of the request; its verified ``response``."""
        versions = hook.spec.get("admissionReviewVersions")
        if versions and "v1" not in versions:
            raise WebhookCallFailure(
                hook,
                "could not create admission objects: webhook does not accept known "
                "AdmissionReview versions (v1)",
            )
        uid = str(uuid.uuid4())
        answer = await self._post(hook, _review(attrs, uid, obj, old_obj))
        return _verified_response(hook, uid, answer)

    async def _post(self, hook: Webhook, review: dict[str, Any]) -> Any:
        """POST ``review`` and return the decoded answer (not yet verified)."""
        context = self._context(hook)
        url, address = self._target(hook)
        session = self._session_for_loop()

        def failed(detail: str) -> WebhookCallFailure:
            return WebhookCallFailure(hook, f'failed to call webhook: Post "{url}": {detail}')

        try:
            async with asyncio.timeout(hook.timeout):
                async with session.post(
                    url,
                    data=json.dumps(review).encode(),
                    headers={
                        "Content-Type": "application/json",
                        "Accept": "application/json, */*",
                    },
                    ssl=context,
                    allow_redirects=False,
                ) as response:
                    body = await response.read()
                    status, content_type = response.status, response.content_type
        except TimeoutError as exc:
            raise failed("context deadline exceeded") from exc
        except aiohttp.ClientConnectorCertificateError as exc:
            verification = exc.certificate_error
            host = urlsplit(url).hostname or ""
            if isinstance(verification, ssl.SSLCertVerificationError):
                raise failed(_tls_failure_text(verification, host)) from exc
            raise failed(f"tls: {verification}") from exc
        except aiohttp.ClientConnectorError as exc:
            target = address or f"{exc.host}:{exc.port}"
            if exc.os_error.errno == errno.ECONNREFUSED:
                raise failed(f"dial tcp {target}: connect: connection refused") from exc
            raise failed(f"dial tcp {target}: {exc.os_error.strerror or exc.os_error}") from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise failed("EOF") from exc
        except aiohttp.ClientError as exc:
            raise failed(str(exc) or type(exc).__name__) from exc
        if not 200 <= status <= 206:  # client-go rest accepts 200..206
            detail = _http_error_text(status, content_type, body)
            raise WebhookCallFailure(hook, f"failed to call webhook: {detail}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise WebhookCallFailure(
                hook, f"failed to call webhook: json parse error: {exc}"
            ) from exc

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()
