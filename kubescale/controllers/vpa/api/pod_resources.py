"""The requests and limits the VPA webhook gives a pod: upstream's ``GetContainersResourcesForPod``.

Given the pod being created and the VPA chosen for it, this decides per container what the
admission patch sets (``resource/pod/recommendation/recommendation_provider.go`` with
``resource_updates.go``), upstream-exact except where upstream's answer would make the pod
uncreatable (step 2's LimitRange-after-policy and step 5):

1. VPA update mode ``Off`` -> nothing but a startup boost (upstream drops requests, limits and
   annotations). No ``status.recommendation`` -> nothing but a startup boost.
2. The recommendation goes through the capping processor
   (:mod:`kubescale.controllers.vpa.api.capping`: pod LimitRange, container LimitRange,
   minAllowed/maxAllowed, RequestsOnly cap); its Target annotations start each container's
   annotation list.
3. A container without a (capped) recommendation entry is skipped; otherwise its requests are
   the capped Target.
4. Limits by ``controlledValues`` (:mod:`kubescale.controllers.vpa.api.limit_scaling`):
   RequestsAndLimits (default) keeps each limit in proportion to the new request, falling back to
   the container LimitRange's ``default``; its annotations are added only when some limit results.
   RequestsOnly leaves limits alone. Empty resource names are purged.
4b. With the ``CPUStartupBoost`` gate (``startup_boost``), the CPU request (and limit, by
   ``controlledValues``) of each container a ``startupBoost`` applies to is boosted
   (:mod:`kubescale.controllers.vpa.api.startup_boost`); beyond upstream, the LimitRange step
   below applies to the boosted values too, and a resource an HPA scales on is not boosted.
5. Beyond upstream, always: the requests and limits to set are checked against what the API
   server checks after the webhooks -- requests at most limits, the namespace's LimitRanges
   (``namespace_limits``) -- and moved inside, the LimitRange winning
   (:mod:`kubescale.controllers.vpa.api.limit_range_fit`); the conflicts are returned for an
   Event.

"Current" requests and limits come from ``status.containerStatuses[].resources`` when set
(:mod:`kubescale.controllers.vpa.api.current_resources`). Output maps are in canonical order (cpu,
memory, others by name) where upstream has Go's random map order.

Quantity formats are upstream's, so ``str()`` of every output is the text upstream patches: a
request is the capped Target quantity as it is (the recommendation's, or the minAllowed /
maxAllowed / LimitRange bound / container limit that capped it); a scaled value takes the
format of the quantity scaled -- CPU ``NewMilliQuantity(v, format)`` (DecimalSI for CPU written
in cores or millicores: ``1333m``, ``4``), memory ``NewQuantity(v, format)`` (``400Mi`` from
BinarySI, ``357913941`` when not a multiple of 1024, ``2G`` / ``333333333`` from DecimalSI); the
int64 cap prints ``9223372036854775807m`` (CPU) / ``9223372036854775807`` (memory).

As upstream, admission reads neither the container policy's ``mode`` nor its
``controlledResources``: the recommender leaves out containers in ``mode: Off`` and resources
not controlled, and admission sets every resource of every container the (capped)
recommendation holds -- a recommendation written before the policy changed, or the entry the
Pod-LimitRange step inserts for a container without one (``mode: Off`` included), is applied
and capped like any other.

Two steps beyond upstream, both off unless asked for:

* ``skip_resources`` (the HPA conflict): those resources get no request and no limit change,
  and annotations about them are dropped;
* ``largest_node_allocatable`` (node fit, :mod:`kubescale.controllers.vpa.api.node_fit`): after
  capping, the requests being set are scaled down so the pod's total requests fit that allocatable,
  with the annotation ``"<res> capped to fit the largest node"``; limits then follow the fitted
  requests.

Pure: raw API dicts in, immutable values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import cast

from kubescale.controllers.vpa.api.capping import (
    REQUESTS_AND_LIMITS,
    cap_recommendation,
    controlled_values,
)
from kubescale.controllers.vpa.api.current_resources import (
    PodContainers,
    ResourceList,
    ordered_names,
)
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict, fit_to_limit_ranges
from kubescale.controllers.vpa.api.limit_range_rules import NamespaceLimits
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.controllers.vpa.api.limit_scaling import proportional_limits
from kubescale.controllers.vpa.api.node_fit import fit_requests_to_node
from kubescale.controllers.vpa.api.startup_boost import (
    CPU,
    StartupBoostSettings,
    boosted_container,
)
from kubescale.controllers.vpa.api.vpa_policy import UPDATE_MODE_OFF, update_mode
from kubescale.objects.containers import Container
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import optional_spec_of, optional_status_of, spec_of
from kubescale.objects.vpa import PodResourcePolicy, RecommendedPodResources, VerticalPodAutoscaler

__all__ = [
    "NODE_FIT_ACTION",
    "ContainerResources",
    "PodResources",
    "capped_recommendation",
    "pod_resources",
]

NODE_FIT_ACTION = "capped to fit the largest node"

_EMPTY: Mapping[str, Quantity] = MappingProxyType({})


@dataclass(frozen=True)
class ContainerResources:
    """What to set on one container; empty maps mean nothing to patch."""

    requests: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)
    limits: Mapping[str, Quantity] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class PodResources:
    """One :class:`ContainerResources` per ``pod.spec.containers`` entry, same order."""

    containers: tuple[ContainerResources, ...]
    annotations: Mapping[str, tuple[str, ...]]
    """Container name -> annotation texts (capping, node fit, limits), in upstream order."""
    conflicts: tuple[LimitRangeConflict, ...] = ()
    """Where a LimitRange overrode what the VPA wanted (beyond upstream: the LimitRange wins)."""
    boosts: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}))
    """Container index -> the ``vpaCpuStartupBoost/<container>`` annotation value (CPU startup
    boost, :mod:`kubescale.controllers.vpa.api.startup_boost`)."""


_NOTHING = ContainerResources()


def _frozen(resources: ResourceList) -> Mapping[str, Quantity]:
    if not resources:
        return _EMPTY
    return MappingProxyType({name: resources[name] for name in ordered_names(resources)})


def _about(annotation: str, names: frozenset[str]) -> bool:
    """Whether an annotation text concerns one of ``names`` (``"cpu capped ..."``,
    ``"cpu: limit NOT set ..."``)."""
    head = annotation.split(" ", 1)[0]
    return head in names or head.removesuffix(":") in names


def _requests_to_set(
    target: Mapping[str, Quantity] | None, skip_resources: frozenset[str]
) -> ResourceList:
    requests = dict(target or {})
    for name in skip_resources:
        requests.pop(name, None)
    requests.pop("", None)  # RemoveEmptyResourceKeyIfAny
    return requests


def _recommendation_of(vpa: VerticalPodAutoscaler) -> RecommendedPodResources | None:
    """``status.recommendation``; ``None`` when missing or not an object (as sent: the
    recommender's status is not validated)."""
    status = optional_status_of(vpa)
    recommendation = status.get("recommendation") if status is not None else None
    return recommendation if isinstance(recommendation, Mapping) else None


def _resource_policy_of(vpa: VerticalPodAutoscaler) -> PodResourcePolicy | None:
    """``spec.resourcePolicy``; ``None`` when missing or not an object."""
    spec = optional_spec_of(vpa)
    policy = spec.get("resourcePolicy") if spec is not None else None
    return policy if isinstance(policy, Mapping) else None


def _recommended_requests(
    *,
    pod: Pod,
    vpa: VerticalPodAutoscaler,
    containers_of_pod: PodContainers,
    resource_policy: PodResourcePolicy | None,
    container_limit_range: LimitRangeItem | None,
    pod_limit_range: LimitRangeItem | None,
    skip_resources: frozenset[str],
) -> tuple[list[ResourceList | None], dict[str, list[str]], tuple[LimitRangeConflict, ...]]:
    """Steps 1-3: per container the requests to set (``None``: nothing), the annotation texts
    and the capping conflicts."""
    names = containers_of_pod.names
    nothing: list[ResourceList | None] = [None for _ in names]
    recommendation = _recommendation_of(vpa)
    if update_mode(vpa) == UPDATE_MODE_OFF or recommendation is None:
        return nothing, {}, ()
    capped = cap_recommendation(
        recommendation=recommendation,
        resource_policy=resource_policy,
        pod=pod,
        container_limit_range=container_limit_range,
        pod_limit_range=pod_limit_range,
        containers=containers_of_pod,
    )
    if capped is None:
        return nothing, {}, ()
    annotations = {name: list(texts) for name, texts in capped.annotations.items()}
    requests_per_container: list[ResourceList | None] = []
    for name in names:
        entry = capped.for_container(name)
        if entry is None:
            requests_per_container.append(None)
            annotations.pop(name, None)
            continue
        requests_per_container.append(_requests_to_set(entry.target, skip_resources))
    return requests_per_container, annotations, capped.conflicts


def _boost(
    *,
    pod: Pod,
    vpa: VerticalPodAutoscaler,
    resource_policy: PodResourcePolicy | None,
    requests_per_container: list[ResourceList | None],
    limits_per_container: list[ResourceList],
    skip_resources: frozenset[str],
    settings: StartupBoostSettings,
) -> dict[int, str]:
    """Step 4b, CPU startup boost (:mod:`kubescale.controllers.vpa.api.startup_boost`): boosts
    in place and returns the boost annotation value per container index. A resource an HPA
    scales on (``skip_resources``) is not boosted either."""
    if CPU in skip_resources:
        return {}
    boosts: dict[int, str] = {}
    containers: object = spec_of(pod).get("containers")  # as sent: entries checked
    for index, entry in enumerate(containers if isinstance(containers, list) else ()):
        if not isinstance(entry, Mapping):
            continue
        container = cast(Container, entry)
        name: object = container.get("name")
        boosted = boosted_container(
            container=container,
            vpa=vpa,
            requests=requests_per_container[index],
            limits=limits_per_container[index],
            controlled_values=controlled_values(
                name if isinstance(name, str) else "", resource_policy
            ),
            settings=settings,
        )
        if boosted is None:
            continue
        requests_per_container[index], limits_per_container[index], boosts[index] = boosted
    return boosts


def pod_resources(
    *,
    pod: Pod,
    vpa: VerticalPodAutoscaler,
    container_limit_range: LimitRangeItem | None,
    pod_limit_range: LimitRangeItem | None,
    skip_resources: frozenset[str] = frozenset(),
    largest_node_allocatable: Mapping[str, Quantity] | None = None,
    namespace_limits: NamespaceLimits | None = None,
    startup_boost: StartupBoostSettings | None = None,
) -> PodResources:
    """The resources and annotations admission sets on ``pod`` for ``vpa``.

    ``namespace_limits`` are the bounds of the namespace's LimitRanges the result must meet
    (none when ``None``; requests are still kept at or below limits). ``startup_boost``: the
    ``CPUStartupBoost`` gate is on (``None``: off).
    """
    containers_of_pod = PodContainers.of(pod)
    names = containers_of_pod.names
    resource_policy = _resource_policy_of(vpa)
    requests_per_container, annotations, capped_conflicts = _recommended_requests(
        pod=pod,
        vpa=vpa,
        containers_of_pod=containers_of_pod,
        resource_policy=resource_policy,
        container_limit_range=container_limit_range,
        pod_limit_range=pod_limit_range,
        skip_resources=skip_resources,
    )
    if startup_boost is None and all(requests is None for requests in requests_per_container):
        return PodResources(
            containers=tuple(_NOTHING for _ in names), annotations=MappingProxyType({})
        )

    if largest_node_allocatable:
        fitted = fit_requests_to_node(
            pod=pod, recommended=requests_per_container, allocatable=largest_node_allocatable
        )
        for index, (requests, lowered) in enumerate(fitted):
            requests_per_container[index] = requests
            for resource in lowered:
                annotations.setdefault(names[index], []).append(f"{resource} {NODE_FIT_ACTION}")

    default_limits = container_limit_range.default if container_limit_range is not None else None
    limits_per_container: list[ResourceList] = []
    for name, requests in zip(names, requests_per_container, strict=True):
        limits: ResourceList = {}
        if requests is not None and controlled_values(name, resource_policy) == REQUESTS_AND_LIMITS:
            current_requests, current_limits = containers_of_pod.requests_and_limits(name)
            proportional, limit_annotations = proportional_limits(
                original_limits=current_limits,
                original_requests=current_requests,
                recommendation=requests,
                default_limits=default_limits,
            )
            if proportional is not None:
                limits = {k: v for k, v in proportional.items() if k not in skip_resources}
                kept = [text for text in limit_annotations if not _about(text, skip_resources)]
                if kept:
                    annotations.setdefault(name, []).extend(kept)
        limits_per_container.append(limits)

    boosts: dict[int, str] = {}
    if startup_boost is not None:
        boosts = _boost(
            pod=pod,
            vpa=vpa,
            resource_policy=resource_policy,
            requests_per_container=requests_per_container,
            limits_per_container=limits_per_container,
            skip_resources=skip_resources,
            settings=startup_boost,
        )

    # Beyond upstream: what is set must pass the API server (the LimitRange wins).
    fits, fit_conflicts = fit_to_limit_ranges(
        pod=pod,
        requests=requests_per_container,
        limits=limits_per_container,
        limit_ranges=namespace_limits or NamespaceLimits(),
    )
    containers: list[ContainerResources] = []
    unchanged: dict[str, frozenset[str]] = {}
    for name, requests, fit in zip(names, requests_per_container, fits, strict=True):
        if requests is None:
            containers.append(_NOTHING)
            continue
        containers.append(
            ContainerResources(requests=_frozen(fit.requests), limits=_frozen(fit.limits))
        )
        if fit.unchanged or fit.annotations:
            unchanged[name] = fit.unchanged
            texts = [t for t in annotations.get(name, []) if not _about(t, fit.unchanged)]
            annotations[name] = [*texts, *fit.annotations]

    if skip_resources:
        annotations = {
            name: [text for text in texts if not _about(text, skip_resources)]
            for name, texts in annotations.items()
        }
    conflicts = [
        conflict
        for conflict in capped_conflicts
        if conflict.resource not in skip_resources
        and conflict.resource not in unchanged.get(conflict.container, frozenset())
    ]
    return PodResources(
        containers=tuple(containers),
        annotations=MappingProxyType(
            {name: tuple(texts) for name, texts in annotations.items() if texts}
        ),
        conflicts=(*conflicts, *fit_conflicts),
        boosts=MappingProxyType(boosts),
    )


def capped_recommendation(
    *,
    vpa: VerticalPodAutoscaler,
    pod: Pod,
    container_limit_range: LimitRangeItem | None,
    pod_limit_range: LimitRangeItem | None,
) -> RecommendedPodResources:
    """The capping processor's output for ``pod`` as a ``status.recommendation``-shaped dict.

    ``{"containerRecommendations": [...]}`` with capped ``target``/``lowerBound``/``upperBound``
    (other fields such as ``uncappedTarget`` as they were); ``{}`` when the VPA has neither a
    recommendation nor a resource policy. Annotations are dropped (the updater, reference §3.4,
    does not use them).
    """
    capped = cap_recommendation(
        recommendation=_recommendation_of(vpa),
        resource_policy=_resource_policy_of(vpa),
        pod=pod,
        container_limit_range=container_limit_range,
        pod_limit_range=pod_limit_range,
    )
    if capped is None:
        return {}
    return {"containerRecommendations": [entry.to_json() for entry in capped.containers]}
