"""What the API server checks on the pod the webhook returns: LimitRanger, requests <= limits.

kube-apiserver validates a pod after the mutating webhooks: every request at most its limit
(pod validation, ``422``), then every LimitRange of the namespace (the LimitRanger admission
plugin, ``403``). A patch that breaks one of them makes the pod uncreatable -- its ReplicaSet
retries forever -- so the webhook checks its own answer against the same rules
(:mod:`kubescale.controllers.vpa.api.limit_range_fit`). This module holds them:

* :class:`NamespaceLimits` -- the strictest bound per type (``Container``, ``Pod``) and resource
  over every item of every LimitRange: all of them must hold, so the highest ``min``, the
  lowest ``max`` and the lowest ``maxLimitRequestRatio`` are the ones that matter (unlike
  :func:`kubescale.controllers.vpa.api.limit_ranges.merged_limit_range_item`, which merges as
  upstream VPA does, every resource is kept);
* :func:`bound_errors` -- LimitRanger's ``minConstraint``/``maxConstraint``/
  ``limitRequestRatioConstraint`` for one resource: ``min`` needs a request and both request
  and limit at or above it, ``max`` needs a limit and both at or below it, the ratio needs a
  non-zero request and limit with limit/request at or below it. Values compare in milli-units
  unless one is beyond ``MaxMilliValue`` (then whole units); the ratio compares ``float64``
  values as upstream does. Messages are LimitRanger's;
* :func:`pod_totals` -- LimitRanger's ``podRequests``/``podLimits``: app containers and
  sidecars (init containers with ``restartPolicy: Always``) summed, each other init container
  counted on top of the sidecars started before it, the larger total wins;
* :func:`overcommit_allowed` -- ``IsOvercommitAllowed``: a request of an extended resource or of
  huge pages must equal its limit, so the webhook never changes those.

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from kubescale.controllers.vpa.api.current_resources import ResourceList, parse_resource_list
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import optional_spec_of

__all__ = [
    "Bounds",
    "NamespaceLimits",
    "bound_errors",
    "overcommit_allowed",
    "pod_totals",
    "ratio_holds",
]

MAX_MILLI_VALUE: Final = (2**63 - 1) // 1000
_EMPTY: Mapping[str, Quantity] = MappingProxyType({})
_ZERO: Final = Quantity(nanos=0)


def overcommit_allowed(resource: str) -> bool:
    """helper.IsOvercommitAllowed: native resources other than huge pages."""
    native = "/" not in resource or "kubernetes.io/" in resource
    return native and not resource.startswith("hugepages-")


@dataclass(frozen=True)
class Bounds:
    """One type's strictest ``min``, ``max`` and ``maxLimitRequestRatio`` per resource."""

    min: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    max: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    ratio: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)

    def constrains(self, resource: str) -> bool:
        return resource in self.min or resource in self.max or resource in self.ratio


def _stricter(into: dict[str, Quantity], values: ResourceList | None, *, keep_higher: bool) -> None:
    for name, value in (values or {}).items():
        current = into.get(name)
        if current is None or (value > current if keep_higher else value < current):
            into[name] = value


@dataclass(frozen=True)
class NamespaceLimits:
    """The bounds every pod of the namespace must meet (see the module docstring)."""

    container: Bounds = field(default_factory=Bounds)
    pod: Bounds = field(default_factory=Bounds)

    @classmethod
    def of(cls, limit_ranges: Sequence[LimitRange]) -> NamespaceLimits:
        """The strictest bounds of these LimitRange objects (malformed quantities raise
        :class:`~kubescale.objects.quantities.QuantityError`; the API server stores none)."""
        collected: dict[str, tuple[dict[str, Quantity], ...]] = {
            "Container": ({}, {}, {}),
            "Pod": ({}, {}, {}),
        }
        for limit_range in limit_ranges:
            spec = optional_spec_of(limit_range)
            # as sent: each item is checked (a LimitRange is validated by the API server, but
            # a malformed item reads as none rather than failing the pod)
            items: object = spec.get("limits") if spec is not None else None
            for item in items if isinstance(items, list) else ():
                if not isinstance(item, Mapping) or item.get("type") not in collected:
                    continue
                low, high, ratio = collected[str(item["type"])]
                _stricter(low, parse_resource_list(item.get("min")), keep_higher=True)
                _stricter(high, parse_resource_list(item.get("max")), keep_higher=False)
                _stricter(
                    ratio, parse_resource_list(item.get("maxLimitRequestRatio")), keep_higher=False
                )

        def bounds(kind: str) -> Bounds:
            low, high, ratio = collected[kind]
            return Bounds(
                min=MappingProxyType(low), max=MappingProxyType(high), ratio=MappingProxyType(ratio)
            )

        return cls(container=bounds("Container"), pod=bounds("Pod"))


def _compared(*quantities: Quantity) -> list[int]:
    """requestLimitEnforcedValues: milli-units when none is beyond MaxMilliValue, else units."""
    units = [q.value() for q in quantities]
    if all(unit <= MAX_MILLI_VALUE for unit in units):
        return [q.milli_value() for q in quantities]
    return units


def ratio_holds(request: Quantity, limit: Quantity, ratio: Quantity) -> bool:
    """limitRequestRatioConstraint's comparison for a non-zero request and limit."""
    observed_request, observed_limit, _ = _compared(request, limit, ratio)
    if observed_request == 0 or observed_limit == 0:
        return False
    observed = float(observed_limit) / float(observed_request)
    allowed = float(ratio.value())
    if ratio.value() <= MAX_MILLI_VALUE:
        observed *= 1000
        allowed = float(ratio.milli_value())
    return observed <= allowed


def bound_errors(
    resource: str,
    kind: str,
    bounds: Bounds,
    request: Quantity | None,
    limit: Quantity | None,
) -> list[str]:
    """LimitRanger's errors for ``resource`` of one container (``kind`` ``Container``) or of
    the whole pod (``Pod``), given its request and limit (``None``: not set)."""
    errors: list[str] = []
    low = bounds.min.get(resource)
    if low is not None:
        if request is None:
            errors.append(f"minimum {resource} usage per {kind} is {low}.  No request is specified")
        else:
            observed_request, observed_limit, bound = _compared(request, limit or _ZERO, low)
            if observed_request < bound:
                errors.append(
                    f"minimum {resource} usage per {kind} is {low}, but request is {request}"
                )
            elif limit is not None and observed_limit < bound:
                errors.append(f"minimum {resource} usage per {kind} is {low}, but limit is {limit}")
    high = bounds.max.get(resource)
    if high is not None:
        if limit is None:
            errors.append(f"maximum {resource} usage per {kind} is {high}.  No limit is specified")
        else:
            observed_request, observed_limit, bound = _compared(request or _ZERO, limit, high)
            if observed_limit > bound:
                errors.append(
                    f"maximum {resource} usage per {kind} is {high}, but limit is {limit}"
                )
            elif request is not None and observed_request > bound:
                errors.append(
                    f"maximum {resource} usage per {kind} is {high}, but request is {request}"
                )
    ratio = bounds.ratio.get(resource)
    if ratio is not None:
        prefix = f"{resource} max limit to request ratio per {kind} is {ratio}"
        observed_request, observed_limit, _ = _compared(request or _ZERO, limit or _ZERO, ratio)
        if request is None or observed_request == 0:
            errors.append(f"{prefix}, but no request is specified or request is 0")
        elif limit is None or observed_limit == 0:
            errors.append(f"{prefix}, but no limit is specified or limit is 0")
        elif not ratio_holds(request, limit, ratio):
            errors.append(f"{prefix}, but provided ratio is {observed_limit / observed_request:f}")
    return errors


def _add(total: dict[str, Quantity], name: str, value: Quantity | None) -> None:
    if value is not None:
        total[name] = total[name] + value if name in total else value


def pod_totals(
    resource: str,
    containers: Sequence[Quantity | None],
    init_containers: Sequence[tuple[Quantity | None, bool]],
) -> Quantity | None:
    """podRequests / podLimits for one resource: ``containers`` are the app containers' values,
    ``init_containers`` (value, is a sidecar) in order; ``None`` when no container sets it."""
    total: dict[str, Quantity] = {}
    for value in containers:
        _add(total, resource, value)
    sidecars: dict[str, Quantity] = {}
    peak: Quantity | None = None
    for value, sidecar in init_containers:
        if sidecar:
            _add(total, resource, value)
            _add(sidecars, resource, value)
            running = sidecars.get(resource)
        else:
            running = value
            if value is not None and resource in sidecars:
                running = value + sidecars[resource]
            elif value is None:
                running = sidecars.get(resource) if resource in sidecars else None
        if running is not None and (peak is None or running > peak):
            peak = running
    result = total.get(resource)
    if peak is not None and (result is None or peak > result):
        result = peak
    return result
