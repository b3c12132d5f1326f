"""Cluster-wide resource limits: ``--cores-total`` and ``--memory-total``.

Scale-up (upstream's ``calculateScaleUpCoresMemoryTotal`` + ``applyLimits``): the cluster's
usage is every autoscaled group's target size × its template node's capacity, plus the capacity
of the nodes no group owns; cores are ``capacity cpu`` rounded up to whole cores
(``Quantity.Value()``), memory in bytes. A group may grow by
``min over resources of floor((max − usage) / per node)`` nodes; below one node it is skipped
with ``max cluster <resources> limit reached``.

Scale-down (``scaledown/resource``): usage is the capacity of every node not being deleted;
removing a node must leave at least the minimum of each resource, otherwise the node is kept
(``MinimalResourceLimitExceeded``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kubescale.controllers.autoscaler.config.autoscaler_settings import ResourceRange
from kubescale.objects.node import Node
from kubescale.objects.views import status_of
from kubescale.scheduling.pod_resources import amounts_of

__all__ = [
    "RESOURCE_CORES",
    "RESOURCE_MEMORY",
    "ResourceLimits",
    "ScaleDownLimits",
    "cores_and_memory",
    "node_capacity",
]

RESOURCE_CORES: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
UNLIMITED: Final = 2**63 - 1


def node_capacity(node: Node) -> dict[str, int]:
    """A node's ``status.capacity`` (its allocatable when it has none) as amounts."""
    status = status_of(node)
    return amounts_of(status.get("capacity") or status.get("allocatable"))


def cores_and_memory(capacity: Mapping[str, int]) -> tuple[int, int]:
    """(whole cores rounded up, memory bytes) of a node's capacity amounts."""
    milli = capacity.get("cpu", 0)
    return -(-milli // 1000), capacity.get("memory", 0)


@dataclass(frozen=True, kw_only=True)
class ResourceLimits:
    cores: ResourceRange
    memory: ResourceRange

    def usage(
        self,
        *,
        groups: Iterable[tuple[int, Mapping[str, int]]],
        other_nodes: Iterable[Mapping[str, int]],
    ) -> tuple[int, int]:
        """(cores, memory) in use: ``(target size, template capacity)`` per group plus the
        capacity of nodes outside any group."""
        cores = memory = 0
        for target, capacity in groups:
            if target > 0:
                c, m = cores_and_memory(capacity)
                cores += target * c
                memory += target * m
        for capacity in other_nodes:
            c, m = cores_and_memory(capacity)
            cores += c
            memory += m
        return cores, memory

    def allowed_delta(
        self, *, usage: tuple[int, int], per_node: Mapping[str, int], wanted: int
    ) -> tuple[int, tuple[str, ...]]:
        """How many of ``wanted`` nodes fit the limits, and the resources that stop it."""
        node_cores, node_memory = cores_and_memory(per_node)
        allowed = wanted
        exceeded: list[str] = []
        for name, used, limit, per in (
            (RESOURCE_CORES, usage[0], self.cores.max, node_cores),
            (RESOURCE_MEMORY, usage[1], self.memory.max, node_memory),
        ):
            if per <= 0 or limit >= UNLIMITED:
                continue
            left = max(0, limit - used)
            fits = left // per
            if fits < wanted:
                allowed = min(allowed, fits)
                if fits < 1:
                    exceeded.append(name)
        return max(0, allowed), tuple(exceeded)

    def exceeded_reason(self, resources: Iterable[str]) -> str:
        """``NewMaxResourceLimitReached``'s message."""
        return f"max cluster {', '.join(resources)} limit reached"


@dataclass
class ScaleDownLimits:
    """What may still be removed above ``--cores-total``/``--memory-total`` minimums."""

    cores_left: int
    memory_left: int

    @classmethod
    def of(cls, limits: ResourceLimits, capacities: Iterable[Mapping[str, int]]) -> ScaleDownLimits:
        cores = memory = 0
        for capacity in capacities:
            c, m = cores_and_memory(capacity)
            cores += c
            memory += m
        return cls(
            cores_left=max(0, cores - limits.cores.min),
            memory_left=max(0, memory - limits.memory.min),
        )

    def try_remove(self, capacity: Mapping[str, int]) -> tuple[str, ...]:
        """Remove a node's resources if that keeps the minimums; else the resources it
        would take below them (nothing removed)."""
        cores, memory = cores_and_memory(capacity)
        exceeded = tuple(
            name
            for name, amount, left in (
                (RESOURCE_CORES, cores, self.cores_left),
                (RESOURCE_MEMORY, memory, self.memory_left),
            )
            if amount > left
        )
        if not exceeded:
            self.cores_left -= cores
            self.memory_left -= memory
        return exceeded
