"""Reading a live cluster for ``kubescale simulate --from-cluster``: LIST calls and Prometheus
range queries, nothing written anywhere.

The cluster: Deployments, StatefulSets, VPAs, HPAs, PodDisruptionBudgets and nodes, one
paginated LIST each (``namespace`` given: that namespace's objects, nodes always). A
collection the cluster does not serve (no VPA CRD: 404) reads as empty.

The history, per workload, three range queries over [start, end] every ``step`` (the window of
each rate or average is the step, so every sample is that step's average, as the 5-minute
averages of a trace are):

* CPU: ``avg by (container) (rate(container_cpu_usage_seconds_total{namespace, pod=~POD,
  container!="", container!="POD"}[step]))`` — cAdvisor's counter (kubelet ``/metrics/cadvisor``);
  ``container=""`` is the pod-level cgroup and ``POD`` the pause container, neither a container
  of the workload;
* memory: ``avg by (container) (avg_over_time(container_memory_working_set_bytes{…}[step]))``;
* replicas: ``kube_deployment_status_replicas{namespace, deployment}`` or
  ``kube_statefulset_status_replicas{namespace, statefulset}`` (kube-state-metrics).

``POD`` matches the names the workload's controllers give pods. A Deployment's pods are named
``<ReplicaSet>-<5 characters>`` (``names.SimpleNameGenerator``: ``generateName`` plus 5 random
characters) and its ReplicaSets ``<Deployment>-<pod-template-hash>``, the hash encoded by
``rand.SafeEncodeString`` (alphabet ``bcdfghjklmnpqrstvwxz2456789``, at most 10 characters for
a uint32); a StatefulSet's pods are ``<StatefulSet>-<ordinal>``. PromQL regexes are anchored,
so ``web`` does not take the pods of Deployment ``web-api`` (``a`` is not in the alphabet). A
Deployment named like another's ReplicaSet (``web`` and ``web-bcd``) could still take the
other's pods: a limit named in ``docs/simulate-from-cluster.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import (
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    STATEFUL_SETS,
    VERTICAL_POD_AUTOSCALERS,
    ResourceType,
)
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.prometheus.query_values import PrometheusAPIError, QueryValue

from .cluster_capture import (
    SYSTEM_NAMESPACES,
    CaptureError,
    LiveCluster,
    WorkloadHistory,
    WorkloadKey,
    workload_key,
)

__all__ = ["HistoryQueries", "read_history", "read_live_cluster"]

_ABSENT: Final = frozenset({404, 503})
_HASH_CHARACTERS: Final = "bcdfghjklmnpqrstvwxz2456789"
"""``k8s.io/apimachinery/pkg/util/rand``'s alphabet (no vowels, no 0/1/3)."""


async def _list(
    client: KubeClient, rt: ResourceType, namespace: str | None
) -> list[dict[str, Any]]:
    try:
        listed = await client.list_all(rt, namespace=namespace if rt.namespaced else None)
    except KubeApiError as err:
        if err.code in _ABSENT:
            return []
        raise
    return [{"apiVersion": rt.group_version, "kind": rt.kind, **item} for item in listed.items]


async def read_live_cluster(client: KubeClient, *, namespace: str | None) -> LiveCluster:
    """LIST the collections a scenario is built from (system namespaces' workloads are left
    out: they are not the operator's to autoscale)."""
    workloads = [
        w
        for rt in (DEPLOYMENTS, STATEFUL_SETS)
        for w in await _list(client, rt, namespace)
        if workload_key(w).namespace not in SYSTEM_NAMESPACES
    ]
    return LiveCluster(
        workloads=workloads,
        vpas=await _list(client, VERTICAL_POD_AUTOSCALERS, namespace),
        hpas=await _list(client, HORIZONTAL_POD_AUTOSCALERS, namespace),
        pdbs=await _list(client, POD_DISRUPTION_BUDGETS, namespace),
        nodes=await _list(client, NODES, None),
    )


def _promql_string(value: str) -> str:
    """``value`` as a PromQL double-quoted string literal (Go escaping)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pod_name_regex(key: WorkloadKey) -> str:
    """The names of the pods ``key``'s controllers create (module docstring)."""
    name = re.escape(key.name)
    if key.kind == "StatefulSet":
        return f"{name}-[0-9]+"
    letters = f"[{_HASH_CHARACTERS}]"
    return f"{name}-{letters}{{1,10}}-{letters}{{5}}"


@dataclass(frozen=True)
class HistoryQueries:
    """The three PromQL texts of a workload at a step."""

    cpu: str
    memory: str
    replicas: str

    @classmethod
    def of(cls, key: WorkloadKey, step_seconds: int) -> HistoryQueries:
        selector = (
            f"namespace={_promql_string(key.namespace)},pod=~{_promql_string(pod_name_regex(key))},"
            'container!="",container!="POD"'
        )
        window = f"[{step_seconds}s]"
        kind = "statefulset" if key.kind == "StatefulSet" else "deployment"
        return cls(
            cpu=(
                "avg by (container) "
                f"(rate(container_cpu_usage_seconds_total{{{selector}}}{window}))"
            ),
            memory=(
                "avg by (container) "
                f"(avg_over_time(container_memory_working_set_bytes{{{selector}}}{window}))"
            ),
            replicas=(
                f"kube_{kind}_status_replicas{{namespace={_promql_string(key.namespace)},"
                f"{kind}={_promql_string(key.name)}}}"
            ),
        )


def _by_container(value: QueryValue) -> dict[str, list[tuple[int, float]]]:
    series: dict[str, list[tuple[int, float]]] = {}
    for stream in value.matrix:
        container = stream.metric.get("container", "")
        if container:
            series[container] = [(int(t.timestamp()), float(v)) for t, v in stream.values]
    return series


def _counts(value: QueryValue) -> list[tuple[int, int]] | None:
    if not value.matrix:
        return None
    # one series per workload; two (kube-state-metrics scraped twice) agree: take the first
    return [(int(t.timestamp()), round(float(v))) for t, v in value.matrix[0].values]


async def read_history(
    prometheus: PrometheusQueryClient,
    keys: list[WorkloadKey],
    *,
    start: datetime,
    end: datetime,
    step_seconds: int,
    address: str,
) -> dict[WorkloadKey, WorkloadHistory]:
    """Every workload's history; a :class:`CaptureError` naming the query when Prometheus
    cannot answer one, or when it has no container series at all (wrong address, or no
    cAdvisor scrape)."""
    step = timedelta(seconds=step_seconds)
    histories: dict[WorkloadKey, WorkloadHistory] = {}
    for key in keys:
        queries = HistoryQueries.of(key, step_seconds)
        answers: list[QueryValue] = []
        for query in (queries.cpu, queries.memory, queries.replicas):
            try:
                answers.append(await prometheus.query_range(query, start=start, end=end, step=step))
            except PrometheusAPIError as err:
                raise CaptureError(
                    f"Prometheus at {address} did not answer {query}: {err}"
                ) from None
        cpu, memory, replicas = answers
        histories[key] = WorkloadHistory(
            cpu=_by_container(cpu), memory=_by_container(memory), replicas=_counts(replicas)
        )
    if keys and not any(h.cpu or h.memory for h in histories.values()):
        raise CaptureError(
            f"Prometheus at {address} has no container_cpu_usage_seconds_total or "
            "container_memory_working_set_bytes for any workload (is cAdvisor scraped?)"
        )
    return histories
