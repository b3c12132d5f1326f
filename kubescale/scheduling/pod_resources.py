"""What a pod requests and what a node offers, in the units kube-scheduler and the kubelet use.

Amounts are exact integers parsed with :mod:`kubescale.objects.quantities`: ``cpu`` in millicores
(``Quantity.MilliValue``), every other resource in whole units (``Quantity.Value``: bytes for
memory, a count for ``pods`` and extended resources). The rules are upstream's:

* ``PodRequests`` (``k8s.io/component-helpers/resource``): the sum of the regular containers'
  requests, raised to the largest init container's (a regular init container runs alone, next
  to the sidecars started before it; a sidecar — an init container with ``restartPolicy:
  Always`` — keeps running, so it also adds to the sum), plus ``spec.overhead``;
* with in-place resize, the requests a pod holds on its node are the larger of the spec's and
  what the kubelet reports in ``status.containerStatuses[].resources`` /
  ``allocatedResources`` — only the status' when the resize is Infeasible
  (``determineContainerReqs``);
* scoring counts a container without a cpu or memory request as 100m / 200 MiB
  (``DefaultMilliCPURequest``, ``DefaultMemoryRequest``: the ``NonMissingContainerRequests``
  option);
* a node offers ``status.allocatable`` (``capacity`` when allocatable is absent).

Parsing is the cost of a simulation step, so :class:`RequestCache` keeps the answer for each
stored pod snapshot (stored dicts are never mutated: a changed pod is a new dict).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Final, Literal

from kubescale.objects.containers import Container
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "NON_MISSING_DEFAULTS",
    "Amounts",
    "RequestCache",
    "add_into",
    "amounts_of",
    "container_amounts",
    "is_resize_infeasible",
    "node_allocatable",
    "pod_requests",
    "quantity_amount",
]

Amounts = dict[str, int]
"""Resource name → amount: ``cpu`` in millicores, the rest in whole units."""

DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
NON_MISSING_DEFAULTS: Final[Mapping[str, int]] = {
    "cpu": DEFAULT_MILLI_CPU_REQUEST,
    "memory": DEFAULT_MEMORY_REQUEST,
}


def quantity_amount(resource: str, value: object) -> int:
    """A JSON quantity in this module's unit for ``resource``; unparsable counts as 0."""
    if isinstance(value, str):
        return _text_amount(resource == "cpu", value)
    try:
        quantity = Quantity.from_json(value)
    except QuantityError:
        return 0
    return quantity.milli_value() if resource == "cpu" else quantity.value()


@functools.lru_cache(maxsize=4096)
def _text_amount(milli: bool, text: str) -> int:
    """Quantities repeat across pods ("500m", "1Gi"): each text is parsed once."""
    try:
        quantity = Quantity.from_json(text)
    except QuantityError:
        return 0
    return quantity.milli_value() if milli else quantity.value()


def amounts_of(resource_list: Mapping[str, object] | None) -> Amounts:
    """A ``ResourceList`` (``{"cpu": "250m", "memory": "64Mi"}``) as amounts."""
    if not resource_list:
        return {}
    return {name: quantity_amount(name, value) for name, value in resource_list.items()}


def container_amounts(
    container: Container, key: Literal["requests", "limits"] = "requests"
) -> Amounts:
    """A container's ``resources.requests`` (or ``limits``) as amounts."""
    resources = container.get("resources") or {}
    return amounts_of(resources.get(key))


def add_into(total: Amounts, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount


def _max_into(total: Amounts, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


def is_resize_infeasible(pod: Pod) -> bool:
    """The pod carries ``PodResizePending`` with reason ``Infeasible``."""
    for condition in status_of(pod).get("conditions") or []:
        if condition.get("type") == "PodResizePending" and condition.get("reason") == "Infeasible":
            return True
    return False


def _status_requests(pod: Pod) -> dict[str, Amounts]:
    """Container name → what the kubelet reports it holds (resources.requests, allocated)."""
    held: dict[str, Amounts] = {}
    status = status_of(pod)
    for statuses in (status.get("containerStatuses"), status.get("initContainerStatuses")):
        for cs in statuses or []:
            amounts = amounts_of((cs.get("resources") or {}).get("requests"))
            _max_into(amounts, amounts_of(cs.get("allocatedResources")))
            if amounts:
                held[str(cs.get("name"))] = amounts
    return held


def pod_requests(
    pod: Pod,
    *,
    use_status: bool = True,
    non_missing: Mapping[str, int] | None = None,
) -> Amounts:
    """``resourcehelper.PodRequests``: what the pod asks of a node.

    ``use_status`` takes the kubelet's reported resources into account (a bound pod being
    resized holds the larger of old and new); ``non_missing`` fills cpu/memory requests a
    container lacks (the scoring defaults).
    """
    spec = spec_of(pod)
    held = _status_requests(pod) if use_status else {}
    infeasible = use_status and is_resize_infeasible(pod)

    def requests_of(container: Container) -> Amounts:
        wanted = container_amounts(container)
        actual = held.get(str(container.get("name")))
        if actual is not None:
            if infeasible:
                wanted = dict(actual)
            else:
                _max_into(wanted, actual)
        if non_missing:
            for name, default in non_missing.items():
                if not wanted.get(name):
                    wanted[name] = default
        return wanted

    total: Amounts = {}
    for container in spec.get("containers") or []:
        add_into(total, requests_of(container))
    init_max: Amounts = {}
    sidecars: Amounts = {}
    for container in spec.get("initContainers") or []:
        amounts = requests_of(container)
        if container.get("restartPolicy") == "Always":
            # a sidecar keeps running next to everything started after it
            add_into(total, amounts)
            add_into(sidecars, amounts)
            _max_into(init_max, sidecars)
        else:
            running = dict(amounts)
            add_into(running, sidecars)
            _max_into(init_max, running)
    _max_into(total, init_max)
    add_into(total, amounts_of(spec.get("overhead")))
    return total


def node_allocatable(node: Node) -> Amounts:
    """What the scheduler may place on a node: ``status.allocatable``, else ``capacity``."""
    status = status_of(node)
    offered = status.get("allocatable") or status.get("capacity") or {}
    return amounts_of(offered)


class RequestCache:
    """``pod_requests`` per stored pod snapshot, recomputed only when the pod changed.

    Equal answers are one shared dict (issue 29): the pods of a workload ask for the same
    requests, so a cluster has a few distinct answers, not one per pod (a dict and its ints,
    ~250 bytes a pod in each cache). The table of shared answers keeps only those of the
    cached pods: it is rebuilt from them at :meth:`forget_missing`, and cleared if it grows past
    :data:`SHARED_ANSWERS_MAX` in between (the answers already handed out stay valid)."""

    SHARED_ANSWERS_MAX = 4096

    def __init__(self, *, non_missing: Mapping[str, int] | None = None) -> None:
        self._non_missing = non_missing
        self._entries: dict[tuple[str, str], tuple[Pod, Amounts]] = {}
        self._shared: dict[tuple[tuple[str, int], ...], Amounts] = {}

    def requests(self, pod: Pod) -> Amounts:
        """The (shared: do not mutate) requests of ``pod``, a stored snapshot."""
        meta = Meta(pod).raw
        key = (str(meta.get("namespace", "")), str(meta["name"]))
        entry = self._entries.get(key)
        if entry is not None and entry[0] is pod:
            return entry[1]
        amounts = self._share(pod_requests(pod, non_missing=self._non_missing))
        self._entries[key] = (pod, amounts)
        return amounts

    def _share(self, amounts: Amounts) -> Amounts:
        # keyed by the items in order: a shared answer iterates as the pod's own would
        shape = tuple(amounts.items())
        shared = self._shared.get(shape)
        if shared is None:
            if len(self._shared) >= self.SHARED_ANSWERS_MAX:
                self._shared.clear()
            shared = self._shared[shape] = amounts
        return shared

    def __len__(self) -> int:
        return len(self._entries)

    def shared_answers(self) -> int:
        """Distinct answers the table of shared ones holds."""
        return len(self._shared)

    def forget_missing(self, present: Iterable[tuple[str, str]]) -> None:
        """Drop entries of pods that are gone (keeps the cache as small as the cluster), and
        the shared answers no cached pod has."""
        keep = set(present)
        for key in [k for k in self._entries if k not in keep]:
            del self._entries[key]
        self._shared = {tuple(a.items()): a for _, a in self._entries.values()}
