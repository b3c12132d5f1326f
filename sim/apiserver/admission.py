"""Dynamic admission: calling Mutating- and ValidatingWebhookConfigurations as kube-apiserver does.

The in-process API server runs every CREATE and UPDATE (not status-only writes) through
:meth:`AdmissionChain.admit` with the webhook configurations from its store, so a webhook under
test (kubescale's VPA admission controller, or any aiohttp app) sees the same AdmissionReview
requests, over real TLS, that a cluster would send, and the client sees the same errors.

Contract (upstream: ``k8s.io/apiserver/pkg/admission/plugin/webhook/...``):

* Order: mutating configurations sorted by name, webhooks in order; then every validating
  webhook (upstream calls them in parallel; so do we, and the first denial in configuration
  order wins). Webhook configurations themselves are never sent to webhooks
  (``rules.IsExemptAdmissionConfigurationResource``).
* Matching (``generic/webhook.go ShouldCallHook``): namespaceSelector, objectSelector, then the
  rules (operations, apiGroups, apiVersions, resources with ``*``/``res/sub``/``*/*`` forms,
  scope). ``matchPolicy: Equivalent`` is treated as Exact: the catalogue serves one version per
  kind, so there is no equivalent resource to convert to. ``matchConditions`` (CEL) are not
  evaluated: such a webhook is called as if they matched.
* Call: AdmissionReview ``admission.k8s.io/v1`` POSTed to ``clientConfig.url`` or
  ``https://<svc>.<ns>.svc:<port><path>`` with ``?timeout=<n>s``; the service name is resolved
  through the injected :data:`ServiceResolver` but stays the TLS server name, and the server
  certificate is verified against ``clientConfig.caBundle`` only, with ``VERIFY_X509_STRICT``.
* Failures to call (connection, TLS, timeout, non-2xx, malformed review, wrong uid) follow
  ``failurePolicy`` (default Fail → 500 ``Internal error occurred: failed calling webhook ...``;
  Ignore → logged and skipped). The reason is worded as upstream's: transport failures as
  ``failed to call webhook: Post "<url>?timeout=<n>s": <Go-style error>`` (``tls: failed to
  verify certificate: x509: ...``, ``context deadline exceeded``, ``dial tcp ...: connect:
  connection refused``), a non-2xx answer as client-go's text for it (no URL), a bad review
  as ``received invalid webhook response: ...``. A denial is the webhook's Status with the
  upstream message prefix (code below 400 raised to 400). A patch is a base64 JSONPatch; one
  that does not apply is a 500 whatever the failurePolicy.
* dryRun: a matching webhook whose sideEffects is not None/NoneOnDryRun rejects the request
  with 400 ``admission webhook "<name>" does not support dry run``.
* ``reinvocationPolicy: IfNeeded``: one extra round re-calls those webhooks when a later webhook
  changed the object (``mutating/reinvocationcontext.go``); in-tree plugins do not exist here.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import errno
import ipaddress
import json
import socket
import ssl
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from kube.resources import ResourceType
from kube.selectors import SelectorError, label_selector_from_dict
from kubescale.logs import component_logger
from sim.apiserver.patching import PatchError, apply_json_patch

__all__ = [
    "AdmissionChain",
    "AdmissionDenied",
    "AdmissionOutcome",
    "ServiceResolver",
    "webhook_matches",
]

ServiceResolver = Callable[[str, str, int], tuple[str, int] | None]
"""``(namespace, name, port)`` of a Service → the local ``(host, port)`` serving it, or None."""

_log = component_logger("apiserver.admission")

DEFAULT_TIMEOUT_SECONDS: Final = 10  # admissionregistration/v1 defaults.go
MAX_TIMEOUT_SECONDS: Final = 30  # validation: 1..30
_REVIEW_VERSION: Final = "admission.k8s.io/v1"
_USER_INFO: Final = {
    "username": "kubernetes-admin",
    "groups": ["system:masters", "system:authenticated"],
}
_SIDE_EFFECT_FREE: Final = frozenset({"None", "NoneOnDryRun"})
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


@dataclass(frozen=True)
class AdmissionOutcome:
    """What admission decided.

    ``allowed`` → ``object`` is the (possibly mutated) object to persist; denied → ``status``
    is the metav1.Status to answer with (code, reason and message as kube-apiserver's).
    """

    allowed: bool
    object: dict[str, Any] | None
    status: dict[str, Any] | None
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class _Attributes:
    """``admission.Attributes`` of one request: what matching and the review are built from."""

    operation: str
    resource: ResourceType
    subresource: str
    kind: tuple[str, str, str]  # group, version, kind of the object sent
    name: str
    namespace: str
    dry_run: bool

    @property
    def is_namespace(self) -> bool:
        return self.resource.group == "" and self.resource.plural == "namespaces"


@dataclass(frozen=True)
class _Hook:
    """One webhook of one configuration; ``key`` tells duplicates across configurations apart."""

    key: tuple[str, int]
    spec: Mapping[str, Any]
    mutating: bool

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def ignore_failures(self) -> bool:
        return bool(self.spec.get("failurePolicy", "Fail") == "Ignore")

    @property
    def timeout(self) -> int:
        raw = self.spec.get("timeoutSeconds")
        seconds = DEFAULT_TIMEOUT_SECONDS if raw is None else int(raw)
        return min(max(seconds, 1), MAX_TIMEOUT_SECONDS)

    @property
    def reinvocable(self) -> bool:
        return self.mutating and self.spec.get("reinvocationPolicy") == "IfNeeded"


class _CallFailure(Exception):
    """``webhookutil.ErrCallingWebhook``: the call failed; failurePolicy decides."""

    def __init__(self, hook: _Hook, reason: str) -> None:
        super().__init__(f"failed calling webhook {json.dumps(hook.name)}: {reason}")


class AdmissionDenied(Exception):
    """A final answer: a webhook's rejection or an error no failurePolicy can soften.

    ``status`` is the metav1.Status to answer with.
    """

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status


# --- statuses ---------------------------------------------------------------------------------


def _status(
    *, code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        status["details"] = details
    return status


def _internal_error(message: str) -> dict[str, Any]:
    """``apierrors.NewInternalError``."""
    return _status(
        code=500,
        reason="InternalError",
        message=f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def _rejection(hook: _Hook, result: Any) -> dict[str, Any]:
    """``webhookerrors.ToStatusErr``: the webhook's Status, sanitised and prefixed."""
    status: dict[str, Any] = dict(result) if isinstance(result, Mapping) else {}
    denied_by = f"admission webhook {json.dumps(hook.name)} denied the request"
    try:
        code = int(status.get("code") or 0)
    except (TypeError, ValueError):
        code = 0
    status["code"] = max(code, 400)  # never a < 400 code along with a rejection
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    if status.get("message"):
        status["message"] = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        status["message"] = f"{denied_by}: {status['reason']}"
    else:
        status["message"] = f"{denied_by} without explanation"
    status.update(kind="Status", apiVersion="v1")
    status.setdefault("metadata", {})
    return status


# --- matching ---------------------------------------------------------------------------------


def _listed(items: Any, requested: str) -> bool:
    return isinstance(items, list) and any(item in ("*", requested) for item in items)


def _rule_matches(rule: Mapping[str, Any], attrs: _Attributes) -> bool:
    """``predicates/rules.Matcher.Matches``: scope, operation, group, version, resource."""
    scope = rule.get("scope") or "*"
    has_namespace = bool(attrs.namespace)
    if scope == "Namespaced":
        # a Namespace object is cluster-scoped even though its request names a namespace
        in_scope = not attrs.is_namespace and has_namespace
    elif scope == "Cluster":
        in_scope = attrs.is_namespace or not has_namespace
    else:
        in_scope = scope == "*"
    if not in_scope:
        return False
    if not _listed(rule.get("operations"), attrs.operation):
        return False
    if not _listed(rule.get("apiGroups"), attrs.resource.group):
        return False
    if not _listed(rule.get("apiVersions"), attrs.resource.version):
        return False
    for entry in rule.get("resources") or ():
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", attrs.resource.plural) and sub in ("*", attrs.subresource):
            return True
    return False


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    # API defaulting turns an absent selector into {} (everything); kube/selectors reads None
    # as "nothing", so absent is mapped here.
    if selector is None:
        return True
    return label_selector_from_dict(selector).matches(labels)


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    if not obj:
        return {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _namespace_matches(
    hook: _Hook,
    attrs: _Attributes,
    obj: Mapping[str, Any],
    namespace_obj: Mapping[str, Any] | None,
) -> bool:
    """``predicates/namespace.Matcher.MatchNamespaceSelector``."""
    if not attrs.namespace and not attrs.is_namespace:
        return True  # cluster-scoped objects other than Namespaces are never exempted
    selector = hook.spec.get("namespaceSelector")
    if selector is None or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return True
    if attrs.is_namespace and not attrs.subresource and attrs.operation in ("CREATE", "UPDATE"):
        labels = _labels(obj)  # the namespace being written is its own namespace
    elif namespace_obj is None:
        name = attrs.namespace
        raise AdmissionDenied(
            _status(
                code=404,
                reason="NotFound",
                message=f'namespaces "{name}" not found',
                details={"name": name, "kind": "namespaces"},
            )
        )
    else:
        labels = _labels(namespace_obj)
    return _selector_matches(selector, labels)


def _should_call(
    hook: _Hook,
    attrs: _Attributes,
    *,
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any] | None,
    namespace_obj: Mapping[str, Any] | None,
) -> bool:
    """Whether ``hook`` applies to the request (``ShouldCallHook``, minus CEL conditions)."""
    if not any(_rule_matches(rule, attrs) for rule in hook.spec.get("rules") or ()):
        return False
    try:
        if not _namespace_matches(hook, attrs, obj, namespace_obj):
            return False
        selector = hook.spec.get("objectSelector")
        return _selector_matches(selector, _labels(obj)) or (
            old_obj is not None and _selector_matches(selector, _labels(old_obj))
        )
    except SelectorError as exc:
        raise AdmissionDenied(_internal_error(str(exc))) from exc


def webhook_matches(
    webhook: Mapping[str, Any],
    *,
    operation: str,
    resource: ResourceType,
    subresource: str,
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any] | None = None,
    namespace_obj: Mapping[str, Any] | None = None,
) -> bool:
    """Whether kube-apiserver would call ``webhook`` (one entry of a configuration's
    ``webhooks``) for this request: rules, namespaceSelector and objectSelector.

    Raises :class:`AdmissionDenied` where upstream fails the request instead: a selector that
    does not parse (500), or a namespaceSelector to evaluate for a namespace that does not
    exist (404).
    """
    attrs = _attributes(
        operation=operation,
        resource=resource,
        subresource=subresource,
        obj=obj,
        old_obj=old_obj,
        dry_run=False,
    )
    hook = _Hook(key=("", 0), spec=webhook, mutating=False)
    return _should_call(hook, attrs, obj=obj, old_obj=old_obj, namespace_obj=namespace_obj)


def _hooks(configurations: Sequence[Mapping[str, Any]], *, mutating: bool) -> list[_Hook]:
    ordered = sorted(configurations, key=lambda c: str((c.get("metadata") or {}).get("name", "")))
    hooks: list[_Hook] = []
    for configuration in ordered:
        config_name = str((configuration.get("metadata") or {}).get("name", ""))
        for index, spec in enumerate(configuration.get("webhooks") or ()):
            hooks.append(_Hook(key=(config_name, index), spec=spec, mutating=mutating))
    return hooks


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


class _WebhookClient:
    """HTTPS POSTs of AdmissionReviews; every failure becomes a :class:`_CallFailure`."""

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

    def _context(self, hook: _Hook) -> ssl.SSLContext:
        bundle = str((hook.spec.get("clientConfig") or {}).get("caBundle") or "")
        if bundle not in self._contexts:
            try:
                self._contexts[bundle] = _tls_context(bundle)
            except ValueError as exc:
                raise _CallFailure(hook, f"could not get REST client: {exc}") from exc
        return self._contexts[bundle]

    def _target(self, hook: _Hook) -> tuple[str, str | None]:
        """The URL to POST to (with ``?timeout=``) and, for a Service, where it resolves."""
        client_config = hook.spec.get("clientConfig") or {}
        query = f"timeout={hook.timeout}s"
        if client_config.get("url"):
            url = str(client_config["url"])
            if not url.startswith("https://"):
                raise _CallFailure(hook, "could not get REST client: webhook URL must use https")
            return f"{url}{'&' if '?' in url else '?'}{query}", None
        service = client_config.get("service") or {}
        name, namespace = str(service.get("name", "")), str(service.get("namespace", ""))
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/")
        url = f"https://{name}.{namespace}.svc:{port}{path}?{query}"
        address = self._services(namespace, name, port)
        if address is None:
            raise _CallFailure(
                hook, f'failed to call webhook: Post "{url}": service "{name}" not found'
            )
        return url, f"{address[0]}:{address[1]}"

    async def post(self, hook: _Hook, review: dict[str, Any]) -> Any:
        """POST ``review`` and return the decoded answer (not yet verified)."""
        context = self._context(hook)
        url, address = self._target(hook)
        session = self._session_for_loop()

        def failed(detail: str) -> _CallFailure:
            return _CallFailure(hook, f'failed to call webhook: Post "{url}": {detail}')

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
            raise _CallFailure(hook, f"failed to call webhook: {detail}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise _CallFailure(hook, f"failed to call webhook: json parse error: {exc}") from exc

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()


# --- the review -------------------------------------------------------------------------------


def _attributes(
    *,
    operation: str,
    resource: ResourceType,
    subresource: str,
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any] | None,
    dry_run: bool,
) -> _Attributes:
    metadata = obj.get("metadata") or (old_obj or {}).get("metadata") or {}
    name = str(metadata.get("name") or "")
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    if api_version and kind:
        group, _, version = api_version.rpartition("/")
        gvk = (group, version, kind)
    elif subresource == "scale":
        gvk = ("autoscaling", "v1", "Scale")
    else:
        gvk = (resource.group, resource.version, resource.kind)
    if resource.group == "" and resource.plural == "namespaces":
        # RequestInfo: /api/v1/namespaces/<name> names the namespace; the collection does not
        namespace = "" if operation == "CREATE" else name
    elif resource.namespaced:
        namespace = str(metadata.get("namespace") or "")
    else:
        namespace = ""
    return _Attributes(
        operation=operation,
        resource=resource,
        subresource=subresource,
        kind=gvk,
        name=name,
        namespace=namespace,
        dry_run=dry_run,
    )


def _review(
    attrs: _Attributes, uid: str, obj: Mapping[str, Any], old_obj: Mapping[str, Any] | None
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
        "userInfo": copy.deepcopy(_USER_INFO),
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


def _verified_response(hook: _Hook, uid: str, answer: Any) -> Mapping[str, Any]:
    """``request.VerifyAdmissionResponse`` for admission.k8s.io/v1."""

    def invalid(detail: str) -> _CallFailure:
        return _CallFailure(hook, f"received invalid webhook response: {detail}")

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


def _patched(hook: _Hook, response: Mapping[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """Apply a mutating webhook's JSONPatch (``callAttrMutatingHook``)."""
    try:
        operations = json.loads(base64.b64decode(str(response["patch"]), validate=True))
    except (binascii.Error, ValueError) as exc:
        raise _CallFailure(hook, f"received undecodable patch in webhook response: {exc}") from exc
    if not isinstance(operations, list):
        raise _CallFailure(
            hook,
            "received undecodable patch in webhook response: "
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        )
    if not operations:
        return obj
    if response.get("patchType") != "JSONPatch":
        raise _CallFailure(hook, f'unsupported patch type "{response.get("patchType")}"')
    try:
        patched = apply_json_patch(obj, operations)
    except PatchError as exc:
        raise AdmissionDenied(_internal_error(str(exc))) from exc
    if not isinstance(patched, dict):
        raise AdmissionDenied(_internal_error("the patched object is not a JSON object"))
    return patched


# --- the chain --------------------------------------------------------------------------------


class AdmissionChain:
    """The mutating then validating webhook phases of kube-apiserver's admission chain."""

    def __init__(self, *, resolver: ServiceResolver) -> None:
        self._client = _WebhookClient(resolver)

    async def admit(
        self,
        *,
        operation: str,
        resource: ResourceType,
        subresource: str,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        mutating: Sequence[dict[str, Any]],
        validating: Sequence[dict[str, Any]],
        dry_run: bool = False,
    ) -> AdmissionOutcome:
        """Run the request through every matching webhook; see the module docstring."""
        attrs = _attributes(
            operation=operation,
            resource=resource,
            subresource=subresource,
            obj=obj,
            old_obj=old_obj,
            dry_run=dry_run,
        )
        if resource.group == "admissionregistration.k8s.io":
            return AdmissionOutcome(allowed=True, object=obj, status=None, warnings=())
        warnings: list[str] = []
        try:
            current = await self._mutate(
                attrs,
                obj=obj,
                old_obj=old_obj,
                namespace_obj=namespace_obj,
                hooks=_hooks(mutating, mutating=True),
                warnings=warnings,
            )
            await self._validate(
                attrs,
                obj=current,
                old_obj=old_obj,
                namespace_obj=namespace_obj,
                hooks=_hooks(validating, mutating=False),
                warnings=warnings,
            )
        except AdmissionDenied as denied:
            return AdmissionOutcome(
                allowed=False, object=None, status=denied.status, warnings=tuple(warnings)
            )
        return AdmissionOutcome(allowed=True, object=current, status=None, warnings=tuple(warnings))

    async def _mutate(
        self,
        attrs: _Attributes,
        *,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        hooks: list[_Hook],
        warnings: list[str],
    ) -> dict[str, Any]:
        current = obj
        invoked_reinvocable: set[tuple[str, int]] = set()
        to_reinvoke: set[tuple[str, int]] = set()
        changed_any = False
        for reinvocation in (False, True):
            if reinvocation and not (changed_any and to_reinvoke):
                break
            for hook in hooks:
                if reinvocation and hook.key not in to_reinvoke:
                    continue
                if not _should_call(
                    hook, attrs, obj=current, old_obj=old_obj, namespace_obj=namespace_obj
                ):
                    continue
                result = await self._call(hook, attrs, current, old_obj, warnings)
                if result is not None and result != current:
                    current = result
                    changed_any = True
                    # webhooks that may want to see this change get one more call
                    to_reinvoke |= invoked_reinvocable
                    invoked_reinvocable = set()
                if hook.reinvocable:
                    invoked_reinvocable.add(hook.key)
        return current

    async def _validate(
        self,
        attrs: _Attributes,
        *,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        hooks: list[_Hook],
        warnings: list[str],
    ) -> None:
        called = [
            hook
            for hook in hooks
            if _should_call(hook, attrs, obj=obj, old_obj=old_obj, namespace_obj=namespace_obj)
        ]
        per_hook: list[list[str]] = [[] for _ in called]
        outcomes = await asyncio.gather(
            *(
                self._call(hook, attrs, obj, old_obj, sink)
                for hook, sink in zip(called, per_hook, strict=True)
            ),
            return_exceptions=True,
        )
        for sink in per_hook:
            warnings.extend(sink)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome

    async def _call(
        self,
        hook: _Hook,
        attrs: _Attributes,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        warnings: list[str],
    ) -> dict[str, Any] | None:
        """Call one webhook: the patched object (mutating), None if skipped or unchanged."""
        if attrs.dry_run and hook.spec.get("sideEffects") not in _SIDE_EFFECT_FREE:
            if hook.spec.get("sideEffects") is None:
                self._fail_open_or_raise(hook, _CallFailure(hook, "Webhook SideEffects is nil"))
                return None
            raise AdmissionDenied(
                _status(
                    code=400,
                    reason="BadRequest",
                    message=f"admission webhook {json.dumps(hook.name)} does not support dry run",
                )
            )
        try:
            versions = hook.spec.get("admissionReviewVersions")
            if versions and "v1" not in versions:
                raise _CallFailure(
                    hook,
                    "could not create admission objects: webhook does not accept known "
                    "AdmissionReview versions (v1)",
                )
            uid = str(uuid.uuid4())
            answer = await self._client.post(hook, _review(attrs, uid, obj, old_obj))
            response = _verified_response(hook, uid, answer)
            warnings.extend(str(w) for w in response.get("warnings") or ())
            if not response.get("allowed"):
                raise AdmissionDenied(_rejection(hook, response.get("status")))
            if hook.mutating and response.get("patch"):
                return _patched(hook, response, obj)
        except _CallFailure as failure:
            self._fail_open_or_raise(hook, failure)
        return None

    def _fail_open_or_raise(self, hook: _Hook, failure: _CallFailure) -> None:
        if hook.ignore_failures:
            _log.warning(
                "Failed calling webhook, failing open %s: %s",
                hook.name,
                failure,
                extra={"fields": {"webhook": hook.name}},
            )
            return
        _log.warning("Failed calling webhook, failing closed %s: %s", hook.name, failure)
        raise AdmissionDenied(_internal_error(str(failure)))

    async def close(self) -> None:
        """Close the HTTP client (idempotent); the chain may be used again afterwards."""
        await self._client.close()
