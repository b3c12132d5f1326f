"""LowNodeUtilization and HighNodeUtilization (Balance; upstream ``nodeutilization``).

**Usage** (upstream's usage clients), per node of the cycle, over the pods on it
(``ListPodsOnANode``, no evictability filter):

* requests (default): ``cpu``, ``memory``, ``pods`` (the pod count) and every threshold
  resource, summed from the pods' requests (:func:`~kubescale.scheduling.pods.requests_of`);
* ``KubernetesMetrics``: cpu and memory from metrics.k8s.io NodeMetrics (smoothed by the
  collector), ``pods`` the count; a node without metrics, or a threshold resource other than
  these three, fails the plugin; a pod's own usage (PodMetrics, sum of containers) is what an
  eviction frees — a pod without metrics is skipped;
* ``Prometheus``: ``MetricResource`` = ``int(value × 100)`` of the query's sample whose
  ``instance`` label names the node (a value outside [0, 1] or a missing node fails the
  plugin); a pod's share is unknown, so at most one pod leaves each source node unless
  ``evictionLimits.node`` is set.

**LowNodeUtilization**: classify (:mod:`~kubescale.scheduling.utilization_math`) each
node *under* (not cordoned and under the low threshold on every resource) or else *over*
(above the high threshold on some resource). Nothing happens without under nodes, with no more
under nodes than
``numberOfNodes``, when every node is under, or without over nodes. Each node may hold up to its
capacity capped at its high threshold (``available``); the headroom of the under nodes,
Σ(available − usage) per resource, is where evicted pods can go. Over nodes are taken from the
highest usage sum down (ties by name); their pods passing ``Filter``, from lowest to highest
priority (:func:`~kubescale.scheduling.pods.sort_low_to_high`), are evicted while the node is
still above its ``available`` on some resource and every resource of the headroom is positive.
A pod is skipped unless it tolerates every taint of some under node (``PodToleratesTaints``) and
passes ``PreEvictionFilter`` and ``evictableNamespaces``; ``evictionLimits.node`` caps the
evictions per node. Each eviction takes the pod's usage (and one pod) off the node and the headroom.

**HighNodeUtilization**: under nodes (under every threshold; cordoned ones included) are the
sources, the other uncordoned nodes the destinations, their full capacity the headroom.
Nothing happens without under nodes, with no more than ``numberOfNodes``, when every node is
under, or without destinations. Sources from the lowest usage sum up; evictions go on while
every resource of the headroom is positive; with ``evictionModes:
[OnlyThresholdingResources]`` only pods requesting one of the threshold resources move.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_name
from kubescale.scheduling.descheduler_rules import HIGH_NODE_UTILIZATION, LOW_NODE_UTILIZATION
from kubescale.scheduling.pods import requests_of, sort_low_to_high, tolerates_taints_of_any
from kubescale.scheduling.policy.common_args import Namespaces
from kubescale.scheduling.policy.utilization_args import (
    KUBERNETES_METRICS,
    METRIC_RESOURCE,
    PROMETHEUS_METRICS,
    HighNodeUtilizationArgs,
    LowNodeUtilizationArgs,
    MetricsUtilization,
)
from kubescale.scheduling.utilization_math import (
    BASIC_RESOURCES,
    Percentages,
    capped_capacity,
    deviation_thresholds,
    is_above,
    is_below,
    node_capacity,
    usage_percent,
    usage_sum,
)

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyError, StrategyRun

__all__ = [
    "HIGH_NAME",
    "LOW_NAME",
    "NodeUsage",
    "UsageSource",
    "high_node_utilization",
    "lnu_classification",
    "low_node_utilization",
    "resource_names",
]

LOW_NAME: Final = LOW_NODE_UTILIZATION
HIGH_NAME: Final = HIGH_NODE_UTILIZATION


class _PodUsageUnsupported(Exception):
    """The usage source cannot say what one pod uses (Prometheus)."""


class _PodUsageMissing(Exception):
    """No metrics for this pod: it is skipped."""


def resource_names(
    thresholds: Mapping[str, float], metrics: MetricsUtilization | None
) -> list[str]:
    """The resources a plugin tracks: the threshold resources, plus cpu, memory and pods unless
    the usage comes from Prometheus."""
    names = list(thresholds)
    if metrics is not None and metrics.source == PROMETHEUS_METRICS:
        return names
    return [*names, *(r for r in BASIC_RESOURCES if r not in names)]


@dataclass
class UsageSource:
    """A usage client synced for one plugin run (module docstring)."""

    usage: dict[str, dict[str, int]]
    pods: dict[str, list[Pod]]
    pod_usage: Callable[[Pod], dict[str, int]]


def requested_usage(
    pods: Sequence[Pod],
    names: Sequence[str],
    requests_of: Callable[[Pod], Mapping[str, int]] = requests_of,
) -> dict[str, int]:
    """``NodeUtilization``: requests of ``pods`` for ``names``, ``pods`` their count."""
    usage = {"cpu": 0, "memory": 0, "pods": len(pods)}
    for name in names:
        usage.setdefault(name, 0)
    for pod in pods:
        requests = requests_of(pod)
        for name in names:
            if name != "pods" and name in requests:
                usage[name] += requests[name]
    return usage


def _usage_source(
    ctx: StrategyContext, metrics: MetricsUtilization | None, names: Sequence[str]
) -> UsageSource:
    view = ctx.view
    pods = {node_name(n): view.pods_on(node_name(n)) for n in view.nodes}
    if metrics is None:

        def requested(pod: Pod) -> dict[str, int]:
            requests = view.requests_of(pod)
            return {name: requests.get(name, 0) for name in names}

        usage = {
            name: requested_usage(on_node, names, view.requests_of)
            for name, on_node in pods.items()
        }
        return UsageSource(usage=usage, pods=pods, pod_usage=requested)
    if metrics.source == KUBERNETES_METRICS:
        return _actual_usage(ctx, names, pods)
    return _prometheus_usage(ctx, pods, metrics.prometheus_query)


def _actual_usage(
    ctx: StrategyContext, names: Sequence[str], pods: dict[str, list[Pod]]
) -> UsageSource:
    node_usage, pod_usage = ctx.view.node_usage, ctx.view.pod_usage
    if node_usage is None:
        raise StrategyError("error getting node usage: metrics client not initialized")
    usage: dict[str, dict[str, int]] = {}
    for name, on_node in pods.items():
        measured = node_usage.get(name)
        if measured is None:
            raise StrategyError(
                f"error getting node usage: unable to find node {name!r} in the collected metrics"
            )
        row = {"cpu": int(measured.get("cpu", 0)), "memory": int(measured.get("memory", 0))}
        row["pods"] = len(on_node)
        for resource in names:
            if resource not in row:
                raise StrategyError(
                    f"error getting node usage: unable to find {resource!r} resource for "
                    f"collected {name!r} node metric"
                )
        usage[name] = row

    def measured_pod(pod: Pod) -> dict[str, int]:
        meta = Meta(pod).raw
        found = (pod_usage or {}).get((str(meta.get("namespace", "")), str(meta.get("name", ""))))
        if found is None:
            raise _PodUsageMissing
        return {name: int(found[name]) for name in names if name in found}

    return UsageSource(usage=usage, pods=pods, pod_usage=measured_pod)


def _prometheus_usage(ctx: StrategyContext, pods: dict[str, list[Pod]], query: str) -> UsageSource:
    values = (ctx.view.metric_usage or {}).get(query)
    if values is None:
        raise StrategyError("error getting node usage: prometheus client not initialized")
    usage: dict[str, dict[str, int]] = {}
    for name in pods:
        if name not in values:
            raise StrategyError(f"error getting node usage: unable to find metric entry for {name}")
        value = values[name]
        if not 0 <= value <= 1:
            raise StrategyError(
                f"error getting node usage: The collected metrics sample for {name!r} has value "
                f"{value} outside of <0; 1> interval"
            )
        usage[name] = {METRIC_RESOURCE: int(value * 100)}

    def unsupported(pod: Pod) -> dict[str, int]:
        raise _PodUsageUnsupported

    return UsageSource(usage=usage, pods=pods, pod_usage=unsupported)


@dataclass
class NodeUsage:
    """One classified node: its usage (taken down as pods leave) and what it may hold."""

    node: Node
    usage: dict[str, int]
    available: dict[str, int]
    pods: list[Pod]

    @property
    def name(self) -> str:
        return node_name(self.node)


@dataclass(frozen=True)
class Classification:
    percent: Mapping[str, Percentages]
    low: Mapping[str, Percentages]
    high: Mapping[str, Percentages]
    under: tuple[str, ...]
    over: tuple[str, ...]


def lnu_classification(
    *,
    nodes: Sequence[Node],
    usage: Mapping[str, Mapping[str, int]],
    args: LowNodeUtilizationArgs,
) -> Classification:
    """LowNodeUtilization's under/over nodes (module docstring), in node order."""
    capacities = {node_name(n): node_capacity(n) for n in nodes}
    names = list(args.thresholds)
    if args.use_deviation_thresholds:
        percent = {
            name: usage_percent({r: v for r, v in usage[name].items() if r in names}, cap)
            for name, cap in capacities.items()
        }
        low, high = deviation_thresholds(percent.values(), args.thresholds, args.target_thresholds)
    else:
        percent = {name: usage_percent(usage[name], cap) for name, cap in capacities.items()}
        low, high = dict(args.thresholds), dict(args.target_thresholds)
    under, over = [], []
    for node in nodes:
        name = node_name(node)
        if not spec_of(node).get("unschedulable") and is_below(percent[name], low):
            under.append(name)
        elif is_above(percent[name], high):
            over.append(name)
    return Classification(
        percent=percent,
        low=dict.fromkeys(capacities, low),
        high=dict.fromkeys(capacities, high),
        under=tuple(under),
        over=tuple(over),
    )


def low_node_utilization(ctx: StrategyContext, args: LowNodeUtilizationArgs) -> StrategyRun:
    view = ctx.view
    names = resource_names(args.thresholds, args.metrics)
    source = _usage_source(ctx, args.metrics, names)
    classified = lnu_classification(nodes=view.nodes, usage=source.usage, args=args)
    under, over = classified.under, classified.over
    if not under or len(under) <= args.number_of_nodes or len(under) == len(view.nodes):
        return
    if not over:
        return

    def info(name: str) -> NodeUsage:
        node = view.node_by_name[name]
        return NodeUsage(
            node=node,
            usage=dict(source.usage[name]),
            available=capped_capacity(node_capacity(node), classified.high[name], names),
            pods=source.pods[name],
        )

    def keep_going(node: NodeUsage, headroom: Mapping[str, int]) -> bool:
        above = any(node.available.get(r, 0) < value for r, value in node.usage.items())
        return above and all(value > 0 for value in headroom.values())

    sources = sorted((info(n) for n in over), key=lambda n: -usage_sum(n.usage))
    yield from _evict_from_sources(
        ctx,
        sources=sources,
        destinations=[info(n) for n in under],
        resources=names,
        pod_filter=ctx.filter,
        keep_going=keep_going,
        source=source,
        excluded=args.evictable_namespaces,
        node_limit=args.eviction_limit_node,
        reason="node {node} is above its target utilization",
    )


def high_node_utilization(ctx: StrategyContext, args: HighNodeUtilizationArgs) -> StrategyRun:
    view = ctx.view
    names = resource_names(args.thresholds, None)
    source = _usage_source(ctx, None, names)
    under: list[str] = []
    schedulable: list[str] = []
    for node in view.nodes:
        name = node_name(node)
        percent = usage_percent(source.usage[name], node_capacity(node))
        if is_below(percent, args.thresholds):
            under.append(name)
        elif not spec_of(node).get("unschedulable"):
            schedulable.append(name)
    if not under or len(under) <= args.number_of_nodes or len(under) == len(view.nodes):
        return
    if not schedulable:
        return

    def info(name: str) -> NodeUsage:
        node = view.node_by_name[name]
        return NodeUsage(
            node=node,
            usage=dict(source.usage[name]),
            available=capped_capacity(node_capacity(node), args.target_thresholds, names),
            pods=source.pods[name],
        )

    def pod_filter(pod: Pod) -> bool:
        if not ctx.filter(pod):
            return False
        if args.eviction_modes:
            requests = ctx.view.requests_of(pod)
            return any(requests.get(name, 0) > 0 for name in args.thresholds)
        return True

    def keep_going(node: NodeUsage, headroom: Mapping[str, int]) -> bool:
        return all(value > 0 for value in headroom.values())

    sources = sorted((info(n) for n in under), key=lambda n: usage_sum(n.usage))
    yield from _evict_from_sources(
        ctx,
        sources=sources,
        destinations=[info(n) for n in schedulable],
        resources=names,
        pod_filter=pod_filter,
        keep_going=keep_going,
        source=source,
        excluded=args.evictable_namespaces,
        node_limit=None,
        reason="node {node} is under-utilized",
    )


def _evict_from_sources(
    ctx: StrategyContext,
    *,
    sources: Sequence[NodeUsage],
    destinations: Sequence[NodeUsage],
    resources: Sequence[str],
    pod_filter: Callable[[Pod], bool],
    keep_going: Callable[[NodeUsage, Mapping[str, int]], bool],
    source: UsageSource,
    excluded: Namespaces,
    node_limit: int | None,
    reason: str,
) -> StrategyRun:
    """``evictPodsFromSourceNodes`` + ``evictPods`` (module docstring)."""
    headroom: dict[str, int] = {}
    for node in destinations:
        for name in resources:
            if name not in node.usage:
                raise StrategyError(
                    f"unable to find {name} resource in node's {node.name} usage, "
                    "terminating eviction"
                )
            headroom[name] = headroom.get(name, 0) + node.available.get(name, 0) - node.usage[name]
    taints = {n.name: list(spec_of(n.node).get("taints") or ()) for n in destinations}
    for node in sources:
        removable = sort_low_to_high(p for p in node.pods if pod_filter(p))
        if not removable or not keep_going(node, headroom):
            continue
        evicted = 0
        for pod in removable:
            if node_limit is not None and evicted >= node_limit:
                break
            if not tolerates_taints_of_any(pod, taints):
                continue
            namespace = str(Meta(pod).raw.get("namespace", ""))
            if namespace in excluded.exclude or not ctx.pre_eviction_filter(pod):
                continue
            unconstrained = False
            freed: dict[str, int] = {}
            try:
                freed = source.pod_usage(pod)
            except _PodUsageMissing:
                continue
            except _PodUsageUnsupported:
                unconstrained = True
            result = yield from ctx.evict(pod, reason.format(node=node.name))
            if result is EvictionResult.TOTAL_LIMIT:
                return
            if result is EvictionResult.NODE_LIMIT:
                break
            if result is not EvictionResult.EVICTED:
                continue
            if node_limit is None and unconstrained:
                break
            evicted += 1
            if unconstrained:
                continue
            for name in headroom:
                taken = 1 if name == "pods" else freed.get(name, 0)
                node.usage[name] = node.usage.get(name, 0) - taken
                headroom[name] -= taken
            if not keep_going(node, headroom):
                break
