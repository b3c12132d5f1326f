"""Values as kube prints them: ages (``duration.HumanDuration``) and an HPA's targets
(``formatHPAMetrics``). Shared by the in-process API server's ``kubectl get`` tables
(:mod:`kubescale.sim.apiserver.tables`) and ``kubescale report``."""

from __future__ import annotations

from typing import Final

from kubescale.objects.hpa import (
    HorizontalPodAutoscaler,
    MetricSpec,
    MetricStatus,
    MetricTarget,
    MetricValueStatus,
)
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import spec_of, status_of

__all__ = ["hpa_targets", "human_duration"]


def human_duration(seconds: float) -> str:
    """apimachinery's ``duration.HumanDuration`` (what every Age column shows)."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    whole = int(seconds)
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def _quantity_text(value: object) -> str:
    try:
        return str(Quantity.from_json(value))
    except QuantityError:
        return str(value)


def _source(
    spec: MetricSpec, status: MetricStatus | None, source: str
) -> tuple[str, MetricTarget, MetricValueStatus]:
    """The metric's name, its target and its current value, from the ``source`` block of the
    spec and of the status (``{}`` when missing)."""
    current = status or MetricStatus()
    if source == "resource":
        resource = spec.get("resource") or {}
        return (
            str(resource.get("name") or ""),
            resource.get("target") or {},
            (current.get("resource") or {}).get("current") or {},
        )
    if source == "containerResource":
        container = spec.get("containerResource") or {}
        return (
            str(container.get("name") or ""),
            container.get("target") or {},
            (current.get("containerResource") or {}).get("current") or {},
        )
    if source == "pods":
        pods = spec.get("pods") or {}
        return (
            str((pods.get("metric") or {}).get("name") or ""),
            pods.get("target") or {},
            (current.get("pods") or {}).get("current") or {},
        )
    if source == "object":
        obj = spec.get("object") or {}
        return (
            str((obj.get("metric") or {}).get("name") or ""),
            obj.get("target") or {},
            (current.get("object") or {}).get("current") or {},
        )
    external = spec.get("external") or {}
    return (
        str((external.get("metric") or {}).get("name") or ""),
        external.get("target") or {},
        (current.get("external") or {}).get("current") or {},
    )


def _metric_target(spec: MetricSpec, status: MetricStatus | None, source: str) -> str:
    """One ``formatHPAMetrics`` entry for an Object/External/Pods/Resource source."""
    name, target, current = _source(spec, status, source)
    if source in ("resource", "containerResource") and target.get("averageValue") is None:
        utilization = current.get("averageUtilization")
        now = f"{utilization}%" if utilization is not None else "<unknown>"
        wanted = target.get("averageUtilization")
        text = f"{now}/{wanted}%" if wanted is not None else f"{now}/<auto>"
    elif target.get("averageValue") is not None:
        value = current.get("averageValue")
        now = _quantity_text(value) if value is not None else "<unknown>"
        text = f"{now}/{_quantity_text(target['averageValue'])}"
        if source in ("object", "external"):
            text += " (avg)"
    else:
        value = current.get("value")
        now = _quantity_text(value) if value is not None else "<unknown>"
        text = f"{now}/{_quantity_text(target.get('value', '0'))}"
    return f"{name}: {text}" if name else text


_HPA_SOURCES: Final = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def hpa_targets(hpa: HorizontalPodAutoscaler) -> str:
    """``formatHPAMetrics``: each metric ``name: current/target`` in spec order, the status
    entry at the same index as its current value, at most two then ``+ N more...``."""
    specs = spec_of(hpa).get("metrics") or []
    statuses = status_of(hpa).get("currentMetrics") or []
    if not specs:
        return "<none>"
    entries: list[str] = []
    for index, spec in enumerate(specs):
        source = _HPA_SOURCES.get(str(spec.get("type")))
        if source is None:
            entries.append("<unknown type>")
            continue
        status = statuses[index] if index < len(statuses) else None
        entries.append(_metric_target(spec, status, source))
    if len(entries) > 2:
        return ", ".join(entries[:2]) + f" + {len(entries) - 2} more..."
    return ", ".join(entries)
