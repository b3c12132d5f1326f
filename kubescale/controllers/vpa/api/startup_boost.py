"""CPU startup boost (VPA feature gate ``CPUStartupBoost``, AEP-7862): a container gets more CPU
while it starts, and the updater lowers it in place once the pod has been Ready long enough.

Upstream's rules, ``resource/pod/patch/resource_updates.go`` (admission) and
``pkg/utils/vpa/api.go`` (updater); reference §1.5 and §3.2:

* **Policy** (``getContainerStartupBoostPolicy``): the container policy's ``startupBoost``
  (the entry named after the container, else ``*``), else the VPA's ``spec.startupBoost``. A
  container whose policy has ``mode: Off`` is not boosted. A VPA whose update mode is ``Off``
  still boosts (its recommendations are not applied, the boost is).
* **Boosted CPU request** (``calculateBoostedCPU``): the base is the recommended CPU request,
  or the container's own request when there is none (zero). ``Factor`` (the default type):
  ``int64(float64(base milli) * factor)`` millicores, a factor below 1 an error; ``Quantity``:
  base milli + the quantity's milli (``MilliValue``, rounded up). ``NewMilliQuantity(v,
  DecimalSI)``. Capped at ``--max-allowed-cpu-boost`` when that is set (non-zero).
* **Limit** (``applyControlledCPUResources``): ``RequestsAndLimits`` -- the CPU limit in
  proportion to the boosted request (``GetProportionalLimit`` of the container's own request and
  limit; no change when that gives none); ``RequestsOnly`` -- the limit stays and the boosted
  request is capped 1m below it (at the limit itself when the limit is at most 1m).
* **Annotation** ``vpaCpuStartupBoost/<container>`` = JSON of the container's original CPU and
  memory requests and limits, ``{"requests":{...},"limits":{...}}`` (Go's ``json.Marshal``:
  keys sorted, quantities as their canonical strings, empty maps ``{}``). Its patch comes right
  before the container's resource patches.
* **Expiry** (``GetExpiredStartupCPUBoostAnnotations``): none while the pod's ``Ready``
  condition is not ``True``; then each boost annotation whose container's ``durationSeconds``
  (the container policy's, else the VPA's; unset = 0) is 0 or has passed since the condition's
  ``lastTransitionTime``.
* **Unboost** (the updater, ``CanUnboost`` + ``InPlaceUpdate``): a pod not Pending, not in an
  in-place resize, in a replica group that may be disrupted, is resized in place to what
  admission would give it without the boost -- the VPA's recommendation, or the container's
  original CPU request and limit from the annotation when there is no recommendation to apply --
  and its expired boost annotations are removed.

Pure: raw API dicts in, values out; the time is passed in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.current_resources import ResourceList
from kubescale.controllers.vpa.api.limit_scaling import proportional_limits
from kubescale.controllers.vpa.api.vpa_policy import container_policy
from kubescale.objects.containers import Container
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import DECIMAL_SI, Quantity, QuantityError
from kubescale.objects.views import Meta, mapping, spec_of, status_of
from kubescale.objects.vpa import StartupBoost, VerticalPodAutoscaler

__all__ = [
    "STARTUP_BOOST_ANNOTATION_PREFIX",
    "StartupBoostError",
    "StartupBoostSettings",
    "boost_annotation",
    "boost_duration_seconds",
    "boosted_container",
    "boosted_cpu",
    "expired_boost_annotations",
    "has_boost_in_progress",
    "original_resources",
    "original_resources_value",
    "startup_boost_policy",
    "unboosted_resources",
]

STARTUP_BOOST_ANNOTATION_PREFIX: Final = "vpaCpuStartupBoost/"
CPU: Final = "cpu"
MEMORY: Final = "memory"
FACTOR: Final = "Factor"
QUANTITY: Final = "Quantity"
_ONE_MILLI: Final = Quantity.from_milli(1)


class StartupBoostError(ValueError):
    """A startup boost upstream refuses to compute (the pod is admitted without a patch)."""


@dataclass(frozen=True)
class StartupBoostSettings:
    """The boost is on (gate ``CPUStartupBoost``); ``max_allowed_cpu_boost`` is
    ``--max-allowed-cpu-boost`` (``None`` or zero: no cap)."""

    max_allowed_cpu_boost: Quantity | None = None


def boost_annotation(container: str) -> str:
    """The annotation holding ``container``'s original resources while it is boosted."""
    return STARTUP_BOOST_ANNOTATION_PREFIX + container


def has_boost_in_progress(pod: Pod) -> bool:
    """``PodHasCPUBoostInProgressAnnotation``."""
    annotations = mapping(Meta(pod).raw.get("annotations"))
    return any(str(key).startswith(STARTUP_BOOST_ANNOTATION_PREFIX) for key in annotations)


def startup_boost_policy(container: str, vpa: VerticalPodAutoscaler) -> StartupBoost | None:
    """The ``startupBoost`` that applies to ``container`` (``None``: not boosted)."""
    spec = spec_of(vpa)
    policy = container_policy(container, spec.get("resourcePolicy"))
    if policy is not None and policy.get("mode") == "Off":
        return None
    boost = policy.get("startupBoost") if policy is not None else None
    if boost is None:
        boost = spec.get("startupBoost")
    # as sent: a malformed (non-object) boost is no boost
    return boost if isinstance(boost, Mapping) else None


def boost_duration_seconds(container: str, vpa: VerticalPodAutoscaler) -> int:
    """``getContainerCPUStartupBoostDuration``: the container policy's ``durationSeconds``,
    else the VPA's, else 0."""
    spec = spec_of(vpa)
    duration: object = mapping(mapping(spec.get("startupBoost")).get("cpu")).get("durationSeconds")
    policy = container_policy(container, spec.get("resourcePolicy"))
    if policy is not None:
        own: object = mapping(mapping(policy.get("startupBoost")).get("cpu")).get("durationSeconds")
        if own is not None:
            duration = own
    return duration if isinstance(duration, int) and not isinstance(duration, bool) else 0


def boosted_cpu(
    base: Quantity, boost: StartupBoost, *, max_allowed: Quantity | None = None
) -> Quantity:
    """``calculateBoostedCPUValue`` then the ``--max-allowed-cpu-boost`` cap."""
    cpu = mapping(boost.get("cpu"))
    kind: object = cpu.get("type") or FACTOR
    if kind == FACTOR:
        factor: object = cpu.get("factor")
        if not isinstance(factor, int) or isinstance(factor, bool):
            raise StartupBoostError(
                "startupBoost.CPU.Factor is required when Type is Factor or not specified"
            )
        if factor < 1:
            raise StartupBoostError("boost factor must be >= 1")
        boosted = Quantity.from_milli(int(float(base.milli_value()) * float(factor)), DECIMAL_SI)
    elif kind == QUANTITY:
        raw = cpu.get("quantity")
        if raw is None:
            raise StartupBoostError("startupBoost.CPU.Quantity is required when Type is Quantity")
        try:
            quantity = Quantity.from_json(raw)
        except QuantityError as error:
            raise StartupBoostError(f"startupBoost.CPU.Quantity: {error}") from error
        boosted = Quantity.from_milli(base.milli_value() + quantity.milli_value(), DECIMAL_SI)
    else:
        raise StartupBoostError(f"unsupported startup boost type: {kind}")
    if max_allowed is not None and not max_allowed.is_zero() and boosted > max_allowed:
        return max_allowed
    return boosted


def original_resources(container: Container) -> tuple[ResourceList, ResourceList]:
    """The container's own CPU and memory requests and limits (its spec)."""
    resources = mapping(container.get("resources"))
    found: list[ResourceList] = []
    for field in ("requests", "limits"):
        values = mapping(resources.get(field))
        found.append(
            {name: Quantity.from_json(values[name]) for name in (CPU, MEMORY) if name in values}
        )
    return found[0], found[1]


def original_resources_value(container: Container) -> str:
    """``GetOriginalResourcesAnnotationValue``: the annotation's JSON, as Go marshals it."""
    requests, limits = original_resources(container)
    document = {
        "requests": {name: str(value) for name, value in sorted(requests.items())},
        "limits": {name: str(value) for name, value in sorted(limits.items())},
    }
    return json.dumps(document, separators=(",", ":"))


def boosted_container(
    *,
    container: Container,
    vpa: VerticalPodAutoscaler,
    requests: ResourceList | None,
    limits: ResourceList,
    controlled_values: str,
    settings: StartupBoostSettings,
) -> tuple[ResourceList, ResourceList, str] | None:
    """``applyCPUStartupBoost`` for one container: its new requests and limits and the
    annotation value, or ``None`` when no boost applies to it."""
    name: object = container.get("name")
    boost = startup_boost_policy(name if isinstance(name, str) else "", vpa)
    if boost is None:
        return None
    original_requests, original_limits = original_resources(container)
    recommended = (requests or {}).get(CPU)
    base = recommended if recommended is not None and not recommended.is_zero() else None
    if base is None:
        base = original_requests.get(CPU, Quantity.from_milli(0))
    boosted = boosted_cpu(base, boost, max_allowed=settings.max_allowed_cpu_boost)
    new_requests = {**(requests or {}), CPU: boosted}
    new_limits = dict(limits)
    if controlled_values == "RequestsOnly":
        limit = original_limits.get(CPU)
        if limit is not None and boosted.milli_value() > limit.milli_value():
            new_requests[CPU] = limit - _ONE_MILLI if limit > _ONE_MILLI else limit
    elif controlled_values == "RequestsAndLimits":
        proportional, _ = proportional_limits(
            original_limits=original_limits,
            original_requests=original_requests,
            recommendation={CPU: boosted},
            default_limits=None,
        )
        if proportional is not None and CPU in proportional:
            new_limits[CPU] = proportional[CPU]
    return new_requests, new_limits, original_resources_value(container)


def _ready_since(pod: Pod) -> datetime | None:
    conditions: object = status_of(pod).get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            return parse_time(condition.get("lastTransitionTime"))
    return None


def expired_boost_annotations(pod: Pod, vpa: VerticalPodAutoscaler, *, now: datetime) -> list[str]:
    """``GetExpiredStartupCPUBoostAnnotations``: the boost annotations whose duration has
    passed since the pod became Ready (sorted; none while it is not Ready)."""
    ready = _ready_since(pod)
    if ready is None:
        return []
    expired: list[str] = []
    annotations = mapping(Meta(pod).raw.get("annotations"))
    for key in sorted(str(k) for k in annotations):
        if not key.startswith(STARTUP_BOOST_ANNOTATION_PREFIX):
            continue
        duration = boost_duration_seconds(key.removeprefix(STARTUP_BOOST_ANNOTATION_PREFIX), vpa)
        if duration == 0 or now - ready > timedelta(seconds=duration):
            expired.append(key)
    return expired


def unboosted_resources(
    pod: Pod, containers: Sequence[str]
) -> dict[str, tuple[ResourceList, ResourceList]]:
    """Per boosted container: the original CPU request and limit its annotation recorded
    (what the unboost restores when there is no recommendation to apply)."""
    annotations = mapping(Meta(pod).raw.get("annotations"))
    restored: dict[str, tuple[ResourceList, ResourceList]] = {}
    for name in containers:
        raw = annotations.get(boost_annotation(name))
        try:
            document = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            continue
        if not isinstance(document, Mapping):
            continue
        lists: list[ResourceList] = []
        for field in ("requests", "limits"):
            values = mapping(document.get(field))
            try:
                lists.append({CPU: Quantity.from_json(values[CPU])} if CPU in values else {})
            except QuantityError:
                lists.append({})
        restored[name] = (lists[0], lists[1])
    return restored
