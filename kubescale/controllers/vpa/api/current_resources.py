"""Resource lists of raw API objects, and a container's current requests and limits.

Upstream VPA reads a container's "current" resources through
``pkg/utils/resources/resourcehelpers.go`` (``ContainerRequestsAndLimits``): when the pod's
``status.containerStatuses`` (``initContainerStatuses`` for an init container) has an entry
for the container whose ``resources`` is set, its ``requests``/``limits`` are what the kubelet
actually applied (in-place resize) and win; otherwise the pod spec's are used. A status entry
with ``resources: {}`` therefore means "no requests, no limits" even when the spec has some.

A ResourceList here is a ``dict[str, Quantity]``; ``None`` stands for upstream's nil list. The
canonical resource order (``cpu``, ``memory``, then the rest by name) replaces Go's random map
order wherever an order becomes visible (annotations, patches). :class:`PodContainers` reads a
pod's containers once per admission request; quantity texts are parsed through a memo (the same
few strings recur on every request), which keeps the admission path well under a millisecond.

Pure (the memo only caches immutable values); a malformed quantity raises
:class:`kubescale.objects.quantities.QuantityError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import optional_spec_of, optional_status_of

__all__ = [
    "CPU",
    "MEMORY",
    "PodContainers",
    "ResourceList",
    "container_requests_and_limits",
    "ordered_names",
    "parse_resource_list",
    "resource_list_json",
]

CPU = "cpu"
MEMORY = "memory"
_FIRST = (CPU, MEMORY)

ResourceList = dict[str, Quantity]


# Quantities are immutable and the same few texts recur on every admission request (the
# recommendation, the policy, the LimitRanges): parse each text once. The texts come from
# request bodies, so only short ones are kept, and fewer of them (issue 27, item 14: 16,384
# texts of fuzzed pods were a plateau several MiB high).
_parse_text = lru_cache(maxsize=4096)(Quantity.from_json)
_MAX_CACHED_TEXT = 32
"""Longer quantity texts are parsed every time (no real quantity is this long)."""


def _quantity(value: object) -> Quantity:
    if isinstance(value, str) and len(value) <= _MAX_CACHED_TEXT:
        return _parse_text(value)
    return Quantity.from_json(value)


def parse_resource_list(value: object) -> ResourceList | None:
    """A ResourceList from JSON (``{"cpu": "100m"}``); anything but an object is nil."""
    if not isinstance(value, Mapping):
        return None
    return {str(name): _quantity(quantity) for name, quantity in value.items()}


def resource_list_json(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """The JSON form, in canonical resource order."""
    return {name: str(resources[name]) for name in ordered_names(resources)}


def ordered_names(names: Iterable[str]) -> list[str]:
    """``cpu``, ``memory``, then the other resource names sorted."""
    present = set(names)
    return [name for name in _FIRST if name in present] + sorted(present.difference(_FIRST))


def _named(entries: object, name: str) -> Mapping[str, object] | None:
    """The first entry of a list of objects whose ``name`` is ``name`` (a ``Container`` or a
    ``ContainerStatus``, read as sent: a malformed entry is skipped)."""
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def container_requests_and_limits(
    pod: Pod, container_name: str, *, init: bool = False
) -> tuple[ResourceList | None, ResourceList | None]:
    """resourcehelpers.ContainerRequestsAndLimits: (requests, limits), status before spec."""
    status = optional_status_of(pod)
    spec = optional_spec_of(pod)
    statuses: object = None
    if status is not None:
        statuses = status.get("initContainerStatuses") if init else status.get("containerStatuses")
    container_status = _named(statuses, container_name)
    if container_status is not None:
        applied = container_status.get("resources")
        if isinstance(applied, Mapping):
            return (
                parse_resource_list(applied.get("requests")),
                parse_resource_list(applied.get("limits")),
            )
    containers: object = None
    if spec is not None:
        containers = spec.get("initContainers") if init else spec.get("containers")
    container = _named(containers, container_name)
    if container is None:
        return None, None
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None, None
    return parse_resource_list(resources.get("requests")), parse_resource_list(
        resources.get("limits")
    )


@dataclass(frozen=True)
class PodContainers:
    """A pod's app containers, in spec order, with their current requests and limits read once.

    The lists are shared: callers must not modify them.
    """

    names: tuple[str, ...]
    current: Mapping[str, tuple[ResourceList | None, ResourceList | None]]

    @classmethod
    def of(cls, pod: Pod) -> PodContainers:
        spec = optional_spec_of(pod)
        containers: object = spec.get("containers") if spec is not None else None
        names: list[str] = []
        current: dict[str, tuple[ResourceList | None, ResourceList | None]] = {}
        for container in containers if isinstance(containers, list) else ():
            name = container.get("name") if isinstance(container, Mapping) else None
            name = name if isinstance(name, str) else ""
            names.append(name)
            if name not in current:
                current[name] = container_requests_and_limits(pod, name)
        return cls(names=tuple(names), current=current)

    def requests_and_limits(self, name: str) -> tuple[ResourceList | None, ResourceList | None]:
        """:func:`container_requests_and_limits` of a container of this pod."""
        return self.current.get(name, (None, None))
