"""Nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.builders.meta import manifest, metadata


def ready_condition(
    status: str = "True", *, last_transition_time: str | None = None
) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "Ready", "status": status}
    if last_transition_time is not None:
        condition["lastTransitionTime"] = last_transition_time
    return condition


def node(
    *,
    name: str = "n1",
    uid: str | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    creation_timestamp: str | None = None,
    provider_id: str | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    unschedulable: bool | None = None,
    spec: Mapping[str, Any] | None = None,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = "v1",
) -> dict[str, Any]:
    """A Node. ``spec`` is present when one of its fields is given (``spec={}`` for an empty
    one), ``status`` likewise (``capacity``, ``allocatable``, ``conditions``, ``status``)."""
    spec_body: dict[str, Any] | None = None
    if provider_id is not None or taints is not None or unschedulable is not None or spec:
        spec_body = {}
    if spec is not None:
        spec_body = {}
    if spec_body is not None:
        if provider_id is not None:
            spec_body["providerID"] = provider_id
        if taints is not None:
            spec_body["taints"] = [dict(t) for t in taints]
        if unschedulable is not None:
            spec_body["unschedulable"] = unschedulable
        spec_body.update(spec or {})
    status_body: dict[str, Any] | None = None
    if capacity is not None or allocatable is not None or conditions is not None or status:
        status_body = {}
    if status is not None:
        status_body = {}
    if status_body is not None:
        if capacity is not None:
            status_body["capacity"] = dict(capacity)
        if allocatable is not None:
            status_body["allocatable"] = dict(allocatable)
        if conditions is not None:
            status_body["conditions"] = [dict(c) for c in conditions]
        status_body.update(status or {})
    meta = metadata(
        name=name,
        uid=uid,
        resource_version=resource_version,
        labels=labels,
        annotations=annotations,
        creation_timestamp=creation_timestamp,
    )
    return manifest(api_version, "Node", meta, spec=spec_body, status=status_body)
