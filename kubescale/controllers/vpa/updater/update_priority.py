"""Which VPAs and pods the updater acts on, and in which order: upstream's update priority.

The VPA updater (``pkg/updater/``) only ever disrupts a pod whose requests are worth changing.
This module holds those decisions, upstream-exact, as pure functions over raw API dicts:

* :func:`vpa_is_updated` -- the VPA modes the updater acts on (``logic/updater.go``): Recreate
  (also the default when ``updatePolicy.updateMode`` is unset), Auto, InPlaceOrRecreate, and
  InPlace only with its feature gate; Off and Initial never.
* :func:`pod_is_updatable` -- the pods it looks at: scheduled (``spec.nodeName``), not
  Succeeded/Failed, not being deleted.
* :func:`update_priority` -- ``priority_processor.go GetUpdatePriority`` over the *capped*
  recommendation (the same capping processor the admission webhook uses,
  :func:`kubescale.controllers.vpa.api.pod_resources.capped_recommendation`).
* :func:`pod_priority` / :func:`prioritized_pods` -- ``update_priority_calculator.go``:
  ``AddPod`` acceptance (outside range, quick OOM, lifetime + MinChangePriority) and
  ``GetSortedPods`` ordering (ScaleUp first, then larger ResourceDiff), followed by the
  ``EvictionRequirements`` admission (``scaling_direction_pod_eviction_admission.go``,
  :func:`eviction_requirements_admit`).

Containers are restricted to the ones named in the pod's ``vpaObservedContainers`` annotation
(written by admission) when it parses; an unparseable annotation means every container.

Deliberate differences: upstream sorts with an unstable sort, here ties are broken by pod
namespace/name so the order is deterministic; per-resource sums run in canonical resource order
(cpu, memory, others by name) where upstream iterates a Go map. Not covered here: the InPlace
mode's "infeasible attempt" cache and native-sidecar container statuses (feature gates).

Pure: no I/O, no clock reads -- ``now`` is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final, cast

from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.current_resources import (
    ResourceList,
    container_requests_and_limits,
    ordered_names,
)
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.controllers.vpa.api.pod_resources import capped_recommendation
from kubescale.controllers.vpa.api.vpa_policy import container_policy, update_mode
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import Meta, mapping, raw_status, spec_of, status_of
from kubescale.objects.vpa import (
    EvictionRequirement,
    PodUpdatePolicy,
    RecommendedContainerResources,
    RecommendedPodResources,
    VerticalPodAutoscaler,
)
from kubescale.rendering.quantity_text import apart, human_bytes, human_cores

__all__ = [
    "OBSERVED_CONTAINERS_ANNOTATION",
    "OutOfRange",
    "PodPriority",
    "UpdatePriority",
    "UpdateSettings",
    "eviction_requirements_admit",
    "is_terminating",
    "observed_containers",
    "parse_observed_containers",
    "pod_is_updatable",
    "pod_priority",
    "prioritized_pods",
    "quick_oom",
    "quick_oom_reason",
    "update_priority",
    "vpa_is_updated",
]

OBSERVED_CONTAINERS_ANNOTATION = "vpaObservedContainers"
_LIST_SEPARATOR = ", "  # annotations.listSeparator
# validation.IsDNS1123Label: lowercase alphanumerics and '-', alphanumeric at both ends, <= 63.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL_MAX = 63

# GetUpdateMode: an unset updatePolicy / updateMode means Recreate.
_EVICTING_MODES = frozenset({"Recreate", "Auto", "InPlaceOrRecreate"})
_IN_PLACE_MODE = "InPlace"
_CONTAINER_MODE_OFF = "Off"
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
_OOM_KILLED = "OOMKilled"
_TARGET_HIGHER = "TargetHigherThanRequests"
_TARGET_LOWER = "TargetLowerThanRequests"
_CPU = "cpu"
_MEMORY = "memory"
_HUMAN: Final[dict[str, Callable[[float | None, int | None], str]]] = {
    _CPU: human_cores,
    _MEMORY: human_bytes,
}
"""How a reason writes a resource's quantities (cores, binary bytes); others as Kubernetes'."""
# A missing metav1.Time is Go's zero time, 0001-01-01T00:00:00Z.
_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class UpdateSettings:
    """The updater flags that shape priority (reference §3.1), with upstream's defaults."""

    pod_update_threshold: float = 0.1
    """``--pod-update-threshold``: UpdateConfig.MinChangePriority."""
    lifetime_threshold: timedelta = timedelta(hours=12)
    """``--in-recommendation-bounds-eviction-lifetime-threshold``."""
    evict_after_oom_threshold: timedelta = timedelta(minutes=10)
    """``--evict-after-oom-threshold``."""
    in_place_gate: bool = False
    """Feature gate ``InPlace``: whether VPAs in mode InPlace are acted on."""
    per_vpa_config: bool = False
    """Feature gate ``PerVPAConfig``: honour ``updatePolicy.evictAfterOOMSeconds``."""
    cpu_startup_boost: bool = False
    """Feature gate ``CPUStartupBoost``: boosted pods are unboosted, not updated, meanwhile."""


@dataclass(frozen=True)
class OutOfRange:
    """One container's request that puts the pod outside its recommended range: below the
    lowerBound, above the upperBound, or missing (upstream: each sets
    ``OutsideRecommendedRange``)."""

    container: str
    resource: str
    request: Quantity | None
    """``None``: the container requests none of ``resource``."""
    bound: Quantity | None
    """The lowerBound the request is below, or the upperBound it is above."""
    target: Quantity

    @property
    def text(self) -> str:
        """``redis memory request 362.6Mi below the lower bound 400.0Mi (target 450.0Mi)``."""
        human = _HUMAN.get(self.resource)
        target = human(self.target.as_float(), None) if human else str(self.target)
        where = f"{self.container} {self.resource} request"
        if self.request is None or self.bound is None:
            return f"{where} unset (target {target})"
        side = "below the lower" if self.request < self.bound else "above the upper"
        if human is None:
            shown, bound = str(self.request), str(self.bound)
        else:
            shown, bound = apart(self.request.as_float(), self.bound.as_float(), human)
        return f"{where} {shown} {side} bound {bound} (target {target})"


@dataclass(frozen=True)
class UpdatePriority:
    """``PodPriority`` of upstream: what an update of one pod would change."""

    outside_recommended_range: bool
    scale_up: bool
    resource_diff: float
    """Σ over resources of |ΣRequest − ΣTarget| / max(ΣRequest, 1), sums in milli-units."""
    out_of_range: tuple[OutOfRange, ...] = field(default=(), compare=False)
    """Why it is outside the range: each request below / above its bounds, or missing."""


@dataclass(frozen=True)
class PodPriority:
    """A pod accepted for update, with its priority and the capped recommendation used."""

    pod: Pod = field(hash=False)
    priority: UpdatePriority
    recommendation: RecommendedPodResources = field(hash=False)
    """The capped ``status.recommendation`` (``containerRecommendations``)."""
    reason: str = field(default="", compare=False)
    """Why :func:`pod_priority` accepted it, one line, by upstream's ``AddPod`` rules in
    their order: the requests outside the recommended range (:attr:`OutOfRange.text`), a
    quick OOM, or a ResourceDiff of at least ``--pod-update-threshold`` after the lifetime
    threshold (or, for a pod on no node, without it)."""


# -- VPAs and pods ------------------------------------------------------------------------------


def _update_policy(vpa: VerticalPodAutoscaler) -> PodUpdatePolicy | None:
    policy = spec_of(vpa).get("updatePolicy")
    return policy if isinstance(policy, Mapping) else None


def vpa_is_updated(vpa: VerticalPodAutoscaler, *, in_place_gate: bool = False) -> bool:
    """Whether the updater acts on this VPA's pods (Off and Initial: never)."""
    mode = update_mode(vpa)
    return mode in _EVICTING_MODES or (mode == _IN_PLACE_MODE and in_place_gate)


def is_terminating(pod: Pod) -> bool:
    """Being deleted and not finished: a pod that is going, still counted in its group's size
    (:func:`kubescale.controllers.vpa.updater.eviction_restriction.configured_replicas`)."""
    if status_of(pod).get("phase") in _FINISHED_PHASES:
        return False
    return Meta(pod).raw.get("deletionTimestamp") is not None


def pod_is_updatable(pod: Pod, *, unschedulable_too: bool = False) -> bool:
    """Scheduled, not terminated, not being deleted (updater.go's pod filter).

    ``unschedulable_too`` (``--coordination one-brain``): also a pod the scheduler could not
    place (``PodScheduled=False``, reason ``Unschedulable``): upstream never replaces it, so it
    waits with the requests it was created with while the cluster autoscaler adds nodes for
    them; replacing it disrupts nothing (it runs nowhere) and its replacement gets the
    requests the cluster autoscaler sized its scale-up for."""
    if not spec_of(pod).get("nodeName"):
        return unschedulable_too and _unschedulable(pod)
    if status_of(pod).get("phase") in _FINISHED_PHASES:
        return False
    return Meta(pod).raw.get("deletionTimestamp") is None


def _unschedulable(pod: Pod) -> bool:
    status = status_of(pod)
    if status.get("phase") not in (None, "Pending"):
        return False
    if Meta(pod).raw.get("deletionTimestamp") is not None:
        return False
    conditions = mapping(raw_status(pod)).get("conditions")  # entries may be malformed
    return any(
        isinstance(c, Mapping)
        and c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions or ()
    )


def parse_observed_containers(value: str) -> frozenset[str] | None:
    """ParseVpaObservedContainersValue: names split on ``", "``; ``None`` when unparseable.

    An empty value is an empty set (no container observed); any name that is not a DNS-1123
    label makes the whole value unparseable.
    """
    if value == "":
        return frozenset()
    names = value.split(_LIST_SEPARATOR)
    for name in names:
        if len(name) > _DNS1123_LABEL_MAX or _DNS1123_LABEL.fullmatch(name) is None:
            return None
    return frozenset(names)


def observed_containers(pod: Pod) -> frozenset[str] | None:
    """The containers the priority looks at; ``None`` means all (no or unparseable annotation)."""
    value = mapping(Meta(pod).raw.get("annotations")).get(OBSERVED_CONTAINERS_ANNOTATION)
    if not isinstance(value, str):
        return None
    return parse_observed_containers(value)


# -- priority -----------------------------------------------------------------------------------


def _container_names(pod: Pod, key: str) -> list[str]:
    containers = spec_of(pod).get(key)
    names: list[str] = []
    for container in containers if isinstance(containers, list) else ():
        name = mapping(container).get("name")
        names.append(name if isinstance(name, str) else "")
    return names


def _recommendations_by_name(
    recommendation: RecommendedPodResources,
) -> dict[str, RecommendedContainerResources]:
    """GetRecommendationForContainer as a lookup: the first entry per container name."""
    entries = recommendation.get("containerRecommendations")
    found: dict[str, RecommendedContainerResources] = {}
    for entry in entries if isinstance(entries, list) else ():
        name = mapping(entry).get("containerName")
        if isinstance(name, str) and name not in found:
            found[name] = entry
    return found


def _resource_list(value: object) -> ResourceList:
    return {str(k): Quantity.from_json(v) for k, v in mapping(value).items()}


def update_priority(*, pod: Pod, recommendation: RecommendedPodResources) -> UpdatePriority:
    """GetUpdatePriority of ``pod`` against an (already capped) recommendation.

    Per observed container with a recommendation, per resource in its Target: ScaleUp if the
    target's milli-value exceeds the request's; OutsideRecommendedRange if the request is below
    the lowerBound or above the upperBound; a missing request sets both. App containers, then
    init containers, as upstream; requests are the applied ones (status before spec).
    """
    observed = observed_containers(pod)
    by_name = _recommendations_by_name(recommendation)
    total_request: dict[str, int] = {}
    total_recommended: dict[str, int] = {}
    outside = False
    scale_up = False
    misses: list[OutOfRange] = []
    for key, init in (("containers", False), ("initContainers", True)):
        for name in _container_names(pod, key):
            if observed is not None and name not in observed:
                continue
            entry = by_name.get(name)
            if entry is None:
                continue
            target = _resource_list(entry.get("target"))
            lower = _resource_list(entry.get("lowerBound"))
            upper = _resource_list(entry.get("upperBound"))
            requests = container_requests_and_limits(pod, name, init=init)[0] or {}
            for resource in ordered_names(target):
                recommended = target[resource].milli_value()
                total_recommended[resource] = total_recommended.get(resource, 0) + recommended
                request = requests.get(resource)
                if request is None:
                    scale_up = outside = True
                    misses.append(OutOfRange(name, resource, None, None, target[resource]))
                    continue
                total_request[resource] = total_request.get(resource, 0) + request.milli_value()
                if recommended > request.milli_value():
                    scale_up = True
                if resource in lower and request < lower[resource]:
                    outside = True
                    misses.append(
                        OutOfRange(name, resource, request, lower[resource], target[resource])
                    )
                elif resource in upper and request > upper[resource]:
                    outside = True
                    misses.append(
                        OutOfRange(name, resource, request, upper[resource], target[resource])
                    )
    resource_diff = 0.0
    for resource in ordered_names(total_recommended):
        requested = max(float(total_request.get(resource, 0)), 1.0)
        resource_diff += abs(requested - float(total_recommended[resource])) / requested
    return UpdatePriority(
        outside_recommended_range=outside,
        scale_up=scale_up,
        resource_diff=resource_diff,
        out_of_range=tuple(misses),
    )


def _oom_threshold(vpa: VerticalPodAutoscaler, settings: UpdateSettings) -> timedelta:
    """getEvictOOMThreshold: per-VPA ``evictAfterOOMSeconds`` only with PerVPAConfig."""
    seconds = mapping(_update_policy(vpa)).get("evictAfterOOMSeconds")
    if settings.per_vpa_config and isinstance(seconds, int) and not isinstance(seconds, bool):
        return timedelta(seconds=seconds)
    return settings.evict_after_oom_threshold


def quick_oom(*, pod: Pod, vpa: VerticalPodAutoscaler, settings: UpdateSettings) -> bool:
    """Some observed, non-``Off`` container was OOMKilled after running less than the threshold.

    Reads ``status.containerStatuses[].lastState.terminated``; a missing ``startedAt`` /
    ``finishedAt`` counts as Go's zero time, as upstream.
    """
    return quick_oom_reason(pod=pod, vpa=vpa, settings=settings) is not None


def quick_oom_reason(
    *, pod: Pod, vpa: VerticalPodAutoscaler, settings: UpdateSettings
) -> str | None:
    """:func:`quick_oom` as the reason it gives: the first such container, how long it ran
    and the threshold; ``None`` when there is none."""
    observed = observed_containers(pod)
    resource_policy = spec_of(vpa).get("resourcePolicy")
    threshold = _oom_threshold(vpa, settings)
    statuses = status_of(pod).get("containerStatuses")
    for status in statuses if isinstance(statuses, list) else ():
        name = mapping(status).get("name")
        if observed is not None and name not in observed:
            continue  # not supported by the quick OOM logic upstream
        policy = container_policy(
            name if isinstance(name, str) else "",
            resource_policy if isinstance(resource_policy, Mapping) else None,
        )
        if policy is not None and policy.get("mode") == _CONTAINER_MODE_OFF:
            continue
        terminated = mapping(mapping(mapping(status).get("lastState")).get("terminated"))
        if terminated.get("reason") != _OOM_KILLED:
            continue
        started = parse_time(terminated.get("startedAt")) or _GO_ZERO_TIME
        finished = parse_time(terminated.get("finishedAt")) or _GO_ZERO_TIME
        if finished - started < threshold:
            return (
                f"{name} OOM-killed after running {_duration(finished - started)}, within "
                f"--evict-after-oom-threshold {_duration(threshold)}"
            )
    return None


def _duration(delta: timedelta) -> str:
    """Go's ``time.Duration.String`` for whole seconds (``10m0s``, ``12h0m0s``, ``45s``)."""
    seconds = int(delta.total_seconds())
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def pod_priority(
    *,
    vpa: VerticalPodAutoscaler,
    pod: Pod,
    recommendation: RecommendedPodResources,
    now: datetime,
    settings: UpdateSettings,
) -> PodPriority | None:
    """AddPod: the pod's priority if it is accepted for update, else ``None``.

    Accepted when outside the recommended range, or after a quick OOM; otherwise it needs
    ``status.startTime``, an age of at least the lifetime threshold and a ResourceDiff of at
    least ``pod_update_threshold``. A quick-OOM pod whose resources would not change
    (ResourceDiff 0) is rejected.

    A pod on no node — only ever offered with ``--coordination one-brain``, which also
    replaces unschedulable pods (:func:`pod_is_updatable`) — needs only the ResourceDiff: the
    lifetime threshold keeps a running pod from being disrupted for a change within the
    recommended range, and this pod runs nowhere. Without it a pod created before its VPA had
    a recommendation stays Pending with its stale requests while the bounds of a young
    recommendation are wide, though the cluster autoscaler sized its scale-up for the
    recommended requests (``requests_ahead``).
    """
    priority = update_priority(pod=pod, recommendation=recommendation)
    oomed = quick_oom_reason(pod=pod, vpa=vpa, settings=settings)
    drift = (
        f"requests {priority.resource_diff:.2f} from the target "
        f"(--pod-update-threshold {settings.pod_update_threshold:g})"
    )
    if priority.outside_recommended_range:
        reason = "; ".join(miss.text for miss in priority.out_of_range)
    elif oomed is not None:
        reason = oomed
    elif spec_of(pod).get("nodeName"):
        started = parse_time(status_of(pod).get("startTime"))
        if started is None:
            return None
        if now < started + settings.lifetime_threshold:
            return None  # short-lived pod, request within recommended range
        reason = (
            f"{drift} after running {_duration(now - started)} "
            "(--in-recommendation-bounds-eviction-lifetime-threshold "
            f"{_duration(settings.lifetime_threshold)})"
        )
    else:
        reason = f"{drift}, not scheduled"
    within = not priority.outside_recommended_range and oomed is None
    if within and priority.resource_diff < settings.pod_update_threshold:
        return None
    if oomed is not None and priority.resource_diff == 0:
        return None
    return PodPriority(pod=pod, priority=priority, recommendation=recommendation, reason=reason)


def _eviction_requirements(vpa: VerticalPodAutoscaler) -> list[EvictionRequirement] | None:
    """``None`` without an updatePolicy (everything admitted), else its requirements."""
    policy = _update_policy(vpa)
    if policy is None:
        return None
    requirements = policy.get("evictionRequirements")
    return list(requirements) if isinstance(requirements, list) else []


def _requirement_holds(
    requirement: EvictionRequirement, requests: ResourceList, target: ResourceList
) -> bool:
    """Any listed resource satisfies the change requirement (milli-values, missing = 0)."""
    fields = mapping(requirement)  # an entry may be malformed: a non-object reads empty
    change = fields.get("changeRequirement")
    resources = fields.get("resources")
    for resource in resources if isinstance(resources, list) else ():
        requested = requests[resource].milli_value() if resource in requests else 0
        recommended = target[resource].milli_value() if resource in target else 0
        if change == _TARGET_HIGHER and recommended > requested:
            return True
        if change == _TARGET_LOWER and recommended < requested:
            return True
    return False


def eviction_requirements_admit(
    *, vpa: VerticalPodAutoscaler, pod: Pod, recommendation: RecommendedPodResources
) -> bool:
    """scalingDirectionPodEvictionAdmission.Admit.

    No ``updatePolicy`` -> admitted. Otherwise some app container with a recommendation must
    either miss a cpu or memory request, or satisfy *all* requirements.
    """
    requirements = _eviction_requirements(vpa)
    if requirements is None:
        return True
    by_name = _recommendations_by_name(recommendation)
    for name in _container_names(pod, "containers"):
        entry = by_name.get(name)
        if entry is None:
            continue  # container mode Off: no recommendation
        requests = container_requests_and_limits(pod, name)[0] or {}
        if _CPU not in requests or _MEMORY not in requests:
            return True
        target = _resource_list(entry.get("target"))
        if all(_requirement_holds(r, requests, target) for r in requirements):
            return True
    return False


def _order_key(entry: PodPriority) -> tuple[bool, float, str, str]:
    metadata = Meta(entry.pod).raw
    return (
        not entry.priority.scale_up,
        -entry.priority.resource_diff,
        str(metadata.get("namespace", "")),
        str(metadata.get("name", "")),
    )


def prioritized_pods(
    *,
    vpa: VerticalPodAutoscaler,
    pods: Iterable[Pod],
    now: datetime,
    settings: UpdateSettings,
    container_limit_range: LimitRangeItem | None = None,
    pod_limit_range: LimitRangeItem | None = None,
    skip_resources: frozenset[str] = frozenset(),
) -> list[PodPriority]:
    """The pods of ``vpa`` to update, highest priority first (GetSortedPods).

    ``skip_resources`` (``--coordination one-brain``: the resources an HPA on the VPA's
    target scales on) are taken out of every recommendation first: the webhook will not set
    them, so a pod is not updated for them.

    Each pod's recommendation is the VPA's, capped for that pod (LimitRanges, resource
    policy); pods not accepted by :func:`pod_priority` or refused by
    :func:`eviction_requirements_admit` are left out. Callers pass pods already filtered
    by :func:`pod_is_updatable` and matched to ``vpa``.
    """
    accepted: list[PodPriority] = []
    for pod in pods:
        recommendation = capped_recommendation(
            vpa=vpa,
            pod=pod,
            container_limit_range=container_limit_range,
            pod_limit_range=pod_limit_range,
        )
        if skip_resources:
            recommendation = without_resources(recommendation, skip_resources)
        entry = pod_priority(
            vpa=vpa, pod=pod, recommendation=recommendation, now=now, settings=settings
        )
        if entry is not None:
            accepted.append(entry)
    accepted.sort(key=_order_key)
    return [
        entry
        for entry in accepted
        if eviction_requirements_admit(vpa=vpa, pod=entry.pod, recommendation=entry.recommendation)
    ]


def without_resources(
    recommendation: RecommendedPodResources, resources: frozenset[str]
) -> RecommendedPodResources:
    """``recommendation`` without ``resources`` in any of its containers'
    ``target``/``lowerBound``/``upperBound``/``uncappedTarget``."""
    containers: list[RecommendedContainerResources] = []
    # Read as sent: a malformed entry is dropped (the VPA object is not validated).
    entries: object = recommendation.get("containerRecommendations")
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping):
            continue
        container = cast(RecommendedContainerResources, entry)
        trimmed = cast(RecommendedContainerResources, dict(entry))
        if isinstance(values := container.get("target"), Mapping):
            trimmed["target"] = _without(values, resources)
        if isinstance(values := container.get("lowerBound"), Mapping):
            trimmed["lowerBound"] = _without(values, resources)
        if isinstance(values := container.get("upperBound"), Mapping):
            trimmed["upperBound"] = _without(values, resources)
        if isinstance(values := container.get("uncappedTarget"), Mapping):
            trimmed["uncappedTarget"] = _without(values, resources)
        containers.append(trimmed)
    return {**recommendation, "containerRecommendations": containers}


def _without(values: Mapping[str, str], resources: frozenset[str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if k not in resources}
