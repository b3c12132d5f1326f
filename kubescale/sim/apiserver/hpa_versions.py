"""``autoscaling/v1`` HorizontalPodAutoscalers over the stored ``autoscaling/v2`` ones.

kube-apiserver serves HPAs at both versions from one storage version and converts on every
request (``pkg/apis/autoscaling/v1/conversion.go``). v1 has only
``spec.targetCPUUtilizationPercentage`` and ``status.currentCPUUtilizationPercentage``;
everything else round-trips through annotations (reference §3.1):

* ``autoscaling.alpha.kubernetes.io/metrics`` — the spec metrics other than the CPU
  utilization target, in autoscaling/v1's ``MetricSpec`` shape (``targetAverageUtilization``,
  ``metricName``, ``targetValue`` ...);
* ``autoscaling.alpha.kubernetes.io/current-metrics`` — the status metrics other than CPU
  utilization, in v1's ``MetricStatus`` shape;
* ``autoscaling.alpha.kubernetes.io/conditions`` — the status conditions;
* ``autoscaling.alpha.kubernetes.io/behavior`` — ``spec.behavior``.

A v1 object written back is converted to v2 with those annotations folded in and removed, the
CPU target appended after the annotated metrics, as upstream does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["V1", "V2", "v1_to_v2", "v2_to_v1"]

V1: Final = "autoscaling/v1"
V2: Final = "autoscaling/v2"
METRICS: Final = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS: Final = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS: Final = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR: Final = "autoscaling.alpha.kubernetes.io/behavior"
_ANNOTATIONS: Final = (METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR)
_FIELD: Final = {"ContainerResource": "containerResource"}


def _field(kind: str) -> str:
    return _FIELD.get(kind, kind[:1].lower() + kind[1:])


def _set(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _is_cpu_utilization(metric: Mapping[str, Any]) -> bool:
    resource = metric.get("resource") or {}
    target = resource.get("target") or {}
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and target.get("type") == "Utilization"
        and target.get("averageUtilization") is not None
    )


def _spec_metric_to_v1(metric: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(metric.get("type") or "")
    source = dict(metric.get(_field(kind)) or {})
    target = source.get("target") or {}
    ident = source.get("metric") or {}
    out: dict[str, Any] = {}
    if kind in ("Resource", "ContainerResource"):
        out["name"] = source.get("name")
        _set(out, "container", source.get("container"))
        _set(out, "targetAverageUtilization", target.get("averageUtilization"))
        _set(out, "targetAverageValue", target.get("averageValue"))
    elif kind == "Pods":
        out["metricName"] = ident.get("name")
        _set(out, "selector", ident.get("selector"))
        _set(out, "targetAverageValue", target.get("averageValue"))
    elif kind == "Object":
        out["target"] = source.get("describedObject")
        out["metricName"] = ident.get("name")
        _set(out, "selector", ident.get("selector"))
        _set(out, "targetValue", target.get("value"))
        _set(out, "averageValue", target.get("averageValue"))
    elif kind == "External":
        out["metricName"] = ident.get("name")
        _set(out, "metricSelector", ident.get("selector"))
        _set(out, "targetValue", target.get("value"))
        _set(out, "targetAverageValue", target.get("averageValue"))
    return {"type": kind, _field(kind): out} if out else {"type": kind}


def _spec_metric_to_v2(metric: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(metric.get("type") or "")
    source = dict(metric.get(_field(kind)) or {})
    out: dict[str, Any] = {}
    target: dict[str, Any] = {}
    if kind in ("Resource", "ContainerResource"):
        out["name"] = source.get("name")
        _set(out, "container", source.get("container"))
        if source.get("targetAverageUtilization") is not None:
            target = {
                "type": "Utilization",
                "averageUtilization": source["targetAverageUtilization"],
            }
        elif source.get("targetAverageValue") is not None:
            target = {"type": "AverageValue", "averageValue": source["targetAverageValue"]}
    elif kind == "Pods":
        out["metric"] = _identifier(source.get("metricName"), source.get("selector"))
        target = {"type": "AverageValue", "averageValue": source.get("targetAverageValue")}
    elif kind == "Object":
        out["describedObject"] = source.get("target")
        out["metric"] = _identifier(source.get("metricName"), source.get("selector"))
        if source.get("averageValue") is not None:
            target = {"type": "AverageValue", "averageValue": source["averageValue"]}
        else:
            target = {"type": "Value", "value": source.get("targetValue")}
    elif kind == "External":
        out["metric"] = _identifier(source.get("metricName"), source.get("metricSelector"))
        if source.get("targetAverageValue") is not None:
            target = {"type": "AverageValue", "averageValue": source["targetAverageValue"]}
        else:
            target = {"type": "Value", "value": source.get("targetValue")}
    if target:
        out["target"] = target
    return {"type": kind, _field(kind): out} if out else {"type": kind}


def _identifier(name: Any, selector: Any) -> dict[str, Any]:
    ident: dict[str, Any] = {"name": name}
    _set(ident, "selector", selector)
    return ident


def _status_metric_to_v1(metric: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(metric.get("type") or "")
    source = dict(metric.get(_field(kind)) or {})
    current = source.get("current") or {}
    ident = source.get("metric") or {}
    out: dict[str, Any] = {}
    if kind in ("Resource", "ContainerResource"):
        out["name"] = source.get("name")
        _set(out, "container", source.get("container"))
        _set(out, "currentAverageUtilization", current.get("averageUtilization"))
        _set(out, "currentAverageValue", current.get("averageValue"))
    elif kind == "Pods":
        out["metricName"] = ident.get("name")
        _set(out, "selector", ident.get("selector"))
        _set(out, "currentAverageValue", current.get("averageValue"))
    elif kind == "Object":
        out["target"] = source.get("describedObject")
        out["metricName"] = ident.get("name")
        _set(out, "selector", ident.get("selector"))
        _set(out, "currentValue", current.get("value"))
        _set(out, "averageValue", current.get("averageValue"))
    elif kind == "External":
        out["metricName"] = ident.get("name")
        _set(out, "metricSelector", ident.get("selector"))
        _set(out, "currentValue", current.get("value"))
        _set(out, "currentAverageValue", current.get("averageValue"))
    return {"type": kind, _field(kind): out} if out else {"type": kind}


def _status_metric_to_v2(metric: Mapping[str, Any]) -> dict[str, Any]:
    kind = str(metric.get("type") or "")
    source = dict(metric.get(_field(kind)) or {})
    out: dict[str, Any] = {}
    current: dict[str, Any] = {}
    if kind in ("Resource", "ContainerResource"):
        out["name"] = source.get("name")
        _set(out, "container", source.get("container"))
        _set(current, "averageUtilization", source.get("currentAverageUtilization"))
        _set(current, "averageValue", source.get("currentAverageValue"))
    elif kind == "Pods":
        out["metric"] = _identifier(source.get("metricName"), source.get("selector"))
        _set(current, "averageValue", source.get("currentAverageValue"))
    elif kind == "Object":
        out["describedObject"] = source.get("target")
        out["metric"] = _identifier(source.get("metricName"), source.get("selector"))
        _set(current, "value", source.get("currentValue"))
        _set(current, "averageValue", source.get("averageValue"))
    elif kind == "External":
        out["metric"] = _identifier(source.get("metricName"), source.get("metricSelector"))
        _set(current, "value", source.get("currentValue"))
        _set(current, "averageValue", source.get("currentAverageValue"))
    if out:
        out["current"] = current
    return {"type": kind, _field(kind): out} if out else {"type": kind}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def v2_to_v1(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A stored (v2) HPA as autoscaling/v1 returns it."""
    if obj.get("kind") != "HorizontalPodAutoscaler":
        return dict(obj)
    metadata = dict(obj.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec2 = obj.get("spec") or {}
    spec1: dict[str, Any] = {}
    for key in ("scaleTargetRef", "minReplicas", "maxReplicas"):
        _set(spec1, key, spec2.get(key))
    others: list[dict[str, Any]] = []
    for metric in spec2.get("metrics") or ():
        if "targetCPUUtilizationPercentage" not in spec1 and _is_cpu_utilization(metric):
            spec1["targetCPUUtilizationPercentage"] = metric["resource"]["target"][
                "averageUtilization"
            ]
        else:
            others.append(_spec_metric_to_v1(metric))
    if others:
        annotations[METRICS] = _dumps(others)
    if spec2.get("behavior") is not None:
        annotations[BEHAVIOR] = _dumps(spec2["behavior"])
    out: dict[str, Any] = {"kind": obj["kind"], "apiVersion": V1, "metadata": metadata}
    out["spec"] = spec1
    status2 = obj.get("status")
    if status2 is not None:
        status1: dict[str, Any] = {}
        for key in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas"):
            _set(status1, key, status2.get(key))
        current_others: list[dict[str, Any]] = []
        for metric in status2.get("currentMetrics") or ():
            resource = metric.get("resource") or {}
            utilization = (resource.get("current") or {}).get("averageUtilization")
            if (
                metric.get("type") == "Resource"
                and resource.get("name") == "cpu"
                and utilization is not None
                and "currentCPUUtilizationPercentage" not in status1
            ):
                status1["currentCPUUtilizationPercentage"] = utilization
            else:
                current_others.append(_status_metric_to_v1(metric))
        if current_others:
            annotations[CURRENT_METRICS] = _dumps(current_others)
        if status2.get("conditions"):
            annotations[CONDITIONS] = _dumps(status2["conditions"])
        status1.setdefault("currentReplicas", 0)
        status1.setdefault("desiredReplicas", 0)
        out["status"] = status1
    if annotations:
        metadata["annotations"] = annotations
    return out


def _load(annotations: Mapping[str, Any], key: str) -> Any:
    try:
        return json.loads(str(annotations[key])) if key in annotations else None
    except ValueError:
        return None


def v1_to_v2(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An autoscaling/v1 HPA as it is stored (v2), the round-trip annotations folded in."""
    metadata = dict(obj.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec1 = obj.get("spec") or {}
    spec2: dict[str, Any] = {}
    for key in ("scaleTargetRef", "minReplicas", "maxReplicas"):
        _set(spec2, key, spec1.get(key))
    metrics = [
        _spec_metric_to_v2(m) for m in _load(annotations, METRICS) or () if isinstance(m, dict)
    ]
    if spec1.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {
                        "type": "Utilization",
                        "averageUtilization": spec1["targetCPUUtilizationPercentage"],
                    },
                },
            }
        )
    if metrics:
        spec2["metrics"] = metrics
    behavior = _load(annotations, BEHAVIOR)
    if isinstance(behavior, dict):
        spec2["behavior"] = behavior
    out: dict[str, Any] = {"kind": obj.get("kind", "HorizontalPodAutoscaler"), "apiVersion": V2}
    status1 = obj.get("status")
    if status1 is not None:
        status2: dict[str, Any] = {}
        for key in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas"):
            _set(status2, key, status1.get(key))
        current = [
            _status_metric_to_v2(m)
            for m in _load(annotations, CURRENT_METRICS) or ()
            if isinstance(m, dict)
        ]
        if status1.get("currentCPUUtilizationPercentage") is not None:
            current.append(
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "current": {
                            "averageUtilization": status1["currentCPUUtilizationPercentage"]
                        },
                    },
                }
            )
        if current:
            status2["currentMetrics"] = current
        conditions = _load(annotations, CONDITIONS)
        if isinstance(conditions, list):
            status2["conditions"] = conditions
        out["status"] = status2
    for key in _ANNOTATIONS:
        annotations.pop(key, None)
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    out["metadata"] = metadata
    out["spec"] = spec2
    return out
