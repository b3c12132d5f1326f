"""Beyond upstream: recommended requests scaled down so the pod still fits the largest node.

Upstream VPA happily recommends more than any node offers, and the mutated pod then stays
Pending forever (a VPA must never make a pod unschedulable). With the webhook's node-fit option
the capped requests are reduced, per resource, until the pod's total requests fit the largest
node's allocatable.

For each resource of ``allocatable`` (cpu in milli-units, everything else in whole units, as the
scheduler's NodeResourcesFit compares them):

* fixed = the pod's ``spec.overhead`` + the current requests of restartable init containers
  (sidecars, which run next to the app containers) + the current requests of app containers the
  webhook does not set this resource for;
* variable = the recommended requests being set;
* if fixed + variable <= allocatable nothing changes; if fixed alone leaves no room, nothing can
  help and nothing changes either (the pod would not fit without VPA);
* otherwise every recommended request is scaled by ``(allocatable - fixed) / variable``, rounded
  down, so the total fits and no request is raised.

Ordinary init containers run one at a time before the app containers; they are not summed (a
single init container larger than the node cannot be fixed by resizing the others).

Pure; current requests are the container status's when set, like everywhere in the webhook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubescale.controllers.vpa.api.current_resources import (
    CPU,
    PodContainers,
    ResourceList,
    container_requests_and_limits,
    ordered_names,
    parse_resource_list,
)
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import optional_spec_of

__all__ = ["fit_requests_to_node"]


def _units(name: str, quantity: Quantity) -> int:
    return quantity.milli_value() if name == CPU else quantity.value()


def _quantity(name: str, units: int, like: Quantity) -> Quantity:
    if name == CPU:
        return Quantity.from_milli(units, like.format)
    return Quantity.from_int(units, like.format)


def _always_there(pod: Pod) -> list[ResourceList]:
    """The requests present for the pod's whole life: overhead and sidecars."""
    spec = optional_spec_of(pod)
    if spec is None:
        return []
    lists = [parse_resource_list(spec.get("overhead")) or {}]
    init_containers: object = spec.get("initContainers")  # as sent: entries checked
    for container in init_containers if isinstance(init_containers, list) else ():
        if not isinstance(container, Mapping) or container.get("restartPolicy") != "Always":
            continue
        requests, _ = container_requests_and_limits(pod, str(container.get("name")), init=True)
        lists.append(requests or {})
    return lists


def _fixed_units(
    always: list[ResourceList],
    containers: PodContainers,
    recommended: Sequence[Mapping[str, Quantity] | None],
    name: str,
) -> int:
    total = sum(_units(name, requests[name]) for requests in always if name in requests)
    for index, container_name in enumerate(containers.names):
        new = recommended[index] if index < len(recommended) else None
        if new is not None and name in new:
            continue
        requests, _ = containers.requests_and_limits(container_name)
        if requests and name in requests:
            total += _units(name, requests[name])
    return total


def fit_requests_to_node(
    *,
    pod: Pod,
    recommended: Sequence[Mapping[str, Quantity] | None],
    allocatable: Mapping[str, Quantity],
) -> list[tuple[ResourceList | None, tuple[str, ...]]]:
    """Per app container (pod order): (requests to set, resources this step lowered).

    ``recommended[i]`` is what the webhook would set on container ``i`` (``None``: nothing).
    """
    fitted: list[ResourceList | None] = [
        dict(requests) if requests is not None else None for requests in recommended
    ]
    lowered: list[list[str]] = [[] for _ in recommended]
    always = _always_there(pod)
    containers = PodContainers.of(pod)
    for name in ordered_names(allocatable):
        variable = [
            (index, requests)
            for index, requests in enumerate(fitted)
            if requests is not None and name in requests
        ]
        if not variable:
            continue
        wanted = sum(_units(name, requests[name]) for _, requests in variable)
        room = _units(name, allocatable[name]) - _fixed_units(always, containers, recommended, name)
        if wanted <= room or room <= 0:
            continue
        for index, requests in variable:
            units = _units(name, requests[name])
            scaled = units * room // wanted
            if scaled < units:
                requests[name] = _quantity(name, scaled, requests[name])
                lowered[index].append(name)
    return [(requests, tuple(names)) for requests, names in zip(fitted, lowered, strict=True)]
