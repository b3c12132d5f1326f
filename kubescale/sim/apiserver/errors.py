"""metav1.Status errors, shaped exactly as kube-apiserver writes them.

Every failure the server answers is a ``Status`` object (``kind: Status``, ``apiVersion: v1``,
``status: Failure``) with the reason and code of the matching constructor in
``k8s.io/apimachinery/pkg/api/errors`` (``NewNotFound``, ``NewAlreadyExists``, ``NewConflict``,
``NewInvalid``, ...). Clients branch on ``reason`` and ``code``, and kubectl prints ``message``,
so both are kept verbatim. Note the upstream quirk that NotFound/AlreadyExists/Conflict put the
*resource* (plural) into ``details.kind`` while Invalid puts the *Kind* there.

:class:`ApiError` carries such a Status through the store and the REST layer; the in-process
API (``ObjectStore``) raises it too, so seeding code sees the same errors as a client.
"""

from __future__ import annotations

from typing import Any

from kubescale.kube.errors import reason_for_code
from kubescale.kube.resources import ResourceType

__all__ = [
    "ApiError",
    "FieldCause",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "forbidden",
    "internal_error",
    "invalid",
    "method_not_allowed",
    "not_found",
    "qualified_resource",
    "status_error",
    "success_status",
    "too_many_requests",
    "unsupported_media_type",
]

FieldCause = tuple[str, str, str]
"""``(reason, field, message)`` of one ``details.causes`` entry, e.g.
``("FieldValueInvalid", "metadata.name", 'Invalid value: "A": ...')``."""


class ApiError(Exception):
    """A request failed; ``status`` is the metav1.Status body to answer with."""

    def __init__(self, status: dict[str, Any], *, headers: dict[str, str] | None = None) -> None:
        super().__init__(status.get("message", ""))
        self.status = status
        self.headers = dict(headers or {})

    @property
    def code(self) -> int:
        return int(self.status["code"])

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))

    @property
    def message(self) -> str:
        return str(self.status.get("message", ""))


def qualified_resource(rt: ResourceType) -> str:
    """``pods``, ``deployments.apps``: schema.GroupResource.String(), used in messages."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def status_error(
    *,
    code: int,
    message: str,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> ApiError:
    """A Failure Status with ``code``; ``reason`` defaults to the one kube uses for the code."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason if reason is not None else reason_for_code(code),
        "code": code,
    }
    if details:
        status["details"] = details
    return ApiError(status, headers=headers)


def success_status(*, code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"kind": "Status", "status": "Success", ...}`` (e.g. eviction's 201 answer)."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": code,
    }
    if details:
        status["details"] = details
    return status


def _resource_details(rt: ResourceType, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    """``pods "x" not found`` (errors.NewNotFound)."""
    return status_error(
        code=404,
        message=f'{qualified_resource(rt)} "{name}" not found',
        details=_resource_details(rt, name),
    )


def already_exists(rt: ResourceType, name: str) -> ApiError:
    """``pods "x" already exists`` (errors.NewAlreadyExists)."""
    return status_error(
        code=409,
        reason="AlreadyExists",
        message=f'{qualified_resource(rt)} "{name}" already exists',
        details=_resource_details(rt, name),
    )


OBJECT_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def conflict(rt: ResourceType, name: str, detail: str = OBJECT_MODIFIED) -> ApiError:
    """``Operation cannot be fulfilled on pods "x": <detail>`` (errors.NewConflict)."""
    return status_error(
        code=409,
        reason="Conflict",
        message=f'Operation cannot be fulfilled on {qualified_resource(rt)} "{name}": {detail}',
        details=_resource_details(rt, name),
    )


def invalid(
    rt: ResourceType, name: str, causes: list[FieldCause], *, kind: str | None = None
) -> ApiError:
    """``Deployment.apps "x" is invalid: metadata.name: Invalid value: ...`` (errors.NewInvalid).

    The subject is the GroupKind (``Kind.group``; the store's own checks use the resource
    instead, e.g. ``leases.coordination.k8s.io``: pass ``kind``). One cause is printed bare,
    several as ``[a, b]``, as ``ToAggregate().Error()`` does.
    """
    texts = [f"{field}: {message}" for _, field, message in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    kind = kind or rt.kind
    qualified = f"{kind}.{rt.group}" if rt.group else kind
    details: dict[str, Any] = {"name": name, "kind": kind}
    if rt.group:
        details["group"] = rt.group
    details["causes"] = [
        {"reason": reason, "message": message, "field": field} for reason, field, message in causes
    ]
    return status_error(
        code=422,
        reason="Invalid",
        message=f'{qualified} "{name}" is invalid: {joined}',
        details=details,
    )


def bad_request(message: str) -> ApiError:
    return status_error(code=400, reason="BadRequest", message=message)


def forbidden(message: str) -> ApiError:
    return status_error(code=403, reason="Forbidden", message=message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return status_error(code=405, reason="MethodNotAllowed", message=message)


def unsupported_media_type(content_type: str) -> ApiError:
    """kube's handlers answer ``the body of the request was in an unknown format - accepted
    media types include: ...``."""
    return status_error(
        code=415,
        reason="UnsupportedMediaType",
        message=f"the body of the request was in an unknown format - accepted media types "
        f"include: {content_type}",
    )


def expired(message: str) -> ApiError:
    """410 with reason Expired (errors.NewResourceExpired / a too old continue token)."""
    return status_error(code=410, reason="Expired", message=message)


def too_many_requests(
    message: str, *, retry_after: float | None = None, causes: list[dict[str, str]] | None = None
) -> ApiError:
    details: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if retry_after is not None:
        seconds = max(1, round(retry_after))
        details["retryAfterSeconds"] = seconds
        headers["Retry-After"] = str(seconds)
    if causes:
        details["causes"] = causes
    return status_error(
        code=429, reason="TooManyRequests", message=message, details=details, headers=headers
    )


def internal_error(message: str) -> ApiError:
    """``Internal error occurred: <message>`` (errors.NewInternalError)."""
    return status_error(
        code=500,
        reason="InternalError",
        message=f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )
