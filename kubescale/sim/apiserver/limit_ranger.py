"""kube-apiserver's LimitRanger admission plugin, and the defaults of a LimitRange object.

LimitRanger is on in every cluster (``plugin/pkg/admission/limitranger/admission.go``). It is
both a mutating and a validating plugin, and where it runs in the chain matters to a webhook:

* **mutating** (before the mutating webhooks, so the VPA webhook sees its result), pods CREATE
  only: for each LimitRange of the namespace, in lister order, its ``Container`` items' ``default``
  (limits) and ``defaultRequest`` (requests) fill the resources a container or init container
  does not set (``PodMutateLimitFunc``), and the pod is annotated
  ``kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for container app;
  cpu limit for container app`` (resource names sorted; each LimitRange that sets something
  rewrites the annotation);
* **validating** (after the mutating webhooks and the pod's own validation), pods CREATE and
  UPDATE of ``pods/resize``: for each LimitRange, every item is checked
  (``PodValidateLimitFunc``): ``Container`` items against each container and init container,
  ``Pod`` items against the pod's total requests and limits (init containers as the scheduler
  counts them: the larger of the running containers' sum, sidecars included, and any one init
  container on top of the sidecars started before it); ``min`` needs a request and both request
  and limit at or above it, ``max`` needs a limit and both at or below it,
  ``maxLimitRequestRatio`` needs a non-zero request and limit with limit/request at or below
  it. Values compare in milli-units unless one exceeds ``MaxMilliValue`` (then whole units); the
  ratio compares ``float64`` milli values and prints with ``%f``. The first LimitRange with a
  violation refuses the request: ``403 Forbidden``, ``pods "<name>" is forbidden: <errors>``
  (several errors bracketed, repeats once, as ``utilerrors.NewAggregate`` prints them).

:func:`default_limit_range_items` is ``SetDefaults_LimitRangeItem``, applied when a LimitRange
is stored: a ``Container`` item's ``default`` defaults to its ``max``, its ``defaultRequest`` to
its ``default`` and then to its ``min``. So ``max: {cpu: 50m}`` alone also gives every container
without cpu resources a 50m request and limit.

Go iterates the ``min``/``max``/ratio maps in random order; here they are visited in the order
of the stored object, which fixes the order of several errors in one message.

Pure functions over raw dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from kubescale.objects.quantities import Quantity, QuantityError

from .json_copy import json_copy

__all__ = [
    "LIMIT_RANGER_ANNOTATION",
    "default_limit_range_items",
    "limit_range_violation",
    "pod_limits",
    "pod_requests",
    "with_limit_range_defaults",
]

LIMIT_RANGER_ANNOTATION: Final = "kubernetes.io/limit-ranger"
_CONTAINER: Final = "Container"
_POD: Final = "Pod"
_CONTAINER_LISTS: Final = (("containers", "container"), ("initContainers", "init container"))
_MAX_MILLI_VALUE: Final = (2**63 - 1) // 1000
"""``resource.MaxMilliValue``: beyond it, LimitRanger compares whole units."""

ResourceList = dict[str, Quantity]


def _quantity(value: object) -> Quantity | None:
    try:
        return Quantity.from_json(value)
    except QuantityError:
        return None


def _resource_list(value: object) -> ResourceList:
    if not isinstance(value, Mapping):
        return {}
    parsed = {str(name): _quantity(raw) for name, raw in value.items()}
    return {name: quantity for name, quantity in parsed.items() if quantity is not None}


def _items(limit_range: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = limit_range.get("spec")
    items = spec.get("limits") if isinstance(spec, Mapping) else None
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []


# -- the LimitRange object's defaults -----------------------------------------------------------


def default_limit_range_items(limit_range: dict[str, Any]) -> None:
    """SetDefaults_LimitRangeItem, in place, for every ``Container`` item."""
    spec = limit_range.get("spec")
    items = spec.get("limits") if isinstance(spec, dict) else None
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or item.get("type") != _CONTAINER:
            continue
        default = dict(item.get("default") or {})
        default_request = dict(item.get("defaultRequest") or {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            default_request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            default_request.setdefault(name, value)
        if default:
            item["default"] = default
        if default_request:
            item["defaultRequest"] = default_request


# -- mutating: defaults for containers ----------------------------------------------------------


def _container_defaults(limit_range: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """defaultContainerResourceRequirements: (requests, limits) as raw JSON values."""
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for item in _items(limit_range):
        if item.get("type") != _CONTAINER:
            continue
        requests.update(item.get("defaultRequest") or {})
        limits.update(item.get("default") or {})
    return requests, limits


def _merge_container(
    container: dict[str, Any],
    defaults: tuple[dict[str, Any], dict[str, Any]],
    prefix: str,
    notes: list[str],
) -> None:
    """mergeContainerResources: fill what the container does not set."""
    default_requests, default_limits = defaults
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = {}
    set_fields: dict[str, list[str]] = {"requests": [], "limits": []}
    for field, values in (("limits", default_limits), ("requests", default_requests)):
        current = resources.get(field)
        current = dict(current) if isinstance(current, Mapping) else {}
        for name, value in values.items():
            if name not in current:
                current[name] = value
                set_fields[field].append(name)
        if current:
            resources[field] = current
    if set_fields["requests"] or set_fields["limits"]:
        container["resources"] = resources
    name = container.get("name", "")
    if set_fields["requests"]:
        notes.append(f"{', '.join(sorted(set_fields['requests']))} request for {prefix} {name}")
    if set_fields["limits"]:
        notes.append(f"{', '.join(sorted(set_fields['limits']))} limit for {prefix} {name}")


def with_limit_range_defaults(
    pod: Mapping[str, Any], limit_ranges: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The pod after LimitRanger's mutating step (a copy; ``pod`` is not changed)."""
    result = json_copy(dict(pod))
    spec = result.get("spec")
    if not isinstance(spec, dict):
        return result
    for limit_range in limit_ranges:
        defaults = _container_defaults(limit_range)
        if not defaults[0] and not defaults[1]:
            continue
        notes: list[str] = []
        for list_name, prefix in _CONTAINER_LISTS:
            for container in spec.get(list_name) or ():
                if isinstance(container, dict):
                    _merge_container(container, defaults, prefix, notes)
        if notes:
            metadata = result.setdefault("metadata", {})
            annotations = metadata.get("annotations")
            if not isinstance(annotations, dict):
                annotations = metadata["annotations"] = {}
            annotations[LIMIT_RANGER_ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
    return result


# -- validating ---------------------------------------------------------------------------------


def _compared(*quantities: Quantity) -> list[int]:
    """requestLimitEnforcedValues: milli-units when none exceeds MaxMilliValue, else units."""
    units = [q.value() for q in quantities]
    if all(unit <= _MAX_MILLI_VALUE for unit in units):
        return [q.milli_value() for q in quantities]
    return units


_ZERO: Final = Quantity(nanos=0)


def _min_error(
    kind: str, name: str, enforced: Quantity, requests: ResourceList, limits: ResourceList
) -> str | None:
    request, limit = requests.get(name), limits.get(name)
    if request is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    observed_request, observed_limit, bound = _compared(request, limit or _ZERO, enforced)
    if observed_request < bound:
        return f"minimum {name} usage per {kind} is {enforced}, but request is {request}"
    if limit is not None and observed_limit < bound:
        return f"minimum {name} usage per {kind} is {enforced}, but limit is {limit}"
    return None


def _max_error(
    kind: str, name: str, enforced: Quantity, requests: ResourceList, limits: ResourceList
) -> str | None:
    request, limit = requests.get(name), limits.get(name)
    if limit is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    observed_request, observed_limit, bound = _compared(request or _ZERO, limit, enforced)
    if observed_limit > bound:
        return f"maximum {name} usage per {kind} is {enforced}, but limit is {limit}"
    if request is not None and observed_request > bound:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {request}"
    return None


def _ratio_error(
    kind: str, name: str, enforced: Quantity, requests: ResourceList, limits: ResourceList
) -> str | None:
    request, limit = requests.get(name), limits.get(name)
    prefix = f"{name} max limit to request ratio per {kind} is {enforced}"
    observed_request, observed_limit, _ = _compared(request or _ZERO, limit or _ZERO, enforced)
    if request is None or observed_request == 0:
        return f"{prefix}, but no request is specified or request is 0"
    if limit is None or observed_limit == 0:
        return f"{prefix}, but no limit is specified or limit is 0"
    ratio = float(observed_limit) / float(observed_request)
    shown = ratio
    allowed = float(enforced.value())
    if enforced.value() <= _MAX_MILLI_VALUE:
        ratio *= 1000
        allowed = float(enforced.milli_value())
    if ratio > allowed:
        return f"{prefix}, but provided ratio is {shown:f}"
    return None


_Check = Callable[[str, str, Quantity, ResourceList, ResourceList], "str | None"]
_CHECKS: Final[tuple[tuple[str, _Check], ...]] = (
    ("min", _min_error),
    ("max", _max_error),
    ("maxLimitRequestRatio", _ratio_error),
)


def _resources(container: Mapping[str, Any]) -> tuple[ResourceList, ResourceList]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}, {}
    return _resource_list(resources.get("requests")), _resource_list(resources.get("limits"))


def _containers(pod: Mapping[str, Any], list_name: str) -> list[Mapping[str, Any]]:
    spec = pod.get("spec")
    containers = spec.get(list_name) if isinstance(spec, Mapping) else None
    if not isinstance(containers, list):
        return []
    return [c for c in containers if isinstance(c, Mapping)]


def _add(total: ResourceList, more: Mapping[str, Quantity]) -> None:
    for name, quantity in more.items():
        total[name] = total[name] + quantity if name in total else quantity


def _max_into(total: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, quantity in other.items():
        if name not in total or quantity > total[name]:
            total[name] = quantity


def _pod_total(
    pod: Mapping[str, Any], pick: Callable[[Mapping[str, Any]], ResourceList]
) -> ResourceList:
    """podRequests / podLimits: app containers and sidecars summed, init containers on top."""
    total: ResourceList = {}
    for container in _containers(pod, "containers"):
        _add(total, pick(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in _containers(pod, "initContainers"):
        own = pick(container)
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max_into(init_peak, sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
            _max_into(init_peak, running)
    _max_into(total, init_peak)
    return total


def pod_requests(pod: Mapping[str, Any]) -> ResourceList:
    """LimitRanger's ``podRequests`` (from the spec)."""
    return _pod_total(pod, lambda container: _resources(container)[0])


def pod_limits(pod: Mapping[str, Any]) -> ResourceList:
    """LimitRanger's ``podLimits``."""
    return _pod_total(pod, lambda container: _resources(container)[1])


def _item_errors(
    item: Mapping[str, Any], kind: str, requests: ResourceList, limits: ResourceList
) -> Iterable[str]:
    for field, check in _CHECKS:
        for name, enforced in _resource_list(item.get(field)).items():
            error = check(kind, name, enforced, requests, limits)
            if error is not None:
                yield error


def _limit_range_errors(limit_range: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    """PodValidateLimitFunc for one LimitRange."""
    errors: list[str] = []
    for item in _items(limit_range):
        kind = item.get("type")
        if kind == _CONTAINER:
            for list_name in ("containers", "initContainers"):
                for container in _containers(pod, list_name):
                    requests, limits = _resources(container)
                    errors.extend(_item_errors(item, kind, requests, limits))
        elif kind == _POD:
            errors.extend(_item_errors(item, kind, pod_requests(pod), pod_limits(pod)))
    return errors


def _aggregate(errors: list[str]) -> str:
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def limit_range_violation(
    pod: Mapping[str, Any], limit_ranges: Sequence[Mapping[str, Any]]
) -> str | None:
    """The errors of the first LimitRange the pod violates, as the Forbidden message prints
    them after ``is forbidden: ``; ``None`` when the pod passes them all."""
    for limit_range in limit_ranges:
        errors = _limit_range_errors(limit_range, pod)
        if errors:
            return _aggregate(errors)
    return None
