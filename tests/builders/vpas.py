"""VerticalPodAutoscalers and their recommendations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.objects.vpa import RecommendedPodResources, VerticalPodAutoscaler
from tests.builders.meta import manifest, metadata, stored_as, typed_builder

VPA_API_VERSION = "autoscaling.k8s.io/v1"


def target_ref(
    *, kind: str = "Deployment", name: str = "web", api_version: str | None = "apps/v1"
) -> dict[str, Any]:
    """A ``targetRef`` (``api_version=None`` leaves out ``apiVersion``)."""
    ref: dict[str, Any] = {}
    if api_version is not None:
        ref["apiVersion"] = api_version
    ref["kind"] = kind
    ref["name"] = name
    return ref


def container_recommendation(
    container_name: str,
    *,
    target: Mapping[str, str],
    lower_bound: Mapping[str, str] | None = None,
    upper_bound: Mapping[str, str] | None = None,
    uncapped_target: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"containerName": container_name, "target": dict(target)}
    for key, value in (
        ("lowerBound", lower_bound),
        ("upperBound", upper_bound),
        ("uncappedTarget", uncapped_target),
    ):
        if value is not None:
            entry[key] = dict(value)
    return entry


def pod_recommendation(*entries: Mapping[str, Any]) -> RecommendedPodResources:
    """A ``status.recommendation`` of ``entries`` (:func:`container_recommendation` or plain
    dicts, kept as given: a test may hand a malformed one)."""
    return stored_as({"containerRecommendations": list(entries)}, RecommendedPodResources)


def vpa(
    *,
    name: str = "vpa",
    namespace: str | None = "default",
    uid: str | None = None,
    creation_timestamp: str | None = None,
    generation: int | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    target: Mapping[str, Any] | None = None,
    update_mode: str | None = None,
    container_policies: Sequence[Mapping[str, Any]] | None = None,
    spec: Mapping[str, Any] | None = None,
    recommendations: Sequence[Mapping[str, Any]] | None = None,
    targets: Mapping[str, Mapping[str, str]] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = VPA_API_VERSION,
) -> dict[str, Any]:
    """A VPA. ``target`` is the ``targetRef`` (left out when ``None``); ``update_mode`` and
    ``container_policies`` fill ``updatePolicy`` and ``resourcePolicy``; ``spec`` adds further
    spec fields (``spec`` is left out when empty, unless ``spec`` is given).
    ``recommendations`` (``containerRecommendations``) make a status, and ``status`` adds to
    it (or is the status); ``targets`` (container name → target) is a shorthand for
    recommendations with a target only."""
    body: dict[str, Any] = {}
    if target is not None:
        body["targetRef"] = dict(target)
    if update_mode is not None:
        body["updatePolicy"] = {"updateMode": update_mode}
    if container_policies is not None:
        body["resourcePolicy"] = {"containerPolicies": [dict(p) for p in container_policies]}
    body.update(spec or {})
    if targets is not None:
        recommendations = [
            container_recommendation(name, target=target) for name, target in targets.items()
        ]
    status_body: dict[str, Any] | None = None
    if recommendations is not None:
        status_body = {
            "recommendation": {"containerRecommendations": [dict(r) for r in recommendations]}
        }
    if status is not None:
        status_body = {**(status_body or {}), **status}
    meta = metadata(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        creation_timestamp=creation_timestamp,
        generation=generation,
        resource_version=resource_version,
    )
    spec_body = body if body or spec is not None else None
    return manifest(api_version, "VerticalPodAutoscaler", meta, spec=spec_body, status=status_body)


typed_vpa = typed_builder(vpa, VerticalPodAutoscaler)
"""``vpa()`` typed as :class:`kubescale.objects.vpa.VerticalPodAutoscaler`."""
