"""Limits kept in proportion to requests: upstream's ``limit_and_request_scaling.go``, exactly.

When VPA changes a request it moves the limit with it so the limit:request ratio the user chose
survives (``controlledValues: RequestsAndLimits``), and capping converts LimitRange bounds on
limits into bounds on requests the same way. The rules (``pkg/utils/vpa``):

``proportional_resource_limit`` (``getProportionalResourceLimit``), per resource:

* original limit missing or 0 -> the container LimitRange ``default`` limit; still missing or
  0 -> no limit, annotation ``"<res>: limit NOT set since originalLimit is nil or 0"``;
* recommended request missing or 0 -> no limit, annotation
  ``"<res>: limit NOT set since recommendedRequest is nil or 0"``;
* original request missing or 0, or equal to the limit (compared in milli-units) -> the limit
  is the recommended request itself;
* otherwise limit = originalLimit x recommendedRequest / originalRequest: CPU in milli-units
  (``MilliValue``), memory and anything else in whole units (``Value``), exact integer
  arithmetic (Go's ``big.Int``), rounded down; a result beyond int64 becomes MaxInt64
  (milli-units for CPU) with ``"<res>: failed to keep limit to request ratio; capping limit
  to int64"``.

``proportional_limits`` (``GetProportionalLimit``) does that for cpu then memory and returns
``None`` with no annotations when neither gets a limit -- upstream then drops the annotations
too. ``boundary_request`` (``GetBoundaryRequest``) is the inverse: the request that keeps the
original ratio when the limit sits on a LimitRange bound (zero = no bound).

Quantity formats are upstream's: a scaled CPU value is ``NewMilliQuantity(v, format of the
scaled quantity)``, a scaled memory value ``NewQuantity(v, format of the scaled quantity)``
(so ``2Gi`` scaled keeps BinarySI and prints e.g. ``4Gi`` or ``715827882``); an unscaled result
is the recommended request (or bound) as given.

Deviation: upstream reads ``MilliValue``/``Value`` into int64, which wraps for quantities beyond
about 9.2e15 cores or 9.2e18 bytes; here they are exact, so such inputs give the mathematically
right (capped) result instead of a wrapped one.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubescale.controllers.vpa.api.current_resources import CPU, MEMORY, ResourceList
from kubescale.objects.quantities import Quantity

__all__ = [
    "MAX_INT64",
    "boundary_request",
    "proportional_limits",
    "proportional_resource_limit",
    "scale_cpu",
    "scale_memory",
]

MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)
ZERO = Quantity(nanos=0)


def _euclid_divmod(numerator: int, denominator: int) -> tuple[int, int]:
    """Go's big.Int DivMod (Euclidean): the remainder is never negative."""
    quotient, remainder = divmod(numerator, denominator)
    if remainder < 0:
        quotient, remainder = quotient + 1, remainder - denominator
    return quotient, remainder


def scale_cpu(
    scaled: Quantity, base: Quantity, result: Quantity, *, round_up: bool = False
) -> tuple[Quantity, bool]:
    """scaleQuantityProportionallyCPU: ``scaled x result / base`` in milli-units.

    Rounded down, or up to the next milli-unit with ``round_up`` (``roundUpToFullUnit``);
    returns ``(quantity, capped_to_max_int64)``. A zero base returns ``scaled`` unchanged
    (upstream's ``divisionByZero``).
    """
    base_milli = base.milli_value()
    if base_milli == 0:
        return scaled, False
    quotient, remainder = _euclid_divmod(scaled.milli_value() * result.milli_value(), base_milli)
    if _MIN_INT64 <= quotient <= MAX_INT64:
        if remainder and round_up:
            quotient += 1
        return Quantity.from_milli(quotient, scaled.format), False
    return Quantity.from_milli(MAX_INT64, scaled.format), True


def scale_memory(scaled: Quantity, base: Quantity, result: Quantity) -> tuple[Quantity, bool]:
    """scaleQuantityProportionallyMem: ``scaled x result / base`` in whole units, rounded down.

    Upstream's rounding modes only ever re-round this whole number (a no-op), so every mode is
    a floor here. Two deviations where upstream misbehaves: a zero base returns ``scaled``
    (upstream divides by zero and panics), and ``roundDownToFullUnit`` of a 0 result stays 0
    (upstream's ``Sub(999m)`` + ``RoundUp`` turns it into -1, a request the API server rejects).
    """
    base_value = base.value()
    if base_value == 0:
        return scaled, False
    quotient, _ = _euclid_divmod(scaled.value() * result.value(), base_value)
    if _MIN_INT64 <= quotient <= MAX_INT64:
        return Quantity.from_int(quotient, scaled.format), False
    return Quantity.from_int(MAX_INT64, scaled.format), True


def _scale(name: str, scaled: Quantity, base: Quantity, result: Quantity) -> tuple[Quantity, bool]:
    if name == CPU:
        return scale_cpu(scaled, base, result)
    return scale_memory(scaled, base, result)


def _is_unset(quantity: Quantity | None) -> bool:
    # Upstream tests `q == nil || q.Value() == 0`; Value() rounds away from zero, so only an
    # exact zero reads as 0.
    return quantity is None or quantity.is_zero()


def proportional_resource_limit(
    name: str,
    *,
    original_limit: Quantity | None,
    original_request: Quantity | None,
    recommended_request: Quantity | None,
    default_limit: Quantity | None,
) -> tuple[Quantity | None, str]:
    """getProportionalResourceLimit: ``(limit or None, annotation or "")`` for one resource."""
    if _is_unset(original_limit):
        original_limit = default_limit
    if original_limit is None or original_limit.is_zero():
        return None, f"{name}: limit NOT set since originalLimit is nil or 0"
    if recommended_request is None or recommended_request.is_zero():
        return None, f"{name}: limit NOT set since recommendedRequest is nil or 0"
    if original_request is None or original_request.is_zero():
        # K8s treats a limit without a request as request == limit.
        return recommended_request, ""
    if original_request.milli_value() == original_limit.milli_value():
        return recommended_request, ""
    limit, capped = _scale(name, original_limit, original_request, recommended_request)
    if capped:
        return limit, f"{name}: failed to keep limit to request ratio; capping limit to int64"
    return limit, ""


def proportional_limits(
    *,
    original_limits: Mapping[str, Quantity] | None,
    original_requests: Mapping[str, Quantity] | None,
    recommendation: Mapping[str, Quantity] | None,
    default_limits: Mapping[str, Quantity] | None,
) -> tuple[ResourceList | None, list[str]]:
    """GetProportionalLimit: cpu and memory limits for the recommended requests.

    ``(None, [])`` when neither resource gets a limit (upstream returns no annotations then).
    """
    limits: ResourceList = {}
    annotations: list[str] = []
    for name in (CPU, MEMORY):
        limit, annotation = proportional_resource_limit(
            name,
            original_limit=(original_limits or {}).get(name),
            original_request=(original_requests or {}).get(name),
            recommended_request=(recommendation or {}).get(name),
            default_limit=(default_limits or {}).get(name),
        )
        if annotation:
            annotations.append(annotation)
        if limit is not None:
            limits[name] = limit
    if not limits:
        return None, []
    return limits, annotations


def boundary_request(
    name: str,
    *,
    original_request: Quantity | None,
    original_limit: Quantity | None,
    boundary_limit: Quantity | None,
    default_limit: Quantity | None,
) -> Quantity:
    """GetBoundaryRequest: the request whose limit, at the original ratio, is ``boundary_limit``.

    Zero when the container has no limit (no boundary applies); the boundary itself when it has
    no request (K8s then treats request == limit).
    """
    if _is_unset(original_limit):
        original_limit = default_limit
    if original_limit is None or original_limit.is_zero():
        return ZERO
    boundary = boundary_limit if boundary_limit is not None else ZERO
    if original_request is None or original_request.is_zero():
        return boundary
    scaled, _ = _scale(name, original_request, original_limit, boundary)
    return scaled
