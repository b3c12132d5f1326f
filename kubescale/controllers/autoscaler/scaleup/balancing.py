"""``--balance-similar-node-groups``: which groups are alike, and how a scale-up is split.

Similarity (``nodegroupset/compare_nodegroups.go``, reference §2.5) of two groups' template
nodes:

* allocatable of every resource within ``--max-allocatable-difference-ratio`` (0.05) and free
  resources (allocatable − the template pods' requests) within ``--max-free-difference-ratio``
  (0.05): ``larger − smaller ≤ larger × ratio`` on milli-values, the same resources on both;
* capacity equal for every resource except memory, which may differ by
  ``--memory-difference-ratio`` (0.015);
* every label equal except the ignored ones (hostname, zone and region labels and
  ``--balancing-ignore-label``);
* with ``--balancing-label``, only those labels are compared (exactly), nothing else.

Split (``BalanceScaleUpBetweenGroups``): groups at max are left out; the total is capped at
``Σ max(0, max − target)`` (a group already above max brings no capacity, and does not take
any from the others); groups are sorted by target size (stable), and nodes are added one at a
time to the smallest group(s), groups leaving the round once at (or above) max.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import NodeGroup
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.views import Meta
from kubescale.scheduling.pod_resources import Amounts, add_into, pod_requests

__all__ = [
    "BASIC_IGNORED_LABELS",
    "ScaleUpInfo",
    "SimilarityRules",
    "balance_scale_up",
    "is_similar",
]

BASIC_IGNORED_LABELS: Final = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/fluentd-ds-ready",
        "kops.k8s.io/instancegroup",
    }
)


@dataclass(frozen=True, kw_only=True)
class SimilarityRules:
    memory_difference_ratio: float = 0.015
    max_allocatable_difference_ratio: float = 0.05
    max_free_difference_ratio: float = 0.05
    ignored_labels: frozenset[str] = BASIC_IGNORED_LABELS
    balancing_labels: tuple[str, ...] = ()


def _within(values: Sequence[int], ratio: float) -> bool:
    """``resourceListWithinTolerance`` (milli-values compared as floats)."""
    if len(values) != 2:
        return False
    larger, smaller = max(values), min(values)
    return larger - smaller <= larger * ratio


def _milli(amounts: Mapping[str, int]) -> dict[str, int]:
    return {k: (v if k == "cpu" else v * 1000) for k, v in amounts.items()}


def _collect(maps: Iterable[Mapping[str, int]]) -> dict[str, list[int]]:
    collected: dict[str, list[int]] = {}
    for amounts in maps:
        for name, value in amounts.items():
            collected.setdefault(name, []).append(value)
    return collected


def _free(template: TemplateNode) -> Amounts:
    requested: Amounts = {}
    for pod in template.pods:
        add_into(requested, pod_requests(pod))
    return {k: v - requested.get(k, 0) for k, v in template.allocatable.items()}


def _labels(template: TemplateNode) -> Mapping[str, str]:
    return Meta(template.node).raw.get("labels") or {}


def is_similar(a: TemplateNode, b: TemplateNode, rules: SimilarityRules) -> bool:
    """``IsCloudProviderNodeInfoSimilar`` (or the label comparator with balancing labels)."""
    if rules.balancing_labels:
        la, lb = _labels(a), _labels(b)
        return all(key in la and key in lb and la[key] == lb[key] for key in rules.balancing_labels)
    for values in _collect([_milli(a.allocatable), _milli(b.allocatable)]).values():
        if not _within(values, rules.max_allocatable_difference_ratio):
            return False
    for values in _collect([_milli(_free(a)), _milli(_free(b))]).values():
        if not _within(values, rules.max_free_difference_ratio):
            return False
    for name, values in _collect([_milli(a.capacity), _milli(b.capacity)]).items():
        if len(values) != 2:
            return False
        if name == "memory":
            if not _within(values, rules.memory_difference_ratio):
                return False
        elif values[0] != values[1]:
            return False
    labels: dict[str, list[str]] = {}
    for template in (a, b):
        for key, value in _labels(template).items():
            if key not in rules.ignored_labels:
                labels.setdefault(key, []).append(value)
    return all(len(v) == 2 and v[0] == v[1] for v in labels.values())


@dataclass
class ScaleUpInfo:
    """``nodegroupset.ScaleUpInfo``; ``str()`` is upstream's ``{id cur->new (max: m)}``."""

    group: NodeGroup
    current_size: int
    new_size: int
    max_size: int

    def __str__(self) -> str:
        return f"{{{self.group.id} {self.current_size}->{self.new_size} (max: {self.max_size})}}"


def balance_scale_up(groups: Sequence[NodeGroup], new_nodes: int) -> list[ScaleUpInfo]:
    """``BalanceScaleUpBetweenGroups`` (module docstring); groups that do not grow are left
    out."""
    # upstream skips a group already at max ("group already maxed, ignore it") and counts only
    # positive headroom: a group above max (target 7, max 5) stays in the list with no capacity
    # and leaves the round at once, instead of its negative headroom (-2) eating the others'.
    infos = [
        ScaleUpInfo(
            group=g, current_size=g.target_size, new_size=g.target_size, max_size=g.max_size
        )
        for g in groups
        if g.target_size != g.max_size
    ]
    capacity = sum(max(0, i.max_size - i.current_size) for i in infos)
    new_nodes = min(new_nodes, capacity)
    infos.sort(key=lambda i: i.current_size)  # stable: the chosen group first among equals
    start = current = 0
    while new_nodes > 0:
        info = infos[current]
        if info.new_size < info.max_size:
            info.new_size += 1
            new_nodes -= 1
        else:
            infos[start], infos[current] = infos[current], infos[start]
            start += 1
        # upstream holds a pointer to slot ``current``: after a swap it is the other group
        if current < len(infos) - 1 and infos[current].new_size > infos[current + 1].new_size:
            current += 1
        else:
            current = start
    return [i for i in infos if i.new_size != i.current_size]
