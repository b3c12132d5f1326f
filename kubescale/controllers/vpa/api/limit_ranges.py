"""One LimitRange item per namespace and type, merged the way the VPA admission controller does.

A namespace may hold several LimitRange objects, each with several items. Upstream VPA
(``pkg/utils/limitrange/limit_range_calculator.go``, ``getLimitRangeItem``) folds every item of
one type (``Container`` or ``Pod``) into a single item before capping recommendations:

* only items of the asked type that set at least one of ``max``, ``min`` or ``default`` count;
* ``max``: the lowest value per resource wins (the strictest bound); ``min``: the highest wins;
  the first counted item's list is copied whole, later items only merge ``cpu`` and ``memory``
  (the resources the calculator compares); on a tie the later item's quantity is kept;
* ``default``: the whole list of the last counted item that has one wins (no per-resource merge);
* no counted item, or none of the three set -> ``None`` (upstream's nil item).

The order is the order of ``limit_ranges`` then of ``spec.limits`` (upstream: lister order, i.e.
the cache's). An absent, ``null`` or empty list counts as unset: the API server stores
ResourceLists with ``omitempty``, so upstream never sees an empty non-nil list.

Beyond upstream (which drops them from the merged item), ``default_request`` follows the
``default`` rule (last wins) and ``max_limit_request_ratio`` keeps the lowest ratio per resource;
no VPA decision reads either, they are carried for callers that want the namespace's policy.

Pure: raw API dicts in, an immutable item out. A malformed quantity raises
:class:`kubescale.objects.quantities.QuantityError` (the API server never stores one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from kubescale.controllers.vpa.api.current_resources import parse_resource_list
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import optional_spec_of

__all__ = [
    "CONTAINER",
    "POD",
    "LimitRangeItem",
    "merged_limit_range_item",
]

CONTAINER = "Container"
POD = "Pod"
# updatedResult merges only these two resources once the first list has been copied.
_MERGED_RESOURCES = ("cpu", "memory")

_EMPTY: Mapping[str, Quantity] = MappingProxyType({})


@dataclass(frozen=True)
class LimitRangeItem:
    """A (merged) ``LimitRangeItem``; an empty mapping means upstream's nil list."""

    max: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    min: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    default: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    default_request: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    max_limit_request_ratio: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)


def _lower(current: Quantity, candidate: Quantity) -> Quantity:
    # pickLowerMax(q1, q2): q1 if q1 < q2 else q2 -- a tie keeps the later item's quantity.
    return current if current < candidate else candidate


def _higher(current: Quantity, candidate: Quantity) -> Quantity:
    # chooseHigherMin(q1, q2): q1 if q1 > q2 else q2.
    return current if current > candidate else candidate


def _merged(
    result: dict[str, Quantity] | None,
    item: dict[str, Quantity] | None,
    pick: Callable[[Quantity, Quantity], Quantity],
) -> dict[str, Quantity] | None:
    """updatedResult for cpu then memory: copy the first list, then merge per resource."""
    if not item:
        return result
    if result is None:
        return dict(item)
    for name in _MERGED_RESOURCES:
        if name in item:
            result[name] = pick(result[name], item[name]) if name in result else item[name]
    return result


def _ratio_merged(
    result: dict[str, Quantity] | None, item: dict[str, Quantity] | None
) -> dict[str, Quantity] | None:
    if not item:
        return result
    merged = dict(result or {})
    for name, ratio in item.items():
        merged[name] = _lower(merged[name], ratio) if name in merged else ratio
    return merged


def _frozen(resources: dict[str, Quantity] | None) -> Mapping[str, Quantity]:
    return MappingProxyType(resources) if resources else _EMPTY


def merged_limit_range_item(
    limit_ranges: Sequence[LimitRange], *, item_type: str
) -> LimitRangeItem | None:
    """The merged ``item_type`` (``"Container"`` or ``"Pod"``) item of these LimitRanges."""
    maximum: dict[str, Quantity] | None = None
    minimum: dict[str, Quantity] | None = None
    default: dict[str, Quantity] | None = None
    default_request: dict[str, Quantity] | None = None
    ratio: dict[str, Quantity] | None = None
    for limit_range in limit_ranges:
        spec = optional_spec_of(limit_range)
        # as sent: each item is checked (a malformed item reads as none)
        items: object = spec.get("limits") if spec is not None else None
        if not isinstance(items, list):
            continue
        for item in items:
            if not isinstance(item, Mapping) or item.get("type") != item_type:
                continue
            item_max = parse_resource_list(item.get("max"))
            item_min = parse_resource_list(item.get("min"))
            item_default = parse_resource_list(item.get("default"))
            if not (item_max or item_min or item_default):
                continue
            if item_default:
                default = item_default
            maximum = _merged(maximum, item_max, _lower)
            minimum = _merged(minimum, item_min, _higher)
            item_default_request = parse_resource_list(item.get("defaultRequest"))
            if item_default_request:
                default_request = item_default_request
            ratio = _ratio_merged(ratio, parse_resource_list(item.get("maxLimitRequestRatio")))
    if not (maximum or minimum or default):
        return None
    return LimitRangeItem(
        max=_frozen(maximum),
        min=_frozen(minimum),
        default=_frozen(default),
        default_request=_frozen(default_request),
        max_limit_request_ratio=_frozen(ratio),
    )
