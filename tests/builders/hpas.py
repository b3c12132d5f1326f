"""HorizontalPodAutoscalers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.builders.meta import manifest, metadata


def scale_target_ref(
    *, kind: str = "Deployment", name: str = "web", api_version: str | None = "apps/v1"
) -> dict[str, Any]:
    ref: dict[str, Any] = {}
    if api_version is not None:
        ref["apiVersion"] = api_version
    ref["kind"] = kind
    ref["name"] = name
    return ref


def resource_metric(
    name: str = "cpu", *, utilization: int | None = None, average_value: str | None = None
) -> dict[str, Any]:
    """An ``autoscaling/v2`` Resource metric with a Utilization or AverageValue target."""
    target: dict[str, Any]
    if average_value is not None:
        target = {"type": "AverageValue", "averageValue": average_value}
    else:
        target = {"type": "Utilization", "averageUtilization": utilization}
    return {"type": "Resource", "resource": {"name": name, "target": target}}


def hpa(
    *,
    name: str = "web",
    namespace: str | None = "default",
    uid: str | None = None,
    creation_timestamp: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    target: Mapping[str, Any] | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    metrics: Sequence[Mapping[str, Any]] | None = None,
    behavior: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = "autoscaling/v2",
) -> dict[str, Any]:
    """An HPA; a ``None`` field is left out of ``spec`` (``target`` is ``scaleTargetRef``)."""
    body: dict[str, Any] = {}
    if target is not None:
        body["scaleTargetRef"] = dict(target)
    if min_replicas is not None:
        body["minReplicas"] = min_replicas
    if max_replicas is not None:
        body["maxReplicas"] = max_replicas
    if metrics is not None:
        body["metrics"] = [dict(m) for m in metrics]
    if behavior is not None:
        body["behavior"] = dict(behavior)
    body.update(spec or {})
    meta = metadata(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        creation_timestamp=creation_timestamp,
    )
    return manifest(
        api_version,
        "HorizontalPodAutoscaler",
        meta,
        spec=body if body or spec is not None else None,
        status=dict(status) if status is not None else None,
    )
