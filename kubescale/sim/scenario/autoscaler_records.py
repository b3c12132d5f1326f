"""What the autoscalers of a run held at every step: each VPA's recommendation band and each
HPA's replicas against its metric and target, for the report's charts.

The runner calls :meth:`AutoscalerRecord.record` once per step with the store's VPAs and HPAs
(the objects as the API server holds them after the step's loops ran); a record is the state
that holds until the next one, like the timeline's. Quantities are read exactly
(:mod:`kubescale.objects.quantities`) and kept as floats in the report's units: CPU in cores,
memory in bytes, an HPA metric as the number its target is written in (a utilization in
percent, an average value as a plain number).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubescale.objects.quantities import QuantityError, parse_quantity

from .time_statistics import rounded_or_none

__all__ = ["AutoscalerRecord", "quantity_or_none"]

_BOUNDS = ("lowerBound", "target", "upperBound")
_FIELDS = ("lower", "target", "upper")


def quantity_or_none(value: object) -> float | None:
    """A quantity as a float, ``None`` when absent or unreadable."""
    if value is None:
        return None
    try:
        return parse_quantity(str(value)).as_float()
    except QuantityError:
        return None


@dataclass
class _VpaContainer:
    index: list[int] = field(default_factory=list)
    cpu: dict[str, list[float | None]] = field(
        default_factory=lambda: {name: [] for name in _FIELDS}
    )
    memory: dict[str, list[float | None]] = field(
        default_factory=lambda: {name: [] for name in _FIELDS}
    )


@dataclass
class _Vpa:
    namespace: str
    name: str
    target: str
    mode: str
    containers: dict[str, _VpaContainer] = field(default_factory=dict)


@dataclass
class _Hpa:
    namespace: str
    name: str
    target: str
    min_replicas: int
    max_replicas: int
    metric: str
    metric_target: float | None
    index: list[int] = field(default_factory=list)
    current_replicas: list[int] = field(default_factory=list)
    desired_replicas: list[int] = field(default_factory=list)
    metric_current: list[float | None] = field(default_factory=list)


def _target_name(ref: Mapping[str, Any] | None) -> str:
    ref = ref or {}
    return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"


def _metric(spec_metric: Mapping[str, Any]) -> tuple[str, float | None, str, str]:
    """Label, target value, and where the current value sits in ``currentMetrics`` (the
    source's key and the target's field) of an ``autoscaling/v2`` metric spec."""
    kind = str(spec_metric.get("type") or "")
    key = {"Resource": "resource", "ContainerResource": "containerResource"}.get(
        kind, kind[:1].lower() + kind[1:]
    )
    source = spec_metric.get(key) or {}
    target = source.get("target") or {}
    name = str(source.get("name") or (source.get("metric") or {}).get("name") or kind)
    if target.get("type") == "Utilization":
        return (
            f"{name} utilization (%)",
            float(target.get("averageUtilization") or 0),
            key,
            ("averageUtilization"),
        )
    field_name = "averageValue" if target.get("type") == "AverageValue" else "value"
    return f"{name} ({field_name})", quantity_or_none(target.get(field_name)), key, field_name


class AutoscalerRecord:
    """VPAs and HPAs step by step (module docstring)."""

    def __init__(self) -> None:
        self.vpas: dict[tuple[str, str], _Vpa] = {}
        self.hpas: dict[tuple[str, str], _Hpa] = {}

    def record(
        self, index: int, *, vpas: Sequence[Mapping[str, Any]], hpas: Sequence[Mapping[str, Any]]
    ) -> None:
        for vpa in vpas:
            self._record_vpa(index, vpa)
        for hpa in hpas:
            self._record_hpa(index, hpa)

    def _record_vpa(self, index: int, vpa: Mapping[str, Any]) -> None:
        metadata = vpa.get("metadata") or {}
        spec = vpa.get("spec") or {}
        key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        columns = self.vpas.get(key)
        if columns is None:
            columns = _Vpa(
                namespace=key[0],
                name=key[1],
                target=_target_name(spec.get("targetRef")),
                mode=str((spec.get("updatePolicy") or {}).get("updateMode") or "Auto"),
            )
            self.vpas[key] = columns
        recommendation = (vpa.get("status") or {}).get("recommendation") or {}
        for entry in recommendation.get("containerRecommendations") or []:
            name = str(entry.get("containerName") or "")
            container = columns.containers.setdefault(name, _VpaContainer())
            container.index.append(index)
            for bound, label in zip(_BOUNDS, _FIELDS, strict=True):
                amounts = entry.get(bound) or {}
                container.cpu[label].append(quantity_or_none(amounts.get("cpu")))
                container.memory[label].append(quantity_or_none(amounts.get("memory")))

    def _record_hpa(self, index: int, hpa: Mapping[str, Any]) -> None:
        metadata = hpa.get("metadata") or {}
        spec = hpa.get("spec") or {}
        status = hpa.get("status") or {}
        key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        metrics = spec.get("metrics") or []
        label, target, source_key, field_name = (
            _metric(metrics[0]) if metrics else ("", None, "", "")
        )
        columns = self.hpas.get(key)
        if columns is None:
            columns = _Hpa(
                namespace=key[0],
                name=key[1],
                target=_target_name(spec.get("scaleTargetRef")),
                min_replicas=int(spec.get("minReplicas") or 1),
                max_replicas=int(spec.get("maxReplicas") or 0),
                metric=label,
                metric_target=target,
            )
            self.hpas[key] = columns
        current: float | None = None
        for entry in status.get("currentMetrics") or []:
            source = entry.get(source_key) if source_key else None
            if source:
                value = (source.get("current") or {}).get(field_name)
                current = (
                    float(value) if field_name == "averageUtilization" and value is not None
                    else quantity_or_none(value)
                )  # fmt: skip
                break
        columns.index.append(index)
        columns.current_replicas.append(int(status.get("currentReplicas") or 0))
        columns.desired_replicas.append(int(status.get("desiredReplicas") or 0))
        columns.metric_current.append(current)

    def report(self, times: Sequence[float]) -> dict[str, list[dict[str, Any]]]:
        """``vpas`` and ``hpas`` of the JSON report, sorted by namespace/name."""

        def at(index: Sequence[int]) -> list[float]:
            return [times[i] for i in index]

        def band(values: Mapping[str, Sequence[float | None]], unit: str) -> dict[str, Any]:
            return {k: [rounded_or_none(v, unit) for v in values[k]] for k in _FIELDS}

        vpas = [
            {
                "namespace": v.namespace,
                "name": v.name,
                "target": v.target,
                "mode": v.mode,
                "containers": [
                    {
                        "name": name,
                        "t": at(c.index),
                        "cpu": band(c.cpu, "cores"),
                        "memory": band(c.memory, "bytes"),
                    }
                    for name, c in sorted(v.containers.items())
                ],
            }
            for _, v in sorted(self.vpas.items())
        ]
        hpas = [
            {
                "namespace": h.namespace,
                "name": h.name,
                "target": h.target,
                "min_replicas": h.min_replicas,
                "max_replicas": h.max_replicas,
                "metric": h.metric,
                "metric_target": h.metric_target,
                "t": at(h.index),
                "current_replicas": h.current_replicas,
                "desired_replicas": h.desired_replicas,
                "metric_current": [rounded_or_none(v, "cores") for v in h.metric_current],
            }
            for _, h in sorted(self.hpas.items())
        ]
        return {"vpas": vpas, "hpas": hpas}
