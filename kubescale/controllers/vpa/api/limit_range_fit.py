"""The last step of admission, beyond upstream: the patched pod must pass the API server.

Upstream's pipeline can answer with a pod kube-apiserver refuses -- ``minAllowed`` raised past
a LimitRange ``max`` (the capping order puts the policy after the LimitRange), a request above
a limit of ``0``, a limit:request ratio broken by a ``RequestsOnly`` request, rounding at a
``min``, a Pod LimitRange exceeded after the policy moved requests -- and then the pod's
ReplicaSet retries forever. This step checks the requests and limits the webhook is about to
set against what the API server will check (:mod:`kubescale.controllers.vpa.api.limit_range_rules`)
and moves them inside; the LimitRange always wins.

Per resource, on the pod as the API server will see it (the container's spec values, overlaid
with what is set; a request missing next to a limit defaults to it):

1. a resource that cannot be overcommitted (extended resources, huge pages) is never changed;
2. per container given the resource: a limit being set is brought into the container
   LimitRange's ``[min, max]``; the request into ``[max(min, limit / maxLimitRequestRatio),
   min(max, limit)]`` (only ``min`` without a limit). The request's lower bound from the ratio
   is the smallest milli-unit (CPU) or byte (others) that passes LimitRanger's float
   comparison. Should the container still fail the rules where it passed them as it came,
   its value is left as it was;
3. the pod's totals (init containers counted as the scheduler does) are checked against the
   Pod LimitRange; if they fail where the pod as it came passed, the resource is left as it
   was in every container -- which passes.

A pod that broke a rule before the webhook (the API server refuses it whatever the webhook
does) is not held to that rule: the fallbacks of steps 2 and 3 apply only to rules the pod
met as it came.

Each change is annotated on its container (``cpu capped to container limit``, ``cpu capped to
fit Max in container LimitRange``, ``cpu limit capped to fit Max in container LimitRange``,
``cpu raised to fit maxLimitRequestRatio in container LimitRange``, ``cpu left unchanged to fit
Pod LimitRange``, ...) and, when a LimitRange made it, reported as a
:class:`LimitRangeConflict` (the webhook records an Event on the VPA with them). Capping a
request at its own container's limit is annotated only: no LimitRange is involved.

Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from kubescale.controllers.vpa.api.current_resources import (
    CPU,
    ResourceList,
    ordered_names,
    parse_resource_list,
)
from kubescale.controllers.vpa.api.limit_range_rules import (
    NamespaceLimits,
    bound_errors,
    overcommit_allowed,
    pod_totals,
    ratio_holds,
)
from kubescale.objects.containers import Container
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import optional_spec_of

__all__ = [
    "CAPPED_TO_CONTAINER_LIMIT",
    "ContainerFit",
    "LimitRangeConflict",
    "fit_to_limit_ranges",
]

CAPPED_TO_CONTAINER_LIMIT = "capped to container limit"
_CONTAINER_MAX = "to fit Max in container LimitRange"
_CONTAINER_MIN = "to fit Min in container LimitRange"
_RATIO = "raised to fit maxLimitRequestRatio in container LimitRange"


@dataclass(frozen=True)
class LimitRangeConflict:
    """A value the VPA wanted that a LimitRange overrode; ``container`` is ``""`` for the pod."""

    container: str
    resource: str
    reason: str

    def describe(self) -> str:
        return f"container {self.container}: {self.reason}" if self.container else self.reason


@dataclass(frozen=True)
class ContainerFit:
    """One container's requests and limits to set after the step, with what it changed."""

    requests: ResourceList
    limits: ResourceList
    annotations: tuple[str, ...]
    """Texts to add to the container's annotation list."""
    unchanged: frozenset[str]
    """Resources the VPA wanted to set and no longer sets (annotations about them are stale)."""


@dataclass
class _Values:
    """A container's request and limit of one resource, and whether the VPA sets them."""

    request: Quantity | None
    limit: Quantity | None
    sets_request: bool
    sets_limit: bool

    def effective_request(self) -> Quantity | None:
        # SetDefaults_Pod: a request missing next to a limit defaults to the limit.
        return self.request if self.request is not None else self.limit


def _spec_resources(container: Container) -> tuple[ResourceList, ResourceList]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}, {}
    requests = parse_resource_list(resources.get("requests")) or {}
    limits = parse_resource_list(resources.get("limits")) or {}
    return requests, limits


def _spec_list(items: object) -> list[Container]:
    """``spec.containers`` / ``spec.initContainers`` as sent: a malformed entry reads as an
    empty container, a malformed list as none."""
    if not isinstance(items, list):
        return []
    return cast(list[Container], [c if isinstance(c, Mapping) else {} for c in items])


def _container_name(container: Container) -> str:
    name: object = container.get("name")
    return name if isinstance(name, str) else ""


def _min_request_for_ratio(resource: str, limit: Quantity, ratio: Quantity) -> Quantity:
    """The smallest request (whole milli-units for CPU, whole units otherwise) whose
    limit/request passes LimitRanger's comparison with ``ratio`` (a positive ratio)."""
    exact = limit.as_fraction() / ratio.as_fraction()
    if resource == CPU:
        milli = math.ceil(exact * 1000)
        for candidate in range(max(milli, 1), max(milli, 1) + 4):
            request = Quantity.from_milli(candidate)
            if ratio_holds(request, limit, ratio):
                return request
        return limit
    units = math.ceil(exact)
    for candidate in range(max(units, 1), max(units, 1) + 4):
        request = Quantity.from_int(candidate, limit.format)
        if ratio_holds(request, limit, ratio):
            return request
    return limit


class _Step:
    """The step for one pod: collects annotations and conflicts while it works."""

    def __init__(self, names: Sequence[str], limits: NamespaceLimits) -> None:
        self.names = names
        self.bounds = limits
        self.annotations: list[list[str]] = [[] for _ in names]
        self.unchanged: list[set[str]] = [set() for _ in names]
        self.conflicts: list[LimitRangeConflict] = []

    def note(self, index: int, resource: str, text: str, reason: str | None) -> None:
        self.annotations[index].append(text)
        if reason is not None:
            self.conflicts.append(LimitRangeConflict(self.names[index], resource, reason))

    def leave_unchanged(self, index: int, resource: str, text: str, reason: str | None) -> None:
        """The container keeps its value of ``resource``: what was noted about it goes."""
        name = self.names[index]
        self.unchanged[index].add(resource)
        self.annotations[index] = [
            t for t in self.annotations[index] if t.split(" ", 1)[0] != resource
        ]
        self.conflicts = [
            c for c in self.conflicts if (c.container, c.resource) != (name, resource)
        ]
        self.note(index, resource, text, reason)

    def fit_container(self, index: int, resource: str, values: _Values) -> None:
        """Step 2 for one container (in place)."""
        container = self.bounds.container
        low = container.min.get(resource)
        high = container.max.get(resource)
        ratio = container.ratio.get(resource)
        limit = values.limit
        if limit is not None and values.sets_limit:
            if high is not None and limit > high:
                self.note(
                    index,
                    resource,
                    f"{resource} limit capped {_CONTAINER_MAX}",
                    f"the {resource} limit {limit} is above the container LimitRange's max "
                    f"{high}: set to {high}",
                )
                limit = values.limit = high
            if low is not None and limit < low:
                self.note(
                    index,
                    resource,
                    f"{resource} limit capped {_CONTAINER_MIN}",
                    f"the {resource} limit {limit} is below the container LimitRange's min "
                    f"{low}: set to {low}",
                )
                limit = values.limit = low
        request = values.effective_request()
        if request is None or not values.sets_request:
            return
        ceiling = limit
        if high is not None and (ceiling is None or high < ceiling):
            ceiling = high
        floor = low
        if (
            ratio is not None
            and limit is not None
            and ratio.sign() > 0
            and limit.sign() > 0
            and not ratio_holds(request, limit, ratio)
        ):
            for_ratio = _min_request_for_ratio(resource, limit, ratio)
            if floor is None or for_ratio > floor:
                floor = for_ratio
        if floor is not None and ceiling is not None and floor > ceiling:
            floor = ceiling
        if ceiling is not None and request > ceiling:
            if ceiling is limit:
                self.note(index, resource, f"{resource} {CAPPED_TO_CONTAINER_LIMIT}", None)
            else:
                self.note(
                    index,
                    resource,
                    f"{resource} capped {_CONTAINER_MAX}",
                    f"the {resource} request {request} is above the container LimitRange's max "
                    f"{high}: set to {ceiling}",
                )
            values.request = ceiling
        elif floor is not None and request < floor:
            if floor is low:
                self.note(
                    index,
                    resource,
                    f"{resource} capped {_CONTAINER_MIN}",
                    f"the {resource} request {request} is below the container LimitRange's min "
                    f"{low}: set to {floor}",
                )
            else:
                self.note(
                    index,
                    resource,
                    f"{resource} {_RATIO}",
                    f"the {resource} request {request} is below limit {limit} / "
                    f"maxLimitRequestRatio {ratio} of the container LimitRange: set to {floor}",
                )
            values.request = floor

    def container_errors(self, resource: str, values: _Values) -> list[str]:
        request, limit = values.effective_request(), values.limit
        errors = bound_errors(resource, "Container", self.bounds.container, request, limit)
        if request is not None and limit is not None and request > limit:
            errors.append(f"{resource} request {request} above its limit {limit}")
        return errors


def _pod_errors(
    step: _Step,
    resource: str,
    values: Sequence[_Values | None],
    originals: Sequence[tuple[ResourceList, ResourceList]],
    init: Sequence[tuple[ResourceList, ResourceList, bool]],
) -> list[str]:
    if not step.bounds.pod.constrains(resource):
        return []
    requests: list[Quantity | None] = []
    limits: list[Quantity | None] = []
    for own, (spec_requests, spec_limits) in zip(values, originals, strict=True):
        if own is None:
            limit = spec_limits.get(resource)
            requests.append(spec_requests.get(resource, limit))
            limits.append(limit)
        else:
            requests.append(own.effective_request())
            limits.append(own.limit)
    init_requests = [(r.get(resource, lim.get(resource)), side) for r, lim, side in init]
    init_limits = [(lim.get(resource), side) for _, lim, side in init]
    return bound_errors(
        resource,
        "Pod",
        step.bounds.pod,
        pod_totals(resource, requests, init_requests),
        pod_totals(resource, limits, init_limits),
    )


def _fit_resource(
    step: _Step,
    resource: str,
    *,
    new_requests: list[dict[str, Quantity] | None],
    new_limits: list[dict[str, Quantity]],
    originals: Sequence[tuple[ResourceList, ResourceList]],
    init: Sequence[tuple[ResourceList, ResourceList, bool]],
) -> None:
    """Steps 1-3 for one resource; the kept values are written back into the maps."""
    per_container: list[_Values | None] = []
    for index, (spec_requests, spec_limits) in enumerate(originals):
        wanted = new_requests[index]
        if wanted is None or (resource not in wanted and resource not in new_limits[index]):
            per_container.append(None)
            continue
        values = _Values(
            request=wanted.get(resource, spec_requests.get(resource)),
            limit=new_limits[index].get(resource, spec_limits.get(resource)),
            sets_request=resource in wanted,
            sets_limit=resource in new_limits[index],
        )
        if not overcommit_allowed(resource):
            per_container.append(None)
            text = f"{resource} left unchanged: requests must equal limits"
            step.leave_unchanged(index, resource, text, None)
            continue
        step.fit_container(index, resource, values)
        errors = step.container_errors(resource, values)
        as_it_was = _Values(
            request=spec_requests.get(resource),
            limit=spec_limits.get(resource),
            sets_request=False,
            sets_limit=False,
        )
        if errors and not step.container_errors(resource, as_it_was):
            per_container.append(None)
            step.leave_unchanged(
                index,
                resource,
                f"{resource} left unchanged to fit container LimitRange",
                f"{resource} left as it was: {'; '.join(errors)}",
            )
            continue
        per_container.append(values)
    pod_errors = _pod_errors(step, resource, per_container, originals, init)
    if pod_errors and not _pod_errors(step, resource, [None] * len(originals), originals, init):
        for index, kept in enumerate(per_container):
            if kept is not None:
                text = f"{resource} left unchanged to fit Pod LimitRange"
                step.leave_unchanged(index, resource, text, None)
        reason = f"{resource} left as it was in every container: {pod_errors[0]}"
        step.conflicts.append(LimitRangeConflict("", resource, reason))
        return
    for index, kept in enumerate(per_container):
        wanted = new_requests[index]
        if kept is None or wanted is None:
            continue
        if kept.sets_request and kept.request is not None:
            wanted[resource] = kept.request
        if kept.sets_limit and kept.limit is not None:
            new_limits[index][resource] = kept.limit


def fit_to_limit_ranges(
    *,
    pod: Pod,
    requests: Sequence[Mapping[str, Quantity] | None],
    limits: Sequence[Mapping[str, Quantity]],
    limit_ranges: NamespaceLimits,
) -> tuple[tuple[ContainerFit, ...], tuple[LimitRangeConflict, ...]]:
    """The step for ``pod`` (see the module docstring).

    ``requests`` and ``limits`` are what admission would set, one entry per
    ``pod.spec.containers`` entry (``None``: the container is not touched).
    """
    spec = optional_spec_of(pod)
    containers = _spec_list(spec.get("containers") if spec is not None else None)
    names = [_container_name(c) for c in containers]
    originals = [_spec_resources(c) for c in containers]
    init = [
        (*_spec_resources(c), c.get("restartPolicy") == "Always")
        for c in _spec_list(spec.get("initContainers") if spec is not None else None)
    ]
    step = _Step(names, limit_ranges)
    new_requests = [dict(r) if r is not None else None for r in requests]
    new_limits = [dict(lim) for lim in limits]
    touched = {name for r in new_requests if r for name in r} | {
        name for lim in new_limits for name in lim
    }
    for resource in ordered_names(touched):
        _fit_resource(
            step,
            resource,
            new_requests=new_requests,
            new_limits=new_limits,
            originals=originals,
            init=init,
        )
    fits = []
    for index in range(len(names)):
        wanted_requests = new_requests[index] or {}
        unchanged = frozenset(step.unchanged[index])
        fits.append(
            ContainerFit(
                requests={k: v for k, v in wanted_requests.items() if k not in unchanged},
                limits={k: v for k, v in new_limits[index].items() if k not in unchanged},
                annotations=tuple(step.annotations[index]),
                unchanged=unchanged,
            )
        )
    return tuple(fits), tuple(step.conflicts)
