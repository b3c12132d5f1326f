"""AdmissionReview requests, as the API server sends them to a webhook."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def admission_review(
    *,
    uid: str = "review-1",
    obj: Mapping[str, Any] | None = None,
    old_object: Mapping[str, Any] | None = None,
    operation: str = "CREATE",
    group: str = "",
    version: str = "v1",
    kind: str | None = "Pod",
    resource: str = "pods",
    sub_resource: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    dry_run: bool | None = None,
    request: Mapping[str, Any] | None = None,
    api_version: str = "admission.k8s.io/v1",
) -> dict[str, Any]:
    """An ``AdmissionReview`` with a ``request``: ``kind``/``resource`` from the given group,
    version, kind and resource; ``object``/``oldObject``/``namespace``/``name``/``dryRun``/
    ``subResource`` when given; ``request`` adds further request fields (``kind=None`` leaves
    out ``request.kind``)."""
    body: dict[str, Any] = {"uid": uid}
    if kind is not None:
        body["kind"] = {"group": group, "version": version, "kind": kind}
    body["resource"] = {"group": group, "version": version, "resource": resource}
    if sub_resource is not None:
        body["subResource"] = sub_resource
    if namespace is not None:
        body["namespace"] = namespace
    if name is not None:
        body["name"] = name
    body["operation"] = operation
    if obj is not None:
        body["object"] = dict(obj)
    if old_object is not None:
        body["oldObject"] = dict(old_object)
    if dry_run is not None:
        body["dryRun"] = dry_run
    body.update(request or {})
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": body}
