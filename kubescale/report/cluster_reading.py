"""What ``kubescale report`` reads from a cluster: one LIST per collection, nothing written.

Workloads (Deployments, StatefulSets, DaemonSets), their pods, VPAs, HPAs, nodes, the
ReplicaSets and LimitRanges the VPA updater's plan reads (:mod:`.updater_plan`), and the
resource metrics API (``metrics.k8s.io`` PodMetrics and NodeMetrics). A collection the cluster
does not serve (no VPA CRD, no metrics-server: 404/503) is read as empty and named in
:attr:`ClusterReading.missing`, so the report says what it could not see rather than failing.
Any other API error (403 Forbidden ...) or an unreachable server propagates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from kubescale.controllers.vpa.recommender.cluster_feeder import POD_METRICS
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import (
    DAEMON_SETS,
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    LIMIT_RANGES,
    NODES,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
    VERTICAL_POD_AUTOSCALERS,
    ResourceType,
)
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.metrics_api import PodMetrics
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["NODE_METRICS", "WORKLOAD_TYPES", "ClusterReading", "read_cluster"]

NODE_METRICS: Final = ResourceType(
    group="metrics.k8s.io",
    version="v1beta1",
    kind="NodeMetrics",
    plural="nodes",
    namespaced=False,
    verbs=("get", "list"),
)
WORKLOAD_TYPES: Final = (DEPLOYMENTS, STATEFUL_SETS, DAEMON_SETS)
_ABSENT: Final = frozenset({404, 503})
"""Codes of a collection the cluster does not serve (no CRD; aggregated API unavailable)."""


@dataclass(frozen=True, kw_only=True)
class ClusterReading:
    """Everything the report is built from, as raw API objects."""

    workloads: list[dict[str, Any]] = field(default_factory=list)
    """Deployments, StatefulSets and DaemonSets, each with ``kind`` and ``apiVersion`` set."""
    pods: list[Pod] = field(default_factory=list)
    vpas: list[VerticalPodAutoscaler] = field(default_factory=list)
    hpas: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    pod_metrics: list[PodMetrics] = field(default_factory=list)
    node_metrics: list[dict[str, Any]] = field(default_factory=list)
    replica_sets: list[dict[str, Any]] = field(default_factory=list)
    """The pods' controllers under Deployments (their replicas size the updater's budget)."""
    limit_ranges: list[LimitRange] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Collections the cluster does not serve, e.g. ``metrics.k8s.io/v1beta1 pods (404 ...)``."""


async def _items(
    client: KubeClient, rt: ResourceType, namespace: str | None, missing: list[str]
) -> list[dict[str, Any]]:
    try:
        listed = await client.list_all(rt, namespace=namespace if rt.namespaced else None)
    except KubeApiError as err:
        if err.code not in _ABSENT:
            raise
        missing.append(f"{rt.group_version} {rt.plural} ({err.code} {err.reason})")
        return []
    return [_typed(item, rt) for item in listed.items]


def _typed(item: Mapping[str, Any], rt: ResourceType) -> dict[str, Any]:
    return {"apiVersion": rt.group_version, "kind": rt.kind, **item}


async def read_cluster(client: KubeClient, *, namespace: str | None) -> ClusterReading:
    """List every collection of the report (``namespace`` None: all namespaces)."""
    missing: list[str] = []
    workloads: list[dict[str, Any]] = []
    for rt in WORKLOAD_TYPES:
        workloads.extend(await _items(client, rt, namespace, missing))
    return ClusterReading(
        workloads=workloads,
        # The transport boundary: the listed JSON as the typed pods (and nodes below).
        pods=cast(list[Pod], await _items(client, PODS, namespace, missing)),
        vpas=cast(
            list[VerticalPodAutoscaler],
            await _items(client, VERTICAL_POD_AUTOSCALERS, namespace, missing),
        ),
        hpas=await _items(client, HORIZONTAL_POD_AUTOSCALERS, namespace, missing),
        nodes=cast(list[Node], await _items(client, NODES, None, missing)),
        pod_metrics=cast(list[PodMetrics], await _items(client, POD_METRICS, namespace, missing)),
        node_metrics=await _items(client, NODE_METRICS, None, missing),
        replica_sets=await _items(client, REPLICA_SETS, namespace, missing),
        limit_ranges=cast(list[LimitRange], await _items(client, LIMIT_RANGES, namespace, missing)),
        missing=missing,
    )
