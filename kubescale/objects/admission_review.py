"""``admission.k8s.io/v1`` ``AdmissionReview``: what the VPA webhook reads of a request and
writes in its response."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "AdmissionReview",
    "GroupVersionKind",
    "GroupVersionResource",
    "Status",
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


class Status(TypedDict, total=False):
    """``metav1.Status`` as a response's ``result``."""

    code: int
    message: str
    reason: str


class AdmissionResponse(TypedDict, total=False):
    """``AdmissionResponse``."""

    uid: str
    allowed: bool
    result: Status
    patch: str
    patchType: str
    warnings: list[str]


class AdmissionReview(TypedDict, total=False):
    """``AdmissionReview``."""

    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse
