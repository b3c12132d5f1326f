"""kube-apiserver's validation of a HorizontalPodAutoscaler's spec.

The rules of ``pkg/apis/autoscaling/validation/validation.go``
(``validateHorizontalPodAutoscalerSpec`` and what it calls), on the stored autoscaling/v2 form —
kube-apiserver validates the internal version, so an autoscaling/v1 object is checked after its
conversion, with the same field paths. A violation is ``422 Invalid`` with one cause per error,
in upstream's order:

* ``spec.minReplicas``: ``must be greater than or equal to 1`` (0 with the ``HPAScaleToZero``
  gate, which kube-apiserver keeps off by default); ``spec.maxReplicas``: ``must be greater than
  0``, and ``must be greater than or equal to `minReplicas```;
* ``spec.scaleTargetRef.kind``/``.name``: required, and a valid path segment name;
* each ``spec.metrics[i]``: the type required and supported, its source (and only it) set; the
  target's type one of Utilization, Value, AverageValue, ``value``/``averageValue`` positive
  (``must be positive``), ``averageUtilization`` at least 1 (``must be greater than 0``); per
  source, which target fields it needs; a metric name required and a valid path segment name;
  ``minReplicas: 0`` needs an Object or External metric;
* ``spec.behavior.scaleUp``/``scaleDown``: window 0..3600 s, a known ``selectPolicy``, at least
  one policy (absent ``policies`` are defaulted first, as kube-apiserver decodes with defaults;
  an explicit ``[]`` is refused), each of type Pods or Percent with ``value`` > 0 and
  ``periodSeconds`` in 1..1800.

Bad values print as Go's ``field.Invalid`` prints them: numbers bare, strings quoted, and a
``resource.Quantity`` as its ``%#v`` (``resource.Quantity{i:resource.int64Amount{value:0,
scale:0}, d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"0", Format:"DecimalSI"}``, the text
users meet in kedacore/keda#3669). The ``HPAContainerMetrics`` gate is GA (always on). Not
ported: the container name's DNS-1123 and the resource name's checks of ``containerResource``.

Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from kubescale.objects.quantities import Quantity, QuantityError

from .errors import FieldCause

__all__ = ["go_quantity", "hpa_causes"]

MAX_PERIOD_SECONDS: Final = 1800
MAX_STABILIZATION_WINDOW_SECONDS: Final = 3600
_SOURCE_TYPES: Final = ("ContainerResource", "External", "Object", "Pods", "Resource")
_SOURCE_FIELDS: Final = {
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "External": "external",
}
_SELECT_POLICIES: Final = ("Disabled", "Max", "Min")
_POLICY_TYPES: Final = ("Percent", "Pods")
_NUMBER: Final = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?([a-zA-Z]*)$")
_DECIMAL_EXPONENTS: Final = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_EXPONENTS_MORE: Final = {"P": 15, "E": 18}
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def go_quantity(text: str) -> str:
    """``%#v`` of the ``resource.Quantity`` kube-apiserver decodes ``text`` into (after its
    ``String()`` cached the canonical form); the quoted text when it is not a plain number
    with an SI suffix."""
    match = _NUMBER.match(text.strip())
    try:
        canonical = str(Quantity.from_json(text))
    except QuantityError:
        return f'"{text}"'
    if match is None:
        return f'"{text}"'
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if suffix in _BINARY:
        value, scale, fmt = int(f"{whole}{fraction}" or "0") << _BINARY[suffix], 0, "BinarySI"
        value //= 10 ** len(fraction)
    elif suffix in _DECIMAL_EXPONENTS or suffix in _DECIMAL_EXPONENTS_MORE:
        exponent = {**_DECIMAL_EXPONENTS, **_DECIMAL_EXPONENTS_MORE}[suffix]
        value, scale, fmt = int(f"{whole}{fraction}" or "0"), exponent - len(fraction), "DecimalSI"
    else:
        return f'"{text}"'
    if sign == "-":
        value = -value
    return (
        f"resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, "
        f'd:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:"{canonical}", Format:"{fmt}"}}'
    )


def _invalid(path: str, shown: str, detail: str) -> FieldCause:
    return ("FieldValueInvalid", path, f"Invalid value: {shown}: {detail}")


def _required(path: str, detail: str = "") -> FieldCause:
    return ("FieldValueRequired", path, f"Required value: {detail}" if detail else "Required value")


def _forbidden(path: str, detail: str) -> FieldCause:
    return ("FieldValueForbidden", path, f"Forbidden: {detail}")


def _not_supported(path: str, value: object, supported: tuple[str, ...]) -> FieldCause:
    listed = ", ".join(f'"{s}"' for s in supported)
    return (
        "FieldValueNotSupported",
        path,
        f"Unsupported value: {_shown(value)}: supported values: {listed}",
    )


def _shown(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _path_segment_causes(path: str, value: str) -> list[FieldCause]:
    """``IsValidPathSegmentName``."""
    if value in (".", ".."):
        return [_invalid(path, f'"{value}"', f"may not be '{value}'")]
    return [
        _invalid(path, f'"{value}"', f"may not contain '{bad}'")
        for bad in ("/", "%")
        if bad in value
    ]


def _reference_causes(ref: Mapping[str, Any], path: str) -> list[FieldCause]:
    """``ValidateCrossVersionObjectReference``."""
    causes: list[FieldCause] = []
    for key in ("kind", "name"):
        value = str(ref.get(key) or "")
        if not value:
            causes.append(_required(f"{path}.{key}"))
        else:
            causes.extend(_path_segment_causes(f"{path}.{key}", value))
    return causes


def _positive(value: object) -> bool | None:
    """The quantity's sign is 1 (None: not a quantity, which the decoder refuses first)."""
    try:
        return Quantity.from_json(value).nanos > 0
    except QuantityError:
        return None


def _target_causes(target: Mapping[str, Any], path: str) -> list[FieldCause]:
    """``validateMetricTarget``."""
    causes: list[FieldCause] = []
    kind = target.get("type")
    if not kind:
        causes.append(_required(f"{path}.type", "must specify a metric target type"))
    if kind not in ("Utilization", "Value", "AverageValue"):
        causes.append(
            _invalid(
                f"{path}.type",
                _shown(kind or ""),
                "must be either Utilization, Value, or AverageValue",
            )
        )
    for key in ("value", "averageValue"):
        raw = target.get(key)
        if raw is not None and _positive(raw) is False:
            causes.append(_invalid(f"{path}.{key}", go_quantity(str(raw)), "must be positive"))
    utilization = _int(target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        causes.append(
            _invalid(f"{path}.averageUtilization", str(utilization), "must be greater than 0")
        )
    return causes


def _identifier_causes(metric: Mapping[str, Any], path: str) -> list[FieldCause]:
    """``validateMetricIdentifier``."""
    name = str(metric.get("name") or "")
    if not name:
        return [_required(f"{path}.name", "must specify a metric name")]
    return _path_segment_causes(f"{path}.name", name)


def _source_causes(field: str, source: Mapping[str, Any], path: str) -> list[FieldCause]:
    target = source.get("target") or {}
    if not isinstance(target, Mapping):
        target = {}
    has = {key: target.get(key) is not None for key in ("value", "averageValue")}
    utilization = target.get("averageUtilization") is not None
    causes: list[FieldCause] = []
    if field in ("resource", "containerResource"):
        if not source.get("name"):
            causes.append(_required(f"{path}.name", "must specify a resource name"))
        if field == "containerResource" and not source.get("container"):
            causes.append(_required(f"{path}.container", "must specify a container"))
        causes.extend(_target_causes(target, f"{path}.target"))
        if not utilization and not has["averageValue"]:
            causes.append(
                _required(
                    f"{path}.target.averageUtilization",
                    "must set either a target raw value or a target utilization",
                )
            )
        if utilization and has["averageValue"]:
            causes.append(
                _forbidden(
                    f"{path}.target.averageValue",
                    "may not set both a target raw value and a target utilization",
                )
            )
        return causes
    if field == "object":
        causes.extend(
            _reference_causes(source.get("describedObject") or {}, f"{path}.describedObject")
        )
    causes.extend(_identifier_causes(source.get("metric") or {}, f"{path}.metric"))
    causes.extend(_target_causes(target, f"{path}.target"))
    if field == "pods":
        if not has["averageValue"]:
            causes.append(
                _required(
                    f"{path}.target.averageValue", "must specify a positive target averageValue"
                )
            )
    elif field == "object":
        if not has["value"] and not has["averageValue"]:
            causes.append(
                _required(
                    f"{path}.target.averageValue", "must set either a target value or averageValue"
                )
            )
    else:  # external
        if not has["value"] and not has["averageValue"]:
            causes.append(
                _required(
                    f"{path}.target.averageValue",
                    "must set either a target value for metric or a per-pod target",
                )
            )
        if has["value"] and has["averageValue"]:
            causes.append(
                _forbidden(
                    f"{path}.target.value",
                    "may not set both a target value for metric and a per-pod target",
                )
            )
    return causes


def _metric_causes(spec: Mapping[str, Any], path: str) -> list[FieldCause]:
    """``validateMetricSpec``: the checks of the first source present, then presence."""
    causes: list[FieldCause] = []
    kind = spec.get("type")
    if not kind:
        causes.append(_required(f"{path}.type", "must specify a metric source type"))
    if kind not in _SOURCE_TYPES:
        causes.append(_not_supported(f"{path}.type", kind or "", _SOURCE_TYPES))
    present: list[str] = []
    for field in ("object", "external", "pods", "resource", "containerResource"):
        source = spec.get(field)
        if source is None:
            continue
        present.append(field)
        if len(present) == 1:
            body = source if isinstance(source, Mapping) else {}
            causes.extend(_source_causes(field, body, f"{path}.{field}"))
    expected = _SOURCE_FIELDS.get(str(kind))
    if expected is not None and expected not in present:
        causes.append(
            _required(f"{path}.{expected}", "must populate information for the given metric source")
        )
    if expected is None:  # upstream's switch default: said a second time
        causes.append(_not_supported(f"{path}.type", kind or "", _SOURCE_TYPES))
    if len(present) != 1:
        causes.extend(
            _forbidden(f"{path}.{field}", "must populate the given metric source only")
            for field in present
            if field != expected
        )
    return causes


def _rules_causes(rules: Mapping[str, Any], path: str) -> list[FieldCause]:
    """``validateScalingRules``."""
    causes: list[FieldCause] = []
    window = _int(rules.get("stabilizationWindowSeconds"))
    if window is not None and window < 0:
        causes.append(
            _invalid(
                f"{path}.stabilizationWindowSeconds",
                str(window),
                "must be greater than or equal to zero",
            )
        )
    if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
        causes.append(
            _invalid(
                f"{path}.stabilizationWindowSeconds",
                str(window),
                f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}",
            )
        )
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT_POLICIES:
        causes.append(_not_supported(f"{path}.selectPolicy", select, _SELECT_POLICIES))
    policies = rules.get("policies")
    if policies is None:  # absent: defaulted before validation (reference §2.5)
        policies = [{"type": "Pods", "value": 4, "periodSeconds": 15}]
    if not policies:
        causes.append(_required(f"{path}.policies", "must specify at least one Policy"))
    for i, raw in enumerate(policies if isinstance(policies, list) else []):
        at = f"{path}.policies[{i}]"
        policy: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if policy.get("type") not in _POLICY_TYPES:
            causes.append(_not_supported(f"{at}.type", policy.get("type") or "", _POLICY_TYPES))
        value = _int(policy.get("value")) or 0
        if value <= 0:
            causes.append(_invalid(f"{at}.value", str(value), "must be greater than zero"))
        period = _int(policy.get("periodSeconds")) or 0
        if period <= 0:
            causes.append(_invalid(f"{at}.periodSeconds", str(period), "must be greater than zero"))
        if period > MAX_PERIOD_SECONDS:
            causes.append(
                _invalid(
                    f"{at}.periodSeconds",
                    str(period),
                    f"must be less than or equal to {MAX_PERIOD_SECONDS}",
                )
            )
    return causes


def hpa_causes(hpa: Mapping[str, Any], *, scale_to_zero: bool = False) -> list[FieldCause]:
    """Every violation of ``validateHorizontalPodAutoscalerSpec`` in ``hpa`` (v2), in order;
    ``scale_to_zero``: kube-apiserver's ``HPAScaleToZero`` gate (minReplicas 0 allowed)."""
    spec = hpa.get("spec") or {}
    if not isinstance(spec, Mapping):
        return []
    causes: list[FieldCause] = []
    lower = 0 if scale_to_zero else 1
    minimum = _int(spec.get("minReplicas"))
    maximum = _int(spec.get("maxReplicas")) or 0
    if minimum is not None and minimum < lower:
        causes.append(
            _invalid("spec.minReplicas", str(minimum), f"must be greater than or equal to {lower}")
        )
    if maximum < 1:
        causes.append(_invalid("spec.maxReplicas", str(maximum), "must be greater than 0"))
    if minimum is not None and maximum < minimum:
        causes.append(
            _invalid(
                "spec.maxReplicas", str(maximum), "must be greater than or equal to `minReplicas`"
            )
        )
    causes.extend(_reference_causes(spec.get("scaleTargetRef") or {}, "spec.scaleTargetRef"))
    metrics = spec.get("metrics") or []
    metrics = metrics if isinstance(metrics, list) else []
    for i, metric in enumerate(metrics):
        causes.extend(
            _metric_causes(metric if isinstance(metric, Mapping) else {}, f"spec.metrics[{i}]")
        )
    if minimum == 0 and not any(
        isinstance(m, Mapping) and m.get("type") in ("Object", "External") for m in metrics
    ):
        causes.append(
            _forbidden(
                "spec.metrics",
                "must specify at least one Object or External metric to support scaling to "
                "zero replicas",
            )
        )
    behavior = spec.get("behavior")
    if isinstance(behavior, Mapping):
        for direction in ("scaleUp", "scaleDown"):
            rules = behavior.get(direction)
            if isinstance(rules, Mapping):
                causes.extend(_rules_causes(rules, f"spec.behavior.{direction}"))
    return causes
