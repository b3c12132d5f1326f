"""The capping recommendation processor: upstream's ``pkg/utils/vpa/capping.go`` ``Apply``.

Before admission (and the updater, reference §3.4) use a VPA recommendation it is adjusted to
what the namespace and the VPA allow. Order, as upstream:

1. **Pod LimitRange** (``capProportionallyToPodLimitRange``,
   :mod:`kubescale.controllers.vpa.api.pod_limit_range`), only when the namespace has a Pod item:
   entries are inserted for containers without one and the sums of limits/recommendations are scaled
   into the item's ``[min, max]``.
2. Per container of the pod that has a recommendation (recommendations for containers not in
   the pod are dropped), for Target, LowerBound, UpperBound: the **container LimitRange**
   (``applyContainerLimitRange``: the item's ``max``/``min`` converted into request bounds that
   keep the container's limit:request ratio,
   :func:`kubescale.controllers.vpa.api.limit_scaling.boundary_request`; the request bound for
   ``min`` is also at least the item's ``min``) -> ``"<res> capped to fit Max in container
   LimitRange"`` / ``"... Min ..."``; then the container policy's
   ``minAllowed``/``maxAllowed`` (zero values ignored) -> ``"<res> capped to minAllowed"`` /
   ``"... maxAllowed"``; then -- beyond upstream -- the container LimitRange once more, so a
   ``minAllowed``/``maxAllowed`` outside what it allows loses (``"<res> minAllowed overridden
   to fit Max in container LimitRange"`` replaces the policy's text, and the override is
   reported in :attr:`CappedRecommendation.conflicts`); then, with ``controlledValues:
   RequestsOnly``, the cap to the current container limit (compared in milli-units) ->
   ``"<res> capped to container limit"``. Annotations and conflicts come from Target only.

"Current" requests and limits are the container status's when set
(:class:`kubescale.controllers.vpa.api.current_resources.PodContainers`). Resources are visited in
the canonical order (cpu, memory, others by name) where upstream iterates a Go map.

A bound (target/lowerBound/upperBound) the entry does not have stays absent.

Pure: raw API dicts in, immutable values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kubescale.controllers.vpa.api.current_resources import (
    CPU,
    MEMORY,
    PodContainers,
    ResourceList,
    ordered_names,
    parse_resource_list,
    resource_list_json,
)
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.controllers.vpa.api.limit_scaling import ZERO, boundary_request
from kubescale.controllers.vpa.api.pod_limit_range import (
    BOUNDS,
    LOWER_BOUND,
    TARGET,
    UPPER_BOUND,
    WorkingRecommendation,
    cap_to_pod_limit_range,
    parse_entries,
)
from kubescale.controllers.vpa.api.vpa_policy import (
    REQUESTS_AND_LIMITS,
    REQUESTS_ONLY,
    cap_to_max,
    cap_to_min,
    container_policy,
    controlled_values,
)
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import (
    ContainerResourcePolicy,
    PodResourcePolicy,
    RecommendedContainerResources,
    RecommendedPodResources,
)

__all__ = [
    "BOUNDS",
    "LOWER_BOUND",
    "REQUESTS_AND_LIMITS",
    "REQUESTS_ONLY",
    "TARGET",
    "UPPER_BOUND",
    "CappedRecommendation",
    "ContainerRecommendation",
    "cap_recommendation",
    "container_policy",
    "controlled_values",
]

_CONTAINER_ORDER = ((TARGET, True), (LOWER_BOUND, False), (UPPER_BOUND, False))


_CAPPED_TO_MIN_ALLOWED = "capped to minAllowed"
_CAPPED_TO_MAX_ALLOWED = "capped to maxAllowed"
_CAPPED_TO_LIMIT = "capped to container limit"
_CAPPED_TO_LIMIT_RANGE_MAX = "capped to fit Max in container LimitRange"
_CAPPED_TO_LIMIT_RANGE_MIN = "capped to fit Min in container LimitRange"


@dataclass(frozen=True)
class ContainerRecommendation:
    """One capped ``containerRecommendations`` entry; ``None`` = the bound is absent."""

    container_name: str
    target: Mapping[str, Quantity] | None
    lower_bound: Mapping[str, Quantity] | None
    upper_bound: Mapping[str, Quantity] | None
    source: RecommendedContainerResources
    """The input entry (``{}`` for one inserted for the pod LimitRange); capping keeps its other
    fields, e.g. ``uncappedTarget``, as they are."""

    def bound(self, name: str) -> Mapping[str, Quantity] | None:
        return {TARGET: self.target, LOWER_BOUND: self.lower_bound, UPPER_BOUND: self.upper_bound}[
            name
        ]

    def to_json(self) -> RecommendedContainerResources:
        """The entry as the API writes it, capped bounds in place of the original ones."""
        entry: RecommendedContainerResources = {**self.source}
        entry["containerName"] = self.container_name
        # BOUNDS' order: a bound the source lacks is added after its other fields
        if self.target is not None:
            entry["target"] = resource_list_json(self.target)
        if self.lower_bound is not None:
            entry["lowerBound"] = resource_list_json(self.lower_bound)
        if self.upper_bound is not None:
            entry["upperBound"] = resource_list_json(self.upper_bound)
        return entry


@dataclass(frozen=True)
class CappedRecommendation:
    """The processor's output: the capped entries and the Target annotations per container."""

    containers: tuple[ContainerRecommendation, ...]
    annotations: Mapping[str, tuple[str, ...]]
    conflicts: tuple[LimitRangeConflict, ...] = ()
    """Where the container LimitRange overrode the policy (kubescale's, beyond upstream)."""

    def for_container(self, name: str) -> ContainerRecommendation | None:
        """GetRecommendationForContainer: the first entry for ``name``."""
        for container in self.containers:
            if container.container_name == name:
                return container
        return None


def _annotation(name: str, action: str) -> str:
    return f"{name} {action}"


# -- 2. per container ----------------------------------------------------------------------------


def _boundary_recommendation(
    requests: ResourceList | None,
    limits: ResourceList | None,
    boundary: Mapping[str, Quantity],
    defaults: Mapping[str, Quantity],
) -> ResourceList:
    """getBoundaryRecommendation: request bounds for cpu and memory (zero = no bound)."""
    if not boundary:
        return {}
    return {
        name: boundary_request(
            name,
            original_request=(requests or {}).get(name),
            original_limit=(limits or {}).get(name),
            boundary_limit=boundary.get(name),
            default_limit=defaults.get(name),
        )
        for name in (CPU, MEMORY)
    }


@dataclass(frozen=True)
class _Bounds:
    """Lower and upper request bounds with the annotation actions they produce."""

    minimum: Mapping[str, Quantity]
    maximum: Mapping[str, Quantity]
    min_action: str
    max_action: str

    def apply(self, recommendation: ResourceList) -> list[str]:
        """Cap every recommended resource to the minimum, then the maximum (in place)."""
        annotations: list[str] = []
        for name in ordered_names(recommendation):
            capped, hit = cap_to_min(recommendation[name], name, self.minimum)
            if hit:
                annotations.append(_annotation(name, self.min_action))
            capped, hit = cap_to_max(capped, name, self.maximum)
            if hit:
                annotations.append(_annotation(name, self.max_action))
            recommendation[name] = capped
        return annotations

    def override(self, recommendation: ResourceList) -> list[tuple[str, str, Quantity]]:
        """Cap again after the policy moved values outside (in place): ``(resource, "Min" or
        "Max", value before)`` for each value moved back."""
        moved: list[tuple[str, str, Quantity]] = []
        for name in ordered_names(recommendation):
            before = recommendation[name]
            capped, raised = cap_to_min(before, name, self.minimum)
            capped, lowered = cap_to_max(capped, name, self.maximum)
            if raised or lowered:
                recommendation[name] = capped
                moved.append((name, "Max" if lowered else "Min", before))
        return moved


def _container_limit_range_bounds(
    requests: ResourceList | None,
    limits: ResourceList | None,
    limit_range: LimitRangeItem | None,
) -> _Bounds | None:
    """applyContainerLimitRange's bounds (getMin/MaxAllowedRecommendation).

    They depend on the container and the item only, so one computation serves all three
    recommendation bounds.
    """
    if limit_range is None:
        return None
    max_allowed = _boundary_recommendation(requests, limits, limit_range.max, limit_range.default)
    # getMinAllowedRecommendation: both the limit and the request must be >= the item's min.
    min_allowed = _boundary_recommendation(requests, limits, limit_range.min, limit_range.default)
    if limit_range.min:
        for name in (CPU, MEMORY):
            # A tie keeps the limit-derived bound (upstream replaces only when strictly above).
            min_allowed[name] = max(min_allowed[name], limit_range.min.get(name, ZERO))
    return _Bounds(min_allowed, max_allowed, _CAPPED_TO_LIMIT_RANGE_MIN, _CAPPED_TO_LIMIT_RANGE_MAX)


def _policy_bounds(policy: ContainerResourcePolicy | None) -> _Bounds | None:
    """applyVPAPolicy's bounds: the container policy's minAllowed and maxAllowed."""
    if policy is None:
        return None
    return _Bounds(
        parse_resource_list(policy.get("minAllowed")) or {},
        parse_resource_list(policy.get("maxAllowed")) or {},
        _CAPPED_TO_MIN_ALLOWED,
        _CAPPED_TO_MAX_ALLOWED,
    )


def _cap_to_container_limit(recommendation: ResourceList, limits: ResourceList | None) -> list[str]:
    """capRecommendationToContainerLimit: never above the current limit (milli compare)."""
    annotations: list[str] = []
    for name in ordered_names(limits or {}):
        limit = (limits or {})[name]
        recommended = recommendation.get(name)
        if recommended is not None and recommended.milli_value() > limit.milli_value():
            recommendation[name] = limit
            annotations.append(_annotation(name, _CAPPED_TO_LIMIT))
    return annotations


def _limit_range_wins(
    recommendation: ResourceList,
    produced: list[str],
    bounds: _Bounds,
    policy: _Bounds,
    limit_range: LimitRangeItem,
) -> list[tuple[str, str]]:
    """Beyond upstream: the container LimitRange again after the policy (in place).

    A ``minAllowed`` above what the LimitRange allows, or a ``maxAllowed`` below it, would make
    the pod uncreatable; the LimitRange wins. The policy's annotation for the resource is
    replaced by ``"<res> minAllowed overridden to fit Max in container LimitRange"`` (or
    ``maxAllowed`` / ``Min``); returns ``(resource, why)`` for each override.
    """
    conflicts: list[tuple[str, str]] = []
    for name, side, wanted in bounds.override(recommendation):
        if side == "Max":
            cap, relation, item_bound = "minAllowed", "above", limit_range.max.get(name)
            policy_value = policy.minimum.get(name, wanted)
        else:
            cap, relation, item_bound = "maxAllowed", "below", limit_range.min.get(name)
            policy_value = policy.maximum.get(name, wanted)
        stale = {
            _annotation(name, _CAPPED_TO_MIN_ALLOWED),
            _annotation(name, _CAPPED_TO_MAX_ALLOWED),
        }
        produced[:] = [text for text in produced if text not in stale]
        produced.append(f"{name} {cap} overridden to fit {side} in container LimitRange")
        conflicts.append(
            (
                name,
                f"{name} {cap} {policy_value} is {relation} what the container LimitRange "
                f"allows ({side.lower()} {item_bound}): the request is set to "
                f"{recommendation[name]}",
            )
        )
    return conflicts


def _cap_container(
    entry: WorkingRecommendation,
    pod: PodContainers,
    resource_policy: PodResourcePolicy | None,
    limit_range: LimitRangeItem | None,
) -> tuple[list[str], list[tuple[str, str]]]:
    """getCappedRecommendationForContainer (in place): the Target's annotations and its
    LimitRange-over-policy conflicts ``(resource, why)``."""
    requests_only = controlled_values(entry.name, resource_policy) == REQUESTS_ONLY
    requests, limits = pod.requests_and_limits(entry.name)
    limit_range_bounds = _container_limit_range_bounds(requests, limits, limit_range)
    policy_bounds = _policy_bounds(container_policy(entry.name, resource_policy))
    annotations: list[str] = []
    conflicts: list[tuple[str, str]] = []
    for bound, annotate in _CONTAINER_ORDER:
        recommendation = entry.bounds[bound]
        if recommendation is None:
            continue
        # applyContainerLimitRange, then applyVPAPolicy, then (RequestsOnly) the limit cap.
        produced = limit_range_bounds.apply(recommendation) if limit_range_bounds else []
        produced += policy_bounds.apply(recommendation) if policy_bounds else []
        found: list[tuple[str, str]] = []
        if limit_range_bounds is not None and policy_bounds is not None and limit_range:
            found = _limit_range_wins(
                recommendation, produced, limit_range_bounds, policy_bounds, limit_range
            )
        if requests_only:
            produced += _cap_to_container_limit(recommendation, limits)
        if annotate:
            annotations.extend(produced)
            conflicts.extend(found)
    return annotations, conflicts


def _frozen(resources: ResourceList | None) -> Mapping[str, Quantity] | None:
    if resources is None:
        return None
    return MappingProxyType({name: resources[name] for name in ordered_names(resources)})


def cap_recommendation(
    *,
    recommendation: RecommendedPodResources | None,
    resource_policy: PodResourcePolicy | None,
    pod: Pod,
    container_limit_range: LimitRangeItem | None,
    pod_limit_range: LimitRangeItem | None,
    containers: PodContainers | None = None,
) -> CappedRecommendation | None:
    """cappingRecommendationProcessor.Apply for ``status.recommendation`` of a VPA.

    ``None`` when there is neither a recommendation nor a resource policy (upstream's nil).
    ``containers`` is ``PodContainers.of(pod)`` when the caller already has it.
    """
    if recommendation is None and resource_policy is None:
        return None
    working = parse_entries(recommendation)
    if containers is None:
        containers = PodContainers.of(pod)
    cap_to_pod_limit_range(working, containers, pod_limit_range)
    pod_containers = set(containers.names)
    capped: list[ContainerRecommendation] = []
    annotations: dict[str, tuple[str, ...]] = {}
    conflicts: list[LimitRangeConflict] = []
    for entry in working:
        if entry.name not in pod_containers:
            continue  # no matching container: upstream logs and drops the entry
        produced, found = _cap_container(entry, containers, resource_policy, container_limit_range)
        if produced:
            annotations[entry.name] = tuple(produced)
        conflicts.extend(LimitRangeConflict(entry.name, name, why) for name, why in found)
        capped.append(
            ContainerRecommendation(
                container_name=entry.name,
                target=_frozen(entry.bounds[TARGET]),
                lower_bound=_frozen(entry.bounds[LOWER_BOUND]),
                upper_bound=_frozen(entry.bounds[UPPER_BOUND]),
                source=entry.source,
            )
        )
    return CappedRecommendation(
        containers=tuple(capped),
        annotations=MappingProxyType(annotations),
        conflicts=tuple(conflicts),
    )
