"""AdmissionReview ``admission.k8s.io/v1`` in and out: reading a request, writing a response.

Pure: bytes and dicts in, dataclasses and dicts out. The routes
(:mod:`kubescale.webhook.admission_routes`) decide; this module only knows the envelope.

Reading follows upstream's ``json.Unmarshal`` into ``admissionv1.AdmissionReview``: the
top-level ``apiVersion``/``kind`` are not checked, unknown fields are ignored. What upstream
would crash on or reject is a :class:`BadReview` with a reason (one of :data:`BAD_REVIEW_REASONS`)
and, when it could be read, the request's uid — so that even then the answer carries the uid
kube-apiserver checks. A response is always an ``AdmissionReview`` of ``admission.k8s.io/v1``
with ``response.uid`` and ``response.allowed``; a patch goes as ``patchType: JSONPatch`` with the
base64 JSON patch, a denial as ``response.status`` (a ``metav1.Status``), warnings as
``response.warnings``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ADMISSION_REVIEW_VERSION",
    "BAD_REVIEW_REASONS",
    "BadReview",
    "ReviewRequest",
    "parse_review",
    "peek_uid",
    "review_response",
]

ADMISSION_REVIEW_VERSION: Final = "admission.k8s.io/v1"

BAD_REVIEW_REASONS: Final = (
    "content-type",
    "malformed-json",
    "not-an-object",
    "missing-request",
    "missing-uid",
    "missing-resource",
    "missing-object",
    "unsupported-resource",
    "invalid-object",
    "body-too-large",
    "internal-error",
)
"""Every reason a request is answered without being processed (the metric's label values)."""


@dataclass(frozen=True, kw_only=True)
class ReviewRequest:
    """The parts of ``request`` the handlers use."""

    uid: str
    group: str
    version: str
    resource: str
    operation: str
    namespace: str
    name: str
    object: Any
    """``request.object`` as sent (not checked to be an object: the handler checks)."""
    old_object: Any


@dataclass(frozen=True, kw_only=True)
class BadReview:
    """A request that cannot be processed: why, and its uid if it could be read."""

    reason: str
    detail: str
    uid: str = ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def parse_review(body: bytes) -> ReviewRequest | BadReview:
    """Read an AdmissionReview body."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return BadReview(reason="malformed-json", detail=f"cannot decode the body: {exc}")
    if not isinstance(document, dict):
        return BadReview(reason="not-an-object", detail="the body is not a JSON object")
    request = document.get("request")
    if not isinstance(request, dict):
        return BadReview(reason="missing-request", detail="the AdmissionReview has no request")
    uid = _text(request.get("uid"))
    if not uid:
        return BadReview(reason="missing-uid", detail="request.uid is missing")
    resource = request.get("resource")
    if not isinstance(resource, dict) or not _text(resource.get("resource")):
        return BadReview(reason="missing-resource", detail="request.resource is missing", uid=uid)
    return ReviewRequest(
        uid=uid,
        group=_text(resource.get("group")),
        version=_text(resource.get("version")),
        resource=_text(resource.get("resource")),
        operation=_text(request.get("operation")),
        namespace=_text(request.get("namespace")),
        name=_text(request.get("name")),
        object=request.get("object"),
        old_object=request.get("oldObject"),
    )


def peek_uid(body: bytes) -> str:
    """The ``request.uid`` of a body that is otherwise not processed (``""`` if unreadable)."""
    parsed = parse_review(body)
    return parsed.uid


def review_response(
    *,
    uid: str,
    allowed: bool = True,
    patches: Sequence[Mapping[str, Any]] = (),
    status: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The AdmissionReview answering request ``uid``."""
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if status is not None:
        response["status"] = dict(status)
    if patches:
        encoded = json.dumps(list(patches), separators=(",", ":")).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(encoded).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": ADMISSION_REVIEW_VERSION, "kind": "AdmissionReview", "response": response}
