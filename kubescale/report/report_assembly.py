"""The report of a live cluster as plain data (what ``-o json`` prints, and the text and HTML
renderings read): pure, from a :class:`~kubescale.report.cluster_reading.ClusterReading` and the
model's recommendations.

Per workload (Deployment, StatefulSet, DaemonSet) with a VPA — or every workload with
``all_workloads`` — and per container of its pod template:

- current requests and limits (the template's: what the operator edits; CPU in millicores,
  memory in bytes, as ``MilliValue()``/``Value()``);
- the recommendation's lower bound, target and upper bound: the VPA's
  ``status.recommendation`` (source ``vpa``), else the model's (source ``model``);
- a verdict per resource: ``unset`` (no request: BestEffort for it), ``under`` (request below
  the lower bound: the VPA updater would evict to raise it — throttling or OOM risk), ``over``
  (above the upper bound: the updater would lower it), ``ok`` (within the bounds), ``none``
  (no recommendation yet);
- savings = max(0, request − target) × replicas and risk = max(0, target − request) ×
  replicas (an unset request counts as 0), integers in millicores and bytes.

The VPA updater's plan (``updater_plan``, :mod:`.updater_plan`): the evictions and in-place
resizes it would make now, each with its reason, decided by the updater's own decision on this
reading and written nowhere.

Per workload also its HPA (bounds, replicas, targets as ``kubectl get hpa`` prints them, and
the AbleToScale / ScalingActive / ScalingLimited conditions). Per node: allocatable, the
requests of its pods as kube-scheduler counts them
(:func:`kubescale.scheduling.pod_resources.pod_requests`), and usage from NodeMetrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, cast

from kubescale.base.times import format_time
from kubescale.controllers.vpa.model.cluster_state import VpaRecommendation
from kubescale.objects.containers import Container
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.objects.views import Meta, raw_spec, spec_of, status_of
from kubescale.rendering.kube_columns import hpa_targets
from kubescale.report.cluster_reading import ClusterReading
from kubescale.report.model_recommendations import (
    ModelRecommendations,
    WorkloadKey,
    workload_key,
)
from kubescale.report.updater_plan import updater_plan
from kubescale.scheduling.pod_resources import (
    amounts_of,
    container_amounts,
    node_allocatable,
    pod_requests,
    quantity_amount,
)

__all__ = ["assemble_report", "verdict"]

RESOURCES: Final = ("cpu", "memory")
_HPA_CONDITIONS: Final = ("AbleToScale", "ScalingActive", "ScalingLimited")
_DONE_PHASES: Final = frozenset({"Succeeded", "Failed"})


def verdict(
    *, request: int | None, lower: int | None, upper: int | None, target: int | None
) -> str:
    """``none`` / ``unset`` / ``under`` / ``over`` / ``ok`` (module docstring)."""
    if target is None:
        return "none"
    if request is None:
        return "unset"
    if lower is not None and request < lower:
        return "under"
    if upper is not None and request > upper:
        return "over"
    return "ok"


def _replicas(workload: Mapping[str, Any], pods: int) -> int:
    if workload.get("kind") == "DaemonSet":
        scheduled = status_of(workload).get("desiredNumberScheduled")
        return int(scheduled) if isinstance(scheduled, int) else pods
    replicas = spec_of(workload).get("replicas")
    return int(replicas) if isinstance(replicas, int) else 1


def _ref_key(namespace: str, ref: Any) -> tuple[str, str, str] | None:
    if not isinstance(ref, Mapping):
        return None
    return (namespace, str(ref.get("kind") or ""), str(ref.get("name") or ""))


def _by_target(objects: Sequence[Mapping[str, Any]], ref_field: str) -> dict[WorkloadKey, Any]:
    found: dict[WorkloadKey, Any] = {}
    for obj in objects:
        namespace = str(Meta(obj).raw.get("namespace") or "")
        key = _ref_key(namespace, spec_of(obj).get(ref_field))
        if key is not None and key not in found:
            found[key] = obj
    return found


def _bounds(entry: Mapping[str, Any] | None, resource: str) -> dict[str, int | None]:
    def amount(name: str) -> int | None:
        values = (entry or {}).get(name) or {}
        return quantity_amount(resource, values[resource]) if resource in values else None

    return {
        "lower": amount("lowerBound"),
        "target": amount("target"),
        "upper": amount("upperBound"),
    }


def _container(
    container: Container, recommendation: Mapping[str, Any] | None, replicas: int
) -> dict[str, Any]:
    requests = container_amounts(container, "requests")
    limits = container_amounts(container, "limits")
    result: dict[str, Any] = {"name": str(container.get("name") or "")}
    for resource in RESOURCES:
        bounds = _bounds(recommendation, resource)
        request = requests.get(resource)
        target = bounds["target"]
        have = request or 0
        result[resource] = {
            "request": request,
            "limit": limits.get(resource),
            **bounds,
            "verdict": verdict(
                request=request, lower=bounds["lower"], upper=bounds["upper"], target=target
            ),
            "savings": max(0, have - target) * replicas if target is not None else 0,
            "risk": max(0, target - have) * replicas if target is not None else 0,
        }
    return result


def _hpa(hpa: HorizontalPodAutoscaler | None) -> dict[str, Any] | None:
    if hpa is None:
        return None
    spec, status = spec_of(hpa), status_of(hpa)
    conditions = {
        str(c.get("type")): {"status": c.get("status"), "reason": c.get("reason", "")}
        for c in status.get("conditions") or []
        if c.get("type") in _HPA_CONDITIONS
    }
    return {
        "name": str(Meta(hpa).raw.get("name") or ""),
        "min_replicas": spec.get("minReplicas", 1),
        "max_replicas": spec.get("maxReplicas"),
        "current_replicas": status.get("currentReplicas"),
        "desired_replicas": status.get("desiredReplicas"),
        "targets": hpa_targets(hpa),
        "conditions": conditions,
    }


def _pods_of(workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> int:
    namespace, _, _ = workload_key(workload)
    selector_spec = spec_of(workload).get("selector")
    try:
        selector = label_selector_from_dict(
            selector_spec if isinstance(selector_spec, Mapping) else None
        )
    except SelectorError:
        return 0
    count = 0
    for pod in pods:
        metadata = Meta(pod).raw
        if metadata.get("namespace") != namespace:
            continue
        if status_of(pod).get("phase") in _DONE_PHASES:
            continue
        if selector.matches(metadata.get("labels") or {}):
            count += 1
    return count


def _node_rows(reading: ClusterReading) -> list[dict[str, Any]]:
    usage = {
        str(Meta(m).raw.get("name") or ""): amounts_of(m.get("usage")) for m in reading.node_metrics
    }
    requested: dict[str, dict[str, int]] = {}
    pod_count: dict[str, int] = {}
    for pod in reading.pods:
        node = str(spec_of(pod).get("nodeName") or "")
        if not node or status_of(pod).get("phase") in _DONE_PHASES:
            continue
        total = requested.setdefault(node, {"cpu": 0, "memory": 0})
        for resource, amount in pod_requests(pod).items():
            if resource in total:
                total[resource] += amount
        pod_count[node] = pod_count.get(node, 0) + 1
    rows = []
    for node_object in sorted(reading.nodes, key=lambda n: str(Meta(n).raw.get("name"))):
        name = str(Meta(node_object).raw.get("name") or "")
        allocatable = node_allocatable(node_object)
        asked = requested.get(name, {"cpu": 0, "memory": 0})
        used = usage.get(name)
        rows.append(
            {
                "name": name,
                "pods": pod_count.get(name, 0),
                **{
                    resource: {
                        "allocatable": allocatable.get(resource, 0),
                        "requested": asked[resource],
                        "usage": used.get(resource) if used is not None else None,
                    }
                    for resource in RESOURCES
                },
            }
        )
    return rows


def _recommendation_entries(
    source: VpaRecommendation | Mapping[str, Any] | None,
) -> dict[str, Mapping[str, Any]]:
    if source is None:
        return {}
    if isinstance(source, VpaRecommendation):
        entries: Sequence[Any] = source.container_recommendations
    else:
        entries = (status_of(source).get("recommendation") or {}).get(
            "containerRecommendations"
        ) or []
    return {str(e.get("containerName") or ""): e for e in entries if isinstance(e, Mapping)}


def assemble_report(
    reading: ClusterReading,
    *,
    now: datetime,
    namespace: str | None,
    all_workloads: bool,
    model: ModelRecommendations | None = None,
) -> dict[str, Any]:
    """The report (module docstring); JSON values only, workloads sorted by key."""
    vpas = _by_target(reading.vpas, "targetRef")
    hpas = _by_target(reading.hpas, "scaleTargetRef")
    workloads = []
    totals = {
        "workloads": 0,
        "with_vpa": 0,
        "with_recommendation": 0,
        "containers_under": 0,
        "containers_over": 0,
        **{f"{r}_{k}": 0 for r in RESOURCES for k in ("request", "target", "savings", "risk")},
    }
    for workload in sorted(reading.workloads, key=workload_key):
        key = workload_key(workload)
        vpa = vpas.get(key)
        if vpa is None and not all_workloads:
            continue
        recommendation: VpaRecommendation | Mapping[str, Any] | None = vpa
        source = "vpa" if vpa is not None else "none"
        if vpa is None and model is not None and key in model.by_workload:
            recommendation = model.by_workload[key]
            source = "model" if recommendation.has_recommendation else "none"
        entries = _recommendation_entries(recommendation)
        if vpa is not None and not entries:
            source = "none"
        pods = _pods_of(workload, reading.pods)
        replicas = _replicas(workload, pods)
        template: Any = raw_spec(spec_of(workload).get("template") or {}) or {}
        containers = [
            # the workloads are read untyped: a container of the template as the typed one
            _container(cast(Container, c), entries.get(str(c.get("name") or "")), replicas)
            for c in template.get("containers") or []
            if isinstance(c, Mapping)
        ]
        totals["workloads"] += 1
        totals["with_vpa"] += vpa is not None
        totals["with_recommendation"] += source != "none"
        for container in containers:
            for resource in RESOURCES:
                values = container[resource]
                totals[f"{resource}_request"] += (values["request"] or 0) * replicas
                totals[f"{resource}_target"] += (values["target"] or 0) * replicas
                totals[f"{resource}_savings"] += values["savings"]
                totals[f"{resource}_risk"] += values["risk"]
            verdicts = {container[r]["verdict"] for r in RESOURCES}
            totals["containers_under"] += bool(verdicts & {"under", "unset"})
            totals["containers_over"] += "over" in verdicts
        vpa_meta = Meta(vpa).raw if vpa is not None else {}
        update_policy = (spec_of(vpa).get("updatePolicy") if vpa is not None else None) or {}
        workloads.append(
            {
                "namespace": key[0],
                "kind": key[1],
                "name": key[2],
                "replicas": replicas,
                "pods": pods,
                "source": source,
                "vpa": (
                    {
                        "name": str(vpa_meta.get("name") or ""),
                        "update_mode": update_policy.get("updateMode", "Auto"),
                    }
                    if vpa is not None
                    else None
                ),
                "hpa": _hpa(hpas.get(key)),
                "containers": containers,
            }
        )
    return {
        "generated": format_time(now),
        "namespace": namespace or "",
        "all_workloads": all_workloads,
        "missing": list(reading.missing),
        "model": (
            {
                "live_samples": model.live_samples,
                "history_samples": model.history.samples_added if model.history else None,
                "history_error": model.history.error if model.history else None,
            }
            if model is not None
            else None
        ),
        "totals": totals,
        "workloads": workloads,
        "nodes": _node_rows(reading),
        "updater_plan": updater_plan(reading, now=now),
    }
