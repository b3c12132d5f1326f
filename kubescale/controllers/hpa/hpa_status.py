"""HPA status pieces as upstream writes them: conditions, metric statuses, Go-printed selectors.

* :func:`set_condition` is ``setConditionInList``: the condition of that type is updated in
  place (appended when absent, so the order is first-set order: AbleToScale, ScalingActive,
  ScalingLimited in a normal reconcile); ``lastTransitionTime`` moves only when the status
  flips.
* :func:`go_selector_text` prints a ``*metav1.LabelSelector`` the way ``%+v`` does (its
  generated ``String()``): upstream puts it in External metric names and error messages.
* :func:`milli_quantity` is ``resource.NewMilliQuantity(v, DecimalSI)`` as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final

from kubescale.kube.event_correlation import format_time
from kubescale.objects.meta import Condition, LabelSelectorObject
from kubescale.objects.quantities import Quantity

__all__ = [
    "ABLE_TO_SCALE",
    "SCALING_ACTIVE",
    "SCALING_LIMITED",
    "go_selector_text",
    "milli_quantity",
    "set_condition",
]

ABLE_TO_SCALE: Final = "AbleToScale"
SCALING_ACTIVE: Final = "ScalingActive"
SCALING_LIMITED: Final = "ScalingLimited"


def set_condition(
    conditions: Sequence[Condition],
    *,
    type: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
) -> list[Condition]:
    """``setConditionInList`` (module docstring); returns a new list."""
    text = "True" if status else "False"
    result = [Condition(**c) for c in conditions]
    for condition in result:
        if condition.get("type") == type:
            break
    else:
        condition = Condition(type=type)
        result.append(condition)
    if condition.get("status") != text:
        condition["lastTransitionTime"] = format_time(now)
    condition["status"] = text
    condition["reason"] = reason
    condition["message"] = message
    return result


def milli_quantity(milli: int) -> str:
    """``resource.NewMilliQuantity(milli, DecimalSI)`` serialized."""
    return Quantity.from_milli(milli).to_json()


def _go_string_map(labels: Mapping[str, str]) -> str:
    items = "".join(f"{k}: {labels[k]}," for k in sorted(labels))
    return f"map[string]string{{{items}}}"


def go_selector_text(selector: LabelSelectorObject | None) -> str:
    """``fmt.Sprintf("%+v", selector)`` of a ``*metav1.LabelSelector`` (``<nil>`` when unset)."""
    if selector is None:
        return "<nil>"
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    parts = []
    for expr in expressions:
        values = " ".join(str(v) for v in expr.get("values") or [])
        parts.append(
            f"LabelSelectorRequirement{{Key:{expr.get('key', '')},"
            f"Operator:{expr.get('operator', '')},Values:[{values}],}},"
        )
    return (
        f"&LabelSelector{{MatchLabels:{_go_string_map(match_labels)},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{''.join(parts)}}},}}"
    )
