"""``admission.k8s.io/v1`` ``AdmissionReview``: what the VPA webhook reads of a request and
writes in its response."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "AdmissionReview",
    "GroupVersionKind",
    "GroupVersionResource",
    "JsonPatchOperation",
    "Status",
    "StatusCause",
    "StatusDetails",
]


class GroupVersionKind(TypedDict, total=False):
    """``metav1.GroupVersionKind``."""

    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict, total=False):
    """``metav1.GroupVersionResource``."""

    group: str
    version: str
    resource: str


class _Object(TypedDict, total=False):
    """The ``object``/``oldObject`` of a request: any kind; its metadata is common."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta


class AdmissionRequest(TypedDict, total=False):
    """``AdmissionRequest``."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    name: str
    namespace: str
    operation: str
    object: _Object
    oldObject: _Object
    dryRun: bool


class StatusCause(TypedDict, total=False):
    """``metav1.StatusCause``: one field's error."""

    reason: str
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    """``metav1.StatusDetails``."""

    name: str
    group: str
    kind: str
    causes: list[StatusCause]


class ListMeta(TypedDict, total=False):
    """``metav1.ListMeta`` (a Status's ``metadata``; kubescale writes it empty)."""

    resourceVersion: str


class Status(TypedDict, total=False):
    """``metav1.Status``, as a response's ``status`` (Go field ``Result``)."""

    metadata: ListMeta
    status: str
    message: str
    reason: str
    details: StatusDetails
    code: int


class JsonPatchOperation(TypedDict):
    """One RFC 6902 operation of a response's ``patch`` (``patchType: JSONPatch``)."""

    op: str
    path: str
    value: NotRequired[Any]
    """Any JSON value: what the patched field holds (a string, a map, a whole object)."""


class AdmissionResponse(TypedDict, total=False):
    """``AdmissionResponse``. Upstream's Go field ``Result`` is the JSON key ``status``."""

    uid: str
    allowed: bool
    status: Status
    patch: str
    patchType: str
    warnings: list[str]


class AdmissionReview(TypedDict, total=False):
    """``AdmissionReview``."""

    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse
