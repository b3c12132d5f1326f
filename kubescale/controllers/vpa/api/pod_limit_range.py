"""Recommendations capped to a Pod LimitRange: upstream's ``capProportionallyToPodLimitRange``.

The first step of the capping processor (:mod:`kubescale.controllers.vpa.api.capping`), only when
the namespace has a Pod item (``pkg/utils/vpa/capping.go``):

* containers of the pod without a recommendation but with requests get one whose target is
  their current requests (``insertRequestsForMissingRecommendations``) -- so admission then
  patches them too, as upstream does;
* for UpperBound, Target, LowerBound, each for cpu then memory (``applyPodLimitRange``):
  ``sumLimit`` = the containers' proportional limits
  (:func:`kubescale.controllers.vpa.api.limit_scaling.proportional_resource_limit`, the Pod item's
  ``default`` as default) and ``sumRecommendation`` = the recommendations (the current request for a
  container without one). Nothing changes if ``min <= sumLimit``, ``min <= sumRecommendation`` and
  (no max or ``max >= sumLimit``). Else if ``min > sumRecommendation`` and ``sumLimit != 0`` every
  recommendation is scaled by ``min / sumRecommendation`` rounding **up** (CPU: ceiling in
  milli-units; memory: whole bytes -- upstream's memory "round up" re-rounds a floored whole
  number, so it is a floor, as its TestCapPodMemoryWithUnderByteSplit shows). Else if
  ``sumLimit != 0`` every recommendation, taken as a limit, is scaled by
  ``(min if min > sumLimit; max if max < sumLimit) / sumLimit`` rounding **down**. A resource
  the recommendation lacks is scaled from 0 and so written as 0 (upstream's behaviour, kept).

Deviations, where upstream panics: a bound the entry does not have (e.g. the upperBound of an
inserted entry) stays absent instead of being written into a nil map, and a container with
neither a recommendation nor requests is left out of the scaling instead of being dereferenced.

Pure: works on the caller's working copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from kubescale.controllers.vpa.api.current_resources import (
    CPU,
    MEMORY,
    PodContainers,
    ResourceList,
    parse_resource_list,
)
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.controllers.vpa.api.limit_scaling import (
    ZERO,
    proportional_resource_limit,
    scale_cpu,
    scale_memory,
)
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import mapping
from kubescale.objects.vpa import RecommendedContainerResources, RecommendedPodResources

__all__ = [
    "BOUNDS",
    "LOWER_BOUND",
    "TARGET",
    "UPPER_BOUND",
    "WorkingRecommendation",
    "cap_to_pod_limit_range",
    "first_entry",
    "parse_entries",
]

TARGET = "target"
LOWER_BOUND = "lowerBound"
UPPER_BOUND = "upperBound"
BOUNDS = (TARGET, LOWER_BOUND, UPPER_BOUND)
# capProportionallyToPodLimitRange's order: UpperBound, Target, LowerBound; cpu, then memory.
_ORDER = (UPPER_BOUND, TARGET, LOWER_BOUND)


class WorkingRecommendation:
    """A mutable copy of one ``containerRecommendations`` entry while it is being capped."""

    __slots__ = ("bounds", "name", "source")

    def __init__(
        self,
        name: str,
        bounds: dict[str, ResourceList | None],
        source: RecommendedContainerResources,
    ) -> None:
        self.name = name
        self.bounds = bounds
        self.source = source


def parse_entries(recommendation: RecommendedPodResources | None) -> list[WorkingRecommendation]:
    """Working copies of a ``status.recommendation``'s entries (garbage entries skipped)."""
    # as sent (the recommender's status is not validated): checked entry by entry
    entries: object = mapping(recommendation).get("containerRecommendations")
    working: list[WorkingRecommendation] = []
    if not isinstance(entries, list):
        return working
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("containerName")
        bounds = {bound: parse_resource_list(entry.get(bound)) for bound in BOUNDS}
        source = cast(RecommendedContainerResources, entry)
        working.append(WorkingRecommendation(name if isinstance(name, str) else "", bounds, source))
    return working


def first_entry(
    working: Iterable[WorkingRecommendation], name: str
) -> WorkingRecommendation | None:
    """GetRecommendationForContainer: the first entry for ``name``."""
    for entry in working:
        if entry.name == name:
            return entry
    return None


def _insert_requests_for_missing(working: list[WorkingRecommendation], pod: PodContainers) -> None:
    """insertRequestsForMissingRecommendations: current requests stand in for a missing entry."""
    present = {entry.name for entry in working}
    for name in pod.names:
        if name in present:
            continue
        requests, _ = pod.requests_and_limits(name)
        if not requests:
            continue
        working.append(
            WorkingRecommendation(
                name, {TARGET: dict(requests), LOWER_BOUND: None, UPPER_BOUND: None}, {}
            )
        )


def _apply_pod_limit_range(
    working: list[WorkingRecommendation],
    pod: PodContainers,
    limit_range: LimitRangeItem,
    name: str,
    bound: str,
) -> None:
    """applyPodLimitRange for one resource of one bound."""
    minimum = limit_range.min.get(name, ZERO)
    maximum = limit_range.max.get(name, ZERO)
    if minimum.is_zero() and maximum.is_zero():
        return  # no bound for this resource: sums of requests are never below 0
    default = limit_range.default.get(name)
    members: list[tuple[WorkingRecommendation | None, Quantity]] = []
    sum_limit = ZERO
    sum_recommendation = ZERO
    for container_name in pod.names:
        entry = first_entry(working, container_name)
        requests, limits = pod.requests_and_limits(container_name)
        request = (requests or {}).get(name)
        if entry is None:
            recommendation = request if request is not None else ZERO  # unchanged container
        else:
            recommendation = (entry.bounds[bound] or {}).get(name, ZERO)
        limit, _ = proportional_resource_limit(
            name,
            original_limit=(limits or {}).get(name),
            original_request=request,
            recommended_request=recommendation,
            default_limit=default,
        )
        if limit is not None:
            sum_limit = sum_limit + limit
        sum_recommendation = sum_recommendation + recommendation
        members.append((entry, recommendation))
    if (
        minimum <= sum_limit
        and minimum <= sum_recommendation
        and (maximum.is_zero() or maximum >= sum_limit)
    ):
        return
    if minimum > sum_recommendation and not sum_limit.is_zero():
        # Raise the sum of the recommendations to the minimum, rounding up.
        for entry, recommendation in members:
            resources = entry.bounds[bound] if entry is not None else None
            if resources is None:
                continue
            if name == MEMORY:
                scaled, _ = scale_memory(recommendation, sum_recommendation, minimum)
            else:
                scaled, _ = scale_cpu(recommendation, sum_recommendation, minimum, round_up=True)
            resources[name] = scaled
        return
    if sum_limit.is_zero():
        return
    target_total = ZERO
    if minimum > sum_limit:
        target_total = minimum
    if not maximum.is_zero() and maximum < sum_limit:
        target_total = maximum
    for entry, recommendation in members:
        resources = entry.bounds[bound] if entry is not None else None
        if resources is None:
            continue
        # The recommendation, read as a limit, scaled so the limits sum to the bound; down.
        if name == MEMORY:
            scaled, _ = scale_memory(recommendation, sum_limit, target_total)
        else:
            scaled, _ = scale_cpu(recommendation, sum_limit, target_total)
        resources[name] = scaled


def cap_to_pod_limit_range(
    working: list[WorkingRecommendation], pod: PodContainers, limit_range: LimitRangeItem | None
) -> None:
    """capProportionallyToPodLimitRange, in place."""
    if limit_range is None:
        return
    _insert_requests_for_missing(working, pod)
    for bound in _ORDER:
        for name in (CPU, MEMORY):
            _apply_pod_limit_range(working, pod, limit_range, name, bound)
