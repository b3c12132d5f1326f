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

JSON is read and written with orjson (the standard library's decoder was a tenth of a request's
time), and every body is read exactly as the standard library reads it: what orjson refuses but
the standard library reads — a lone surrogate escape, a byte-order mark, UTF-16, ``NaN`` — is
read by the standard library, and so is a body with an integer orjson would read differently
(:func:`decode_json`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from kubescale.objects.admission_review import (
    AdmissionResponse,
    AdmissionReview,
    JsonPatchOperation,
    Status,
)

__all__ = [
    "ADMISSION_REVIEW_VERSION",
    "BAD_REVIEW_REASONS",
    "BadReview",
    "ReviewRequest",
    "decode_json",
    "encode_json",
    "parse_review",
    "peek_uid",
    "pod_answer_template",
    "review_response",
    "split_uid",
    "uid_is_cut",
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

_UID_FIELD: Final = b'"uid":'
_EMPTY_UID: Final = b'"uid":""'
_JSON_SPACE: Final = b" \t\r\n"
_PLAIN_UID: Final = re.compile(rb"[ !#-\[\]-~]{1,256}")
"""Printable ASCII without ``"`` and ``\\``: the encoder writes it back as it is."""
_PROBE: Final = "kubescale-answer-memo-probe"


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
    old_object: object
    """``request.oldObject`` as sent (declared before ``object``, whose name hides the type)."""
    object: object
    """``request.object`` as sent: untrusted JSON, not checked to be an object (the handler
    decodes it)."""


@dataclass(frozen=True, kw_only=True)
class BadReview:
    """A request that cannot be processed: why, and its uid if it could be read."""

    reason: str
    detail: str
    uid: str = ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


_LONG_DIGITS: Final = re.compile(rb"[0-9]{19}")
"""19 digits in a row: every integer literal outside orjson's exact range has them."""


def decode_json(body: bytes) -> object:
    """``json.loads(body)``, by orjson when it reads the body the same (module docstring);
    raises ``ValueError`` or ``RecursionError`` as ``json.loads`` does. Untrusted JSON: the
    caller checks what it got.

    orjson does not raise on an integer outside ``[-2**63, 2**64)``: it reads it as a float
    (``18446744073709551616`` -> ``1.8446744073709552e+19``) where ``json.loads`` keeps the
    exact ``int`` — a quantity sent as a JSON number would change value. Such a literal has at
    least 19 digits (``-9223372036854775809``), so a body with 19 digits in a row (an integer,
    or digits in a string or a long fraction: read the same either way) is read by the
    standard library."""
    if _LONG_DIGITS.search(body) is not None:
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def encode_json(document: object) -> bytes:
    """Compact UTF-8 JSON of a review (orjson; the standard library for what orjson cannot
    write: an integer beyond 64 bits, a lone surrogate read from a ``\\ud800`` escape)."""
    try:
        return orjson.dumps(document)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(document, separators=(",", ":")).encode()


def parse_review(body: bytes) -> ReviewRequest | BadReview:
    """Read an AdmissionReview body."""
    try:
        document = decode_json(body)
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
    patches: Sequence[JsonPatchOperation] = (),
    encoded_patch: str = "",
    status: Status | None = None,
    warnings: Sequence[str] = (),
) -> AdmissionReview:
    """The AdmissionReview answering request ``uid``.

    The patch is ``patches``, or ``encoded_patch`` when it is already encoded (base64 of the
    compact JSON, as a cached pod decision keeps it).
    """
    response: AdmissionResponse = {"uid": uid, "allowed": allowed}
    if status is not None:
        response["status"] = status
    if patches and not encoded_patch:
        encoded = json.dumps(list(patches), separators=(",", ":")).encode()
        encoded_patch = base64.b64encode(encoded).decode("ascii")
    if encoded_patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = encoded_patch
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": ADMISSION_REVIEW_VERSION, "kind": "AdmissionReview", "response": response}


# -- the question: a body without its uid ----------------------------------------------------
#
# kube-apiserver sends every pod of a ReplicaSet as the same AdmissionReview bytes except
# ``request.uid`` (the pod's name is generated later, its uid is empty), so the body without
# its uid is the question the memo answers (:mod:`kubescale.controllers.vpa.admission.
# admission_memo`). Only a uid that is plain printable ASCII (no quote, no backslash) is cut, so
# the spliced bytes are exactly what the JSON encoder writes for it; and an answer is remembered
# only when the first ``"uid":`` field *is* ``request.uid`` (:func:`uid_is_cut`).


def split_uid(body: bytes) -> tuple[bytes, bytes] | None:
    """``(question, uid)``: ``body`` without the value of its first ``"uid":"`` field, and
    that value; ``None`` when there is none or it is not plain."""
    span = _uid_span(body)
    if span is None:
        return None
    value, end = span
    return body[:value] + body[end:], body[value:end]


def _uid_span(body: bytes) -> tuple[int, int] | None:
    """Where the value of the first ``"uid":`` field lies (inside its quotes), if plain."""
    start = body.find(_UID_FIELD)
    if start < 0:
        return None
    quote = start + len(_UID_FIELD)
    while body[quote : quote + 1] in _JSON_SPACE and quote < len(body):
        quote += 1
    if body[quote : quote + 1] != b'"':
        return None
    value = quote + 1
    end = body.find(b'"', value)
    if end < 0 or not _PLAIN_UID.fullmatch(body, value, end):
        return None
    return value, end


def uid_is_cut(body: bytes) -> bool:
    """Whether :func:`split_uid` cuts ``request.uid`` out of ``body``: the body is read again
    with a probe value there, and must come back with the probe as its uid. So two bodies with
    the same question differ only in ``request.uid``."""
    span = _uid_span(body)
    if span is None:
        return False
    value, end = span
    probe = parse_review(body[:value] + _PROBE.encode() + body[end:])
    return probe.uid == _PROBE


def pod_answer_template(encoded_patch: str) -> tuple[bytes, bytes]:
    """The bytes of ``encode_json(review_response(uid=uid, encoded_patch=encoded_patch))``
    before and after the uid's JSON string, which depend only on the patch (one ReplicaSet's
    pods share one patch): an answer spliced around the uid written by the same encoder is
    byte for byte the encoded review."""
    whole = encode_json(review_response(uid="", encoded_patch=encoded_patch))
    head, tail = whole.split(_EMPTY_UID, 1)  # base64 never holds a quote
    return head + _UID_FIELD, tail
