"""The JSON report of a simulated run, built from a
:class:`~kubescale.sim.scenario.timeline.Timeline`.

Shape (every list sorted by namespace/name, so the report does not depend on dict order):

* ``scenario``, ``seed``, ``start`` (RFC 3339 UTC), ``step`` and ``duration`` (seconds), and
  ``times``: the seconds since start of every record;
* ``containers``: per ``namespace/pod/container`` its columns — ``t``, ``cpu_request``,
  ``cpu_limit``, ``cpu_usage``, ``cpu_demand`` (cores), ``memory_request``, ``memory_limit``,
  ``memory_usage`` (bytes), ``throttled``, ``oom``, ``running`` — one array per field;
* ``workloads``: per ``namespace/name``, per container name the time-weighted average request and
  limit, usage percentiles (p50, p90, p95, p99, max, avg) over the samples in which the container
  ran, slack = ∫(request − usage)dt over every sample (core-hours, GiB-hours; negative when the
  workload used more than it asked for); OOM kills, throttled time (seconds in which any of its
  containers was throttled) and throttled core-seconds (∫(demand − usage)dt while throttled),
  replicas min/avg/max from its first appearance on, pod-seconds Pending and Unschedulable,
  evictions, and its per-record pod counts (aligned with ``times``);
* ``cluster``: node count min/max/avg and per record, node-hours, cost (Σ price per hour × hours
  each node existed; nodes without a known price are listed in ``unpriced_nodes`` and cost 0)
  and the cost accrued by the end of each record (``cost_series``),
  totals of OOM kills, evictions and pending pod-seconds;
* ``components``: the kubescale components that ran; ``loops``: per loop its interval,
  iterations, failures and skipped iterations with their reasons (a silent no-op made visible);
* ``vpas``: per VPA its target, mode and per container the recommendation band (``lower``,
  ``target``, ``upper``; cores and bytes) at every step it had one; ``hpas``: per HPA its
  target, bounds, first metric and its target, and at every step current and desired replicas
  and the metric's current value (:mod:`.autoscaler_records`);
* ``events``: every event in time order;
* ``plans``: the intents the systems' plan executors applied, as
  :meth:`kubescale.plans.journal.PlanJournal.report` gives them: counts per actor, kind of
  intent and outcome, and the first ``detailed_per_kind`` of each actor's kind in detail (time,
  outcome, object, :func:`~kubescale.plans.intents.describe`'s line, the decision's reason);
  ``null`` for a report not made by a run.

Conventions of the numbers: a missing request reserves nothing (counts as 0 in averages and
slack; ``null`` only when it was never set); a missing limit is no limit (averaged over the
samples that had one; ``null`` when none did).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any, Final

from .time_statistics import (
    BYTES_PER_GIB,
    SECONDS_PER_HOUR,
    rounded,
    rounded_or_none,
    time_weighted_average,
    weighted_percentile,
)
from .timeline import EVICTED, ContainerColumns, Timeline, WorkloadColumns

__all__ = ["REPORT_FORMAT", "assemble_report"]

REPORT_FORMAT: Final = "kubescale.dev/simulation-report/v1"
PERCENTILES: Final = (50, 90, 95, 99)


def assemble_report(
    timeline: Timeline,
    *,
    components: Sequence[str] = (),
    loops: Sequence[Mapping[str, Any]] = (),
    autoscalers: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    plans: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    intervals = timeline.intervals()
    pod_workloads = timeline.pod_workloads
    evictions: dict[tuple[str, str], int] = {}
    for event in timeline.events:
        if event.kind != EVICTED:
            continue
        namespace, _, pod = event.subject.partition("/")
        workload = pod_workloads.get((namespace, pod), pod)
        evictions[(namespace, workload)] = evictions.get((namespace, workload), 0) + 1

    containers = [timeline.containers[key] for key in sorted(timeline.containers)]
    by_workload: dict[tuple[str, str], list[ContainerColumns]] = {}
    for columns in containers:
        by_workload.setdefault((columns.namespace, columns.workload), []).append(columns)

    workloads = [
        _workload_summary(
            timeline.workloads[key],
            containers=by_workload.get(key, []),
            intervals=intervals,
            evictions=evictions.get(key, 0),
        )
        for key in sorted(timeline.workloads)
    ]
    return {
        "format": REPORT_FORMAT,
        "scenario": timeline.scenario_name,
        "seed": timeline.seed,
        "start": timeline.start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "step": rounded(timeline.step, "seconds"),
        "duration": rounded(math.fsum(intervals), "seconds"),
        "times": [rounded(t, "seconds") for t in timeline.times],
        "containers": [_container_series(columns, timeline.times) for columns in containers],
        "workloads": workloads,
        "cluster": _cluster_summary(timeline, intervals=intervals, workloads=workloads),
        "components": list(components),
        "loops": [dict(loop) for loop in loops],
        "vpas": list((autoscalers or {}).get("vpas", [])),
        "hpas": list((autoscalers or {}).get("hpas", [])),
        "events": [
            {
                "time": rounded(e.time, "seconds"),
                "kind": e.kind,
                "subject": e.subject,
                "detail": e.detail,
            }
            for e in sorted(timeline.events, key=lambda e: e.time)  # stable: same-time order kept
        ],
        "plans": dict(plans) if plans is not None else None,
    }


def _container_series(columns: ContainerColumns, times: Sequence[float]) -> dict[str, Any]:
    return {
        "namespace": columns.namespace,
        "pod": columns.pod,
        "workload": columns.workload,
        "container": columns.container,
        "node": columns.node,
        "t": [rounded(times[i], "seconds") for i in columns.index],
        "cpu_request": [rounded_or_none(v, "cores") for v in columns.cpu_request],
        "cpu_limit": [rounded_or_none(v, "cores") for v in columns.cpu_limit],
        "cpu_usage": [rounded(v, "cores") for v in columns.cpu_usage],
        "cpu_demand": [rounded(v, "cores") for v in columns.cpu_demand],
        "memory_request": [rounded_or_none(v, "bytes") for v in columns.memory_request],
        "memory_limit": [rounded_or_none(v, "bytes") for v in columns.memory_limit],
        "memory_usage": [rounded(v, "bytes") for v in columns.memory_usage],
        "throttled": [int(v) for v in columns.throttled],
        "oom": [int(v) for v in columns.oom_killed],
        "running": [int(v) for v in columns.running],
    }


def _resource_summary(
    *,
    requests: Sequence[float | None],
    limits: Sequence[float | None],
    usage: Sequence[float],
    running: Sequence[bool],
    weights: Sequence[float],
    unit: str,
    slack_divisor: float,
) -> dict[str, Any]:
    """Request/limit averages, usage percentiles and slack of one resource of one container."""
    request_avg = (
        None
        if all(r is None for r in requests)
        else time_weighted_average(((r or 0.0), w) for r, w in zip(requests, weights, strict=True))
    )
    limit_avg = time_weighted_average(
        (lim, w) for lim, w in zip(limits, weights, strict=True) if lim is not None
    )
    ran = [(u, w) for u, w, r in zip(usage, weights, running, strict=True) if r]
    ran_values = [u for u, _ in ran]
    ran_weights = [w for _, w in ran]
    usage_stats: dict[str, float | None] = {
        f"p{p}": rounded_or_none(weighted_percentile(ran_values, ran_weights, p), unit)
        for p in PERCENTILES
    }
    usage_stats["max"] = rounded(max(ran_values), unit) if ran_values else None
    usage_stats["avg"] = rounded_or_none(time_weighted_average(ran), unit)
    slack = math.fsum(
        ((r or 0.0) - u) * w for r, u, w in zip(requests, usage, weights, strict=True)
    )
    return {
        "request_avg": rounded_or_none(request_avg, unit),
        "limit_avg": rounded_or_none(limit_avg, unit),
        "usage": usage_stats,
        "slack": slack / slack_divisor,
    }


def _container_summary(
    name: str, group: Sequence[ContainerColumns], intervals: Sequence[float]
) -> tuple[dict[str, Any], tuple[float, float, float]]:
    """Summary of one container name across the pods of a workload, and its unrounded CPU
    slack (core-hours), memory slack (GiB-hours) and throttled core-seconds for the sums."""
    weights = [intervals[i] for columns in group for i in columns.index]

    def flat(attribute: str) -> list[Any]:
        return [value for columns in group for value in getattr(columns, attribute)]

    running = flat("running")
    cpu = _resource_summary(
        requests=flat("cpu_request"),
        limits=flat("cpu_limit"),
        usage=flat("cpu_usage"),
        running=running,
        weights=weights,
        unit="cores",
        slack_divisor=SECONDS_PER_HOUR,
    )
    memory = _resource_summary(
        requests=flat("memory_request"),
        limits=flat("memory_limit"),
        usage=flat("memory_usage"),
        running=running,
        weights=weights,
        unit="bytes",
        slack_divisor=SECONDS_PER_HOUR * BYTES_PER_GIB,
    )
    throttled = flat("throttled")
    throttled_seconds = math.fsum(w for w, th in zip(weights, throttled, strict=True) if th)
    throttled_core_seconds = math.fsum(
        max(0.0, demand - used) * w
        for demand, used, w, th in zip(
            flat("cpu_demand"), flat("cpu_usage"), weights, throttled, strict=True
        )
        if th
    )
    summary = {
        "name": name,
        "samples": len(weights),
        "cpu": {
            "request_avg_cores": cpu["request_avg"],
            "limit_avg_cores": cpu["limit_avg"],
            "usage_cores": cpu["usage"],
            "slack_core_hours": rounded(cpu["slack"], "hours"),
        },
        "memory": {
            "request_avg_bytes": memory["request_avg"],
            "limit_avg_bytes": memory["limit_avg"],
            "usage_bytes": memory["usage"],
            "slack_gib_hours": rounded(memory["slack"], "hours"),
        },
        "oom_kills": sum(1 for oom in flat("oom_killed") if oom),
        "throttled_seconds": rounded(throttled_seconds, "seconds"),
        "throttled_core_seconds": rounded(throttled_core_seconds, "seconds"),
    }
    return summary, (cpu["slack"], memory["slack"], throttled_core_seconds)


def _workload_summary(
    columns: WorkloadColumns,
    *,
    containers: Sequence[ContainerColumns],
    intervals: Sequence[float],
    evictions: int,
) -> dict[str, Any]:
    groups: dict[str, list[ContainerColumns]] = {}
    for container in containers:
        groups.setdefault(container.container, []).append(container)
    summaries: list[dict[str, Any]] = []
    sums: list[tuple[float, float, float]] = []
    for name in sorted(groups):
        summary, raw = _container_summary(name, groups[name], intervals)
        summaries.append(summary)
        sums.append(raw)
    own = intervals[columns.first :]
    replica_avg = time_weighted_average(zip(columns.replicas, own, strict=True))
    lead = [0] * columns.first  # before the workload appeared
    return {
        "namespace": columns.namespace,
        "name": columns.name,
        "containers": summaries,
        "slack_core_hours": rounded(math.fsum(cpu for cpu, _, _ in sums), "hours"),
        "slack_gib_hours": rounded(math.fsum(memory for _, memory, _ in sums), "hours"),
        "oom_kills": sum(s["oom_kills"] for s in summaries),
        "throttled_seconds": rounded(math.fsum(intervals[i] for i in columns.throttled), "seconds"),
        "throttled_core_seconds": rounded(math.fsum(core_s for _, _, core_s in sums), "seconds"),
        "replicas": {
            "min": min(columns.replicas, default=0),
            "avg": rounded(replica_avg or 0.0, "count"),
            "max": max(columns.replicas, default=0),
        },
        "pending_pod_seconds": rounded(
            math.fsum(n * w for n, w in zip(columns.pending, own, strict=True)), "seconds"
        ),
        "unschedulable_pod_seconds": rounded(
            math.fsum(n * w for n, w in zip(columns.unschedulable, own, strict=True)), "seconds"
        ),
        "evictions": evictions,
        "series": {
            "replicas": lead + columns.replicas,
            "running": lead + columns.running,
            "pending": lead + columns.pending,
        },
    }


def _cluster_summary(
    timeline: Timeline, *, intervals: Sequence[float], workloads: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    counts = timeline.node_count
    nodes: list[dict[str, Any]] = []
    unpriced: list[str] = []
    cost = 0.0
    for name in sorted(timeline.node_records):
        seconds = math.fsum(intervals[i] for i in timeline.node_records[name])
        price = timeline.node_prices.get(name)
        if price is None:
            unpriced.append(name)
        node_cost = (price or 0.0) * seconds / SECONDS_PER_HOUR
        cost += node_cost
        records = timeline.node_records[name]
        nodes.append(
            {
                "name": name,
                "instance_type": timeline.node_instance_types.get(name, ""),
                "price_per_hour": rounded_or_none(price, "cost"),
                "first_seen": rounded(timeline.times[records[0]], "seconds"),
                "last_seen": rounded(timeline.times[records[-1]], "seconds"),
                "hours": rounded(seconds / SECONDS_PER_HOUR, "hours"),
                "cost": rounded(node_cost, "cost"),
            }
        )
    node_seconds = math.fsum(n * w for n, w in zip(counts, intervals, strict=True))
    # Cost accrued up to the end of each record (the record's nodes for its interval).
    rate = [0.0] * len(counts)
    for name, records in timeline.node_records.items():
        for i in records:
            rate[i] += timeline.node_prices.get(name) or 0.0
    accrued: list[float] = []
    total = 0.0
    for per_hour, seconds in zip(rate, intervals, strict=True):
        total += per_hour * seconds / SECONDS_PER_HOUR
        accrued.append(rounded(total, "cost"))
    return {
        "node_count": {
            "min": min(counts, default=0),
            "max": max(counts, default=0),
            "avg": rounded(
                time_weighted_average(zip(counts, intervals, strict=True)) or 0.0, "count"
            ),
            "series": list(counts),
        },
        "node_hours": rounded(node_seconds / SECONDS_PER_HOUR, "hours"),
        "cost": rounded(cost, "cost"),
        "cost_series": accrued,
        "nodes": nodes,
        "unpriced_nodes": unpriced,
        "oom_kills": sum(w["oom_kills"] for w in workloads),
        "evictions": sum(1 for e in timeline.events if e.kind == EVICTED),
        "pending_pod_seconds": rounded(
            math.fsum(w["pending_pod_seconds"] for w in workloads), "seconds"
        ),
        "unschedulable_pod_seconds": rounded(
            math.fsum(w["unschedulable_pod_seconds"] for w in workloads), "seconds"
        ),
        "throttled_core_seconds": rounded(
            math.fsum(w["throttled_core_seconds"] for w in workloads), "seconds"
        ),
    }
