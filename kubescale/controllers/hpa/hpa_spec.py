"""An ``autoscaling/v2`` HorizontalPodAutoscaler read into typed values, with v2 defaulting.

Upstream's controller reads HPAs the API server has already defaulted
(``pkg/apis/autoscaling/v2/defaults.go``, reference §0 and §2.5); kubescale applies the same
defaults itself (idempotent on an already-defaulted object), so an HPA stored by an API server
that did not default it reads the same:

* no ``metrics`` → one Resource metric ``cpu`` with target Utilization **80** %;
* no ``minReplicas`` → 1;
* ``behavior`` set → each direction filled from upstream's defaults field by field
  (``copyHPAScalingRules``): scaleUp window 0, selectPolicy Max, policies Pods 4 / 15 s and
  Percent 100 / 15 s; scaleDown window nil (the controller fills it from
  ``--horizontal-pod-autoscaler-downscale-stabilization``), selectPolicy Max, policy Percent
  100 / 15 s. Without ``behavior`` nothing is defaulted: the legacy rules apply (§2.3).

Metric specs keep their raw dicts next to the typed fields: the status echoes ``metric`` and
``describedObject`` as given, and an unknown ``type`` is reported by the replica computation
(``InvalidMetricSourceType``), not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, cast

from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.meta import CrossVersionObjectReference, LabelSelectorObject
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, spec_of

__all__ = [
    "DEFAULT_CPU_UTILIZATION",
    "HpaSpec",
    "HpaSpecError",
    "MetricSpec",
    "MetricTarget",
    "ScalingPolicy",
    "ScalingRules",
    "default_scale_down_rules",
    "default_scale_up_rules",
    "hpa_key",
    "parse_hpa",
]

DEFAULT_CPU_UTILIZATION: Final = 80
DEFAULT_MIN_REPLICAS: Final = 1
SELECT_MAX: Final = "Max"
SELECT_MIN: Final = "Min"
SELECT_DISABLED: Final = "Disabled"
POLICY_PODS: Final = "Pods"
POLICY_PERCENT: Final = "Percent"


class HpaSpecError(ValueError):
    """A field of the HPA that cannot be read; the message names it."""


@dataclass(frozen=True, kw_only=True)
class MetricTarget:
    """``MetricTarget``: values in milli-units (``Quantity.MilliValue``, rounded up)."""

    type: str
    value_milli: int | None = None
    average_value_milli: int | None = None
    average_utilization: int | None = None


@dataclass(frozen=True, kw_only=True)
class MetricSpec:
    """One ``spec.metrics[]`` entry."""

    type: str
    source: Mapping[str, object] = field(default_factory=dict)
    """The raw ``resource``/``pods``/``object``/``containerResource``/``external`` block (as
    sent: its fields are read, validated, into the ones below)."""
    target: MetricTarget | None = None
    resource_name: str = ""
    container: str = ""
    metric_name: str = ""
    metric_selector: LabelSelectorObject | None = None
    described_object: CrossVersionObjectReference | None = None


@dataclass(frozen=True, kw_only=True)
class ScalingPolicy:
    type: str
    value: int
    period_seconds: int


@dataclass(frozen=True, kw_only=True)
class ScalingRules:
    """``HPAScalingRules`` after defaulting."""

    stabilization_window_seconds: int | None
    select_policy: str
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None
    """``tolerance`` (KEP-4951) as ``AsApproximateFloat64``; None when unset."""


@dataclass(frozen=True, kw_only=True)
class Behavior:
    scale_up: ScalingRules
    scale_down: ScalingRules


@dataclass(frozen=True, kw_only=True)
class HpaSpec:
    namespace: str
    name: str
    target_api_version: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    behavior: Behavior | None
    selection_strategy: str = "LabelSelector"
    generation: int = 0


def default_scale_up_rules() -> ScalingRules:
    return ScalingRules(
        stabilization_window_seconds=0,
        select_policy=SELECT_MAX,
        policies=(
            ScalingPolicy(type=POLICY_PODS, value=4, period_seconds=15),
            ScalingPolicy(type=POLICY_PERCENT, value=100, period_seconds=15),
        ),
    )


def default_scale_down_rules() -> ScalingRules:
    return ScalingRules(
        stabilization_window_seconds=None,
        select_policy=SELECT_MAX,
        policies=(ScalingPolicy(type=POLICY_PERCENT, value=100, period_seconds=15),),
    )


def hpa_key(hpa: HorizontalPodAutoscaler) -> tuple[str, str]:
    meta = Meta(hpa).raw
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HpaSpecError(f"{path}: must be an integer, got {value!r}")
    return value


def _milli(value: object, path: str) -> int:
    try:
        return Quantity.from_json(value).milli_value()
    except QuantityError as err:
        raise HpaSpecError(f"{path}: {err}") from None


def _target(raw: object, path: str) -> MetricTarget | None:
    if not isinstance(raw, Mapping):
        return None
    value = raw.get("value")
    average = raw.get("averageValue")
    utilization = raw.get("averageUtilization")
    return MetricTarget(
        type=str(raw.get("type") or ""),
        value_milli=_milli(value, f"{path}.value") if value is not None else None,
        average_value_milli=_milli(average, f"{path}.averageValue")
        if average is not None
        else None,
        average_utilization=_int(utilization, f"{path}.averageUtilization")
        if utilization is not None
        else None,
    )


_SOURCE_FIELDS: Final = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def _metric(raw: object, index: int) -> MetricSpec:
    path = f"spec.metrics[{index}]"
    if not isinstance(raw, Mapping):
        raise HpaSpecError(f"{path}: must be an object")
    kind = str(raw.get("type") or "")
    source_field = _SOURCE_FIELDS.get(kind)
    if source_field is None:
        return MetricSpec(type=kind)
    source = raw.get(source_field)
    if not isinstance(source, Mapping):
        source = {}
    metric = source.get("metric") if isinstance(source.get("metric"), Mapping) else {}
    assert isinstance(metric, Mapping)
    selector = metric.get("selector")
    described = source.get("describedObject")
    return MetricSpec(
        type=kind,
        source=source,
        target=_target(source.get("target"), f"{path}.{source_field}.target"),
        resource_name=str(source.get("name") or ""),
        container=str(source.get("container") or ""),
        metric_name=str(metric.get("name") or ""),
        # Checked to be JSON objects; their fields are read through the TypedDicts (``get``).
        metric_selector=cast(LabelSelectorObject, selector)
        if isinstance(selector, Mapping)
        else None,
        described_object=cast(CrossVersionObjectReference, described)
        if isinstance(described, Mapping)
        else None,
    )


def _rules(raw: object, defaults: ScalingRules, path: str) -> ScalingRules:
    """``copyHPAScalingRules``: every field set in ``raw`` overrides the default."""
    if not isinstance(raw, Mapping):
        return defaults
    window = raw.get("stabilizationWindowSeconds")
    select = raw.get("selectPolicy")
    policies_raw = raw.get("policies")
    tolerance = raw.get("tolerance")
    policies = defaults.policies
    if policies_raw is not None:
        if not isinstance(policies_raw, list):
            raise HpaSpecError(f"{path}.policies: must be a list")
        parsed: list[ScalingPolicy] = []
        for i, policy in enumerate(policies_raw):
            if not isinstance(policy, Mapping):
                raise HpaSpecError(f"{path}.policies[{i}]: must be an object")
            parsed.append(
                ScalingPolicy(
                    type=str(policy.get("type") or ""),
                    value=_int(policy.get("value"), f"{path}.policies[{i}].value"),
                    period_seconds=_int(
                        policy.get("periodSeconds"), f"{path}.policies[{i}].periodSeconds"
                    ),
                )
            )
        policies = tuple(parsed)
    tolerance_value: float | None = None
    if tolerance is not None:
        try:
            tolerance_value = Quantity.from_json(tolerance).as_float()
        except QuantityError as err:
            raise HpaSpecError(f"{path}.tolerance: {err}") from None
    return ScalingRules(
        stabilization_window_seconds=_int(window, f"{path}.stabilizationWindowSeconds")
        if window is not None
        else defaults.stabilization_window_seconds,
        select_policy=str(select) if select is not None else defaults.select_policy,
        policies=policies,
        tolerance=tolerance_value,
    )


def parse_hpa(hpa: HorizontalPodAutoscaler) -> HpaSpec:
    """The HPA's spec, defaulted as ``autoscaling/v2`` defaults it (module docstring).

    The HPA is the API server's JSON, typed but not yet validated: this is where its spec is
    checked, so the spec is read as plain JSON (``object`` values, each checked) here."""
    meta = Meta(hpa).raw
    spec: Mapping[str, object] = spec_of(hpa)
    if not isinstance(spec, Mapping):
        raise HpaSpecError("spec: must be an object")
    ref = spec.get("scaleTargetRef") or {}
    if not isinstance(ref, Mapping):
        raise HpaSpecError("spec.scaleTargetRef: must be an object")
    min_raw = spec.get("minReplicas")
    metrics_raw = spec.get("metrics")
    if metrics_raw is None or metrics_raw == []:
        metrics: tuple[MetricSpec, ...] = (
            MetricSpec(
                type="Resource",
                source={
                    "name": "cpu",
                    "target": {
                        "type": "Utilization",
                        "averageUtilization": DEFAULT_CPU_UTILIZATION,
                    },
                },
                target=MetricTarget(
                    type="Utilization", average_utilization=DEFAULT_CPU_UTILIZATION
                ),
                resource_name="cpu",
            ),
        )
    elif isinstance(metrics_raw, list):
        metrics = tuple(_metric(m, i) for i, m in enumerate(metrics_raw))
    else:
        raise HpaSpecError("spec.metrics: must be a list")
    behavior_raw = spec.get("behavior")
    behavior: Behavior | None = None
    if isinstance(behavior_raw, Mapping):
        behavior = Behavior(
            scale_up=_rules(
                behavior_raw.get("scaleUp"), default_scale_up_rules(), "spec.behavior.scaleUp"
            ),
            scale_down=_rules(
                behavior_raw.get("scaleDown"),
                default_scale_down_rules(),
                "spec.behavior.scaleDown",
            ),
        )
    generation = meta.get("generation")
    return HpaSpec(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        target_api_version=str(ref.get("apiVersion") or ""),
        target_kind=str(ref.get("kind") or ""),
        target_name=str(ref.get("name") or ""),
        min_replicas=_int(min_raw, "spec.minReplicas")
        if min_raw is not None
        else DEFAULT_MIN_REPLICAS,
        max_replicas=_int(spec.get("maxReplicas", 0), "spec.maxReplicas"),
        metrics=metrics,
        behavior=behavior,
        selection_strategy=str(spec.get("selectionStrategy") or "LabelSelector"),
        generation=generation if isinstance(generation, int) else 0,
    )
