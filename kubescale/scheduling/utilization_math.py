"""Node utilization arithmetic of LowNodeUtilization and HighNodeUtilization (upstream
``nodeutilization/nodeutilization.go``, ``normalizer``, ``classifier``), shared with the
scheduler extender.

Units: ``cpu`` in millicores, every other resource in whole units, ``pods`` a count, and the
special ``MetricResource`` (a Prometheus query's node value) in percent with a capacity of 100.

* A node's capacity is ``status.allocatable`` (``capacity`` when allocatable is empty), plus
  ``MetricResource: 100`` (:func:`node_capacity`).
* Usage in percent (``ResourceUsageToResourceThreshold``, :func:`usage_percent`):
  ``float(used) / float(capacity) * 100`` for every resource the node has a capacity for, 0
  when the capacity is 0 — a float64, as upstream's ``api.Percentage``.
* Static thresholds are the user's ``thresholds`` (low) and ``targetThresholds`` (high) on every
  node. Deviation thresholds (:func:`deviation_thresholds`): the average percentage over all
  nodes of each threshold resource, ``low = clamp(avg − thresholds, 0, 100)``, ``high =
  clamp(avg + targetThresholds, 0, 100)``. The sum is exactly rounded (``math.fsum``): upstream
  adds in map order, which is random, so its last bit is not reproducible anyway; an exact sum
  gives every caller (the strategy and the scheduler extender) the same thresholds.
* Under a threshold (``isNodeBelowThreshold``): ``usage <= threshold`` for *every* threshold
  resource; above (``isNodeAboveThreshold``): ``usage > threshold`` for *any*. A resource
  without a threshold is not compared; a threshold resource the node does not report counts as
  0% used.
* The capacity capped at a threshold (``capNodeCapacityToThreshold``, :func:`capped_capacity`):
  ``int(threshold * 0.01 * capacity)`` — truncated, so 50% of 9 pods is 4; a resource without a
  threshold keeps its full capacity, one the node does not offer gets 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from kubescale.objects.node import Node
from kubescale.scheduling.pod_resources import Amounts, node_allocatable

__all__ = [
    "BASIC_RESOURCES",
    "METRIC_RESOURCE",
    "Percentages",
    "capped_capacity",
    "deviation_thresholds",
    "is_above",
    "is_below",
    "node_capacity",
    "usage_percent",
    "usage_sum",
]

METRIC_RESOURCE: Final = "MetricResource"
"""The pseudo-resource of a Prometheus query's utilization (upstream's ``MetricResource``,
percent of a node: capacity 100)."""

BASIC_RESOURCES: Final = ("cpu", "memory", "pods")
Percentages = dict[str, float]


def node_capacity(node: Node) -> Amounts:
    """Allocatable (or capacity) with ``MetricResource: 100``."""
    capacity = dict(node_allocatable(node))
    capacity[METRIC_RESOURCE] = 100
    return capacity


def usage_percent(usage: Mapping[str, int], capacity: Mapping[str, int]) -> Percentages:
    """``ResourceUsageToResourceThreshold`` (module docstring)."""
    result: Percentages = {}
    for name, used in usage.items():
        total = capacity.get(name)
        if total is None:
            continue
        result[name] = float(used) / float(total) * 100 if total > 0 else 0.0
    return result


def _clamp(value: float) -> float:
    return min(max(value, 0.0), 100.0)


def deviation_thresholds(
    usages: Iterable[Mapping[str, float]],
    low: Mapping[str, float],
    high: Mapping[str, float],
) -> tuple[Percentages, Percentages]:
    """``assessNodesUsagesAndRelativeThresholds``: (low, high) from the average of
    ``usages`` (every node's percentages, threshold resources only)."""
    rows = list(usages)
    count = len(rows)
    average: Percentages = {}
    for name in low:
        total = math.fsum(row.get(name, 0.0) for row in rows)
        average[name] = total / count if count else 0.0
    return (
        {name: _clamp(average[name] - low[name]) for name in low},
        {name: _clamp(average[name] + high[name]) for name in high},
    )


def is_below(usage: Mapping[str, float], threshold: Mapping[str, float]) -> bool:
    """``isNodeBelowThreshold``: every threshold resource at or under its threshold."""
    return all(not value < usage.get(name, 0.0) for name, value in threshold.items())


def is_above(usage: Mapping[str, float], threshold: Mapping[str, float]) -> bool:
    """``isNodeAboveThreshold``: some threshold resource over its threshold."""
    return any(value < usage.get(name, 0.0) for name, value in threshold.items())


def capped_capacity(
    capacity: Mapping[str, int], thresholds: Mapping[str, float], resources: Sequence[str]
) -> Amounts:
    """``capNodeCapacitiesToThreshold`` over ``resources`` (module docstring)."""
    capped: Amounts = {}
    for name in resources:
        if name not in capacity:
            capped[name] = 0
        elif name not in thresholds:
            capped[name] = capacity[name]
        else:
            capped[name] = int(thresholds[name] * 0.01 * float(capacity[name]))
    return capped


def usage_sum(usage: Mapping[str, int]) -> int:
    """``sortNodesByUsage``'s key: the plain sum of every usage value (cpu in millicores)."""
    return sum(usage.values())
