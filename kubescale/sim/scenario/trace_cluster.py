"""A whole cluster built from a usage trace: the scenario's ``trace`` section.

A scenario with ``trace: {file: usage.csv, nodeGroup: {...}}`` (or ``kubescale simulate --trace
usage.csv --node-group ...``) is expanded, before it is validated like any other scenario, into
the workloads, autoscalers and node group the trace implies. The rules, each one that holds for
any trace of replay protocol v1 (``/work/shared/traces/README.md``), not a fit to one cluster:

* **Workloads.** Each trace ``workload`` becomes a Deployment (``kind: StatefulSet`` if asked) in
  ``namespace`` with one container per trace ``container``; every container replays its series
  (``usage: {type: replay}``, ``hold: previous``: the 5-minute averages as a monitoring system
  shows them).
* **Requests and limits.** Protocol v1 step 1: the applied request starts at the provisioned
  amounts, requests equal limits — the series' first provisioned CPU and memory, rounded up to
  the millicore and the byte. A trace without provisioned columns takes ``defaults.requests``
  (and ``defaults.limits``, default the requests); neither is an error naming the series.
* **Replicas and HPAs.** A workload in the replica series file (``replicas``: columns
  ``timestamp, workload, replicas``) starts at its first recorded count and its usage samples
  are one replica's while it ran the recorded count: the workload's load is sample × count,
  shared by the replicas it runs. It gets an HPA on CPU utilization (``hpa.targetCPUUtilization``,
  default 80: upstream's default target when an HPA names no metric,
  ``autoscaling/v1 targetCPUUtilizationPercentage``), between the fewest and the most replicas
  the trace recorded (``hpa.minReplicas``/``hpa.maxReplicas`` override). Other workloads run
  one replica and no HPA.
* **VPAs.** Every workload gets a VerticalPodAutoscaler in ``vpa.mode`` (default ``Auto``;
  ``vpa: false`` for none) with ``updatePolicy.minReplicas`` ``vpa.minReplicas`` (default 1):
  upstream's updater leaves workloads of fewer than ``--min-replicas`` (2) replicas alone, so
  without it a trace of single VMs would only ever be sized when a pod happens to be recreated.
* **Node group.** One Cluster API node group of ``nodeGroup.instanceType`` nodes of
  ``nodeGroup.allocatable`` at ``nodeGroup.pricePerHour``. Its initial size is the number of
  nodes first-fit-decreasing packing needs for every initial pod at its requests (so the run
  without autoscaling starts with every pod placed); ``max`` defaults to twice that, ``min`` to
  0. A pod larger than a node is an error naming the workload.
* **Run.** ``start`` is the trace's first sample (UTC), ``step`` its sampling period (the
  most common gap between two samples of a series, the shortest over the series; 5 min when
  every series has one sample), ``duration`` from the first sample to the last
  plus one step, ``compare: true``, and the ``kubescale`` section the whole suite (webhook,
  recommender, updater, cluster autoscaler, and the HPA controller when there are HPAs) —
  each unless the scenario sets it.

The trace and the replica series are checked whole first (:func:`scan_trace`,
:func:`load_replica_series`): missing columns, unparsable or negative numbers, rows out of time
order, workloads of the replica series that are not in the trace — each a one-line problem
naming the file and line, before anything runs or is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

from kubescale.objects.quantities import BINARY_SI, DECIMAL_SI, Quantity, QuantityError
from kubescale.sim.cluster.trace_replay import (
    ReplicaSeries,
    SeriesSummary,
    TraceError,
    load_replica_series,
    scan_trace,
)

from .scenario_fields import Problems, field_path
from .scenario_format import ScenarioError

__all__ = ["TRACE_FIELDS", "expand_trace", "pack_nodes"]

TRACE_FIELDS: Final = (
    "file",
    "replicas",
    "namespace",
    "kind",
    "workloads",
    "limit",
    "defaults",
    "vpa",
    "hpa",
    "nodeGroup",
)
_NODE_GROUP_FIELDS: Final = (
    "name",
    "instanceType",
    "allocatable",
    "pricePerHour",
    "min",
    "max",
    "replicas",
    "provisioningDelay",
    "deprovisioningDelay",
    "zones",
)
DEFAULT_HPA_TARGET: Final = 80
"""Upstream's CPU utilization target of an HPA that names no metric (autoscaling/v1)."""
DEFAULT_VPA_MIN_REPLICAS: Final = 1
_BUILTIN_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
_DEFAULT_PODS: Final = 110


@dataclass(frozen=True)
class _Pod:
    """One initial pod's requests: millicores, bytes."""

    workload: str
    millicores: int
    memory: int


def pack_nodes(pods: list[_Pod], *, millicores: int, memory: int, pods_per_node: int) -> int:
    """How many nodes of the given allocatable first-fit-decreasing needs for ``pods``
    (largest share of a node first; each pod on the first node with room for it)."""
    nodes: list[list[int]] = []  # free millicores, free bytes, free pod slots
    ordered = sorted(
        pods, key=lambda p: (-max(p.millicores / millicores, p.memory / memory), p.workload)
    )
    for pod in ordered:
        for free in nodes:
            if free[0] >= pod.millicores and free[1] >= pod.memory and free[2] >= 1:
                free[0] -= pod.millicores
                free[1] -= pod.memory
                free[2] -= 1
                break
        else:
            nodes.append([millicores - pod.millicores, memory - pod.memory, pods_per_node - 1])
    return len(nodes)


def _millicores(cores: float) -> int:
    return math.ceil(Fraction(cores) * 1000)


def _quantity(p: Problems, value: object, path: str) -> Quantity | None:
    if value is None:
        p.add(path, "required")
        return None
    try:
        quantity = Quantity.from_json(value)
    except QuantityError as exc:
        p.add(path, str(exc))
        return None
    if quantity.sign() <= 0:
        p.add(path, f"must be > 0, got {value!r}")
        return None
    return quantity


def _resources(p: Problems, value: object, path: str) -> tuple[int, int] | None:
    """``{cpu, memory}`` → (millicores, bytes), both required and > 0."""
    raw = p.mapping(value, path, allowed=("cpu", "memory"), required=("cpu", "memory"))
    if raw is None:
        return None
    if raw.get("cpu") is None or raw.get("memory") is None:
        return None  # reported as required
    cpu = _quantity(p, raw.get("cpu"), field_path(path, "cpu"))
    memory = _quantity(p, raw.get("memory"), field_path(path, "memory"))
    if cpu is None or memory is None:
        return None
    return math.ceil(cpu.as_float() * 1000 - 1e-9), math.ceil(memory.as_float() - 1e-9)


def _as_quantities(millicores: int, memory: int) -> dict[str, str]:
    return {
        "cpu": Quantity.from_milli(millicores, DECIMAL_SI).to_json(),
        "memory": Quantity.from_int(memory, BINARY_SI).to_json(),
    }


def _file(p: Problems, value: object, path: str, base_dir: Path) -> Path | None:
    text = p.string(value, path)
    if text is None:
        return None
    resolved = (base_dir / text).resolve()
    if not resolved.is_file():
        p.add(path, f"file {text!r} not found (looked at {resolved})")
        return None
    return resolved


def _selected(
    p: Problems, raw: Mapping[str, Any], names: list[str], trace: Path
) -> list[str] | None:
    """The trace's workloads the section keeps: ``workloads`` (a list) and/or ``limit``."""
    chosen = names
    if raw.get("workloads") is not None:
        wanted: list[str] = []
        for item_path, item in p.items(raw.get("workloads"), "trace.workloads"):
            name = p.string(item, item_path)
            if name is not None and name not in names:
                p.add(item_path, f"workload {name!r} is not in {trace}")
            elif name is not None:
                wanted.append(name)
        chosen = sorted(set(wanted))
    limit = p.integer(raw.get("limit"), "trace.limit", minimum=1)
    if limit is not None:
        chosen = chosen[:limit]
    return None if p else chosen


def expand_trace(document: Mapping[str, Any], *, base_dir: Path) -> dict[str, Any]:
    """``document`` with its ``trace`` section replaced by what it implies (module docstring).

    Raises :class:`ScenarioError` with every problem of the section, or the first problem of
    the trace or replica file (one line naming the file and line)."""
    p = Problems()
    raw = p.mapping(
        document.get("trace"), "trace", allowed=TRACE_FIELDS, required=("file", "nodeGroup")
    )
    if raw is None:
        raise ScenarioError(p.messages)
    trace_path = _file(p, raw.get("file"), "trace.file", base_dir)
    replicas_path = (
        _file(p, raw.get("replicas"), "trace.replicas", base_dir)
        if raw.get("replicas") is not None
        else None
    )
    namespace = p.string(raw.get("namespace"), "trace.namespace", default="default")
    kind = p.choice(
        raw.get("kind", "Deployment"),
        "trace.kind",
        what="workload kind",
        choices=("Deployment", "StatefulSet"),
    )
    defaults = _defaults(p, raw.get("defaults"))
    vpa = _vpa(p, raw.get("vpa"))
    hpa = _hpa(p, raw.get("hpa"))
    group = p.mapping(
        raw.get("nodeGroup"),
        "trace.nodeGroup",
        allowed=_NODE_GROUP_FIELDS,
        required=("instanceType", "allocatable"),
    )
    allocatable = None
    pods_per_node = _DEFAULT_PODS
    if group is not None and group.get("allocatable") is not None:
        alloc = p.mapping(
            group.get("allocatable"),
            "trace.nodeGroup.allocatable",
            allowed=("cpu", "memory", "pods"),
            required=("cpu", "memory"),
        )
        if alloc is not None:
            allocatable = _resources(
                p,
                {k: v for k, v in alloc.items() if k != "pods"},
                "trace.nodeGroup.allocatable",
            )
            pods = p.integer(
                alloc.get("pods"), "trace.nodeGroup.allocatable.pods", default=110, minimum=1
            )
            pods_per_node = pods if pods is not None else _DEFAULT_PODS
    if p or trace_path is None or group is None or namespace is None or kind is None:
        raise ScenarioError(p.messages)
    try:
        series = scan_trace(trace_path)
        names = sorted({workload for workload, _ in series})
        recorded = (
            load_replica_series(replicas_path, known=set(names), trace_name=str(trace_path))
            if replicas_path is not None
            else {}
        )
    except TraceError as exc:
        raise ScenarioError([f"trace: {exc}"]) from None
    except OSError as exc:
        raise ScenarioError([f"trace: cannot read {exc.filename}: {exc.strerror}"]) from None
    chosen = _selected(p, raw, names, trace_path)
    if chosen is None or allocatable is None:
        raise ScenarioError(p.messages)
    kept = {key: summary for key, summary in series.items() if key[0] in set(chosen)}
    workloads, objects, initial = _workloads(
        p,
        kept,
        recorded,
        trace=trace_path,
        replicas_file=replicas_path,
        namespace=namespace,
        kind=kind,
        defaults=defaults,
        vpa=vpa,
        hpa=hpa,
    )
    if p:
        raise ScenarioError(p.messages)
    millicores, memory = allocatable
    for pod in initial:
        if pod.millicores > millicores or pod.memory > memory:
            p.add(
                "trace.nodeGroup.allocatable",
                f"a pod of {pod.workload} asks {_as_quantities(pod.millicores, pod.memory)}, "
                f"more than a node holds ({_as_quantities(millicores, memory)})",
            )
    if p:
        raise ScenarioError(p.messages)
    size = pack_nodes(initial, millicores=millicores, memory=memory, pods_per_node=pods_per_node)
    node_group: dict[str, Any] = {
        "name": group.get("name", "trace"),
        "min": group.get("min", 0),
        "max": group.get("max", max(2 * size, 1)),
        "replicas": group.get("replicas", size),
        "template": {
            "instanceType": group["instanceType"],
            "allocatable": {
                **_as_quantities(millicores, memory),
                "pods": pods_per_node,
            },
        },
        "pricePerHour": group.get("pricePerHour", 0),
    }
    for key in ("provisioningDelay", "deprovisioningDelay"):
        if key in group:
            node_group[key] = group[key]
    if "zones" in group:
        node_group["template"]["zones"] = group["zones"]
    return _document(
        document,
        kept=kept,
        namespace=namespace,
        workloads=workloads,
        objects=objects,
        node_group=node_group,
        with_hpa=any(o["kind"] == "HorizontalPodAutoscaler" for o in objects),
    )


@dataclass(frozen=True)
class _Defaults:
    requests: tuple[int, int] | None
    limits: tuple[int, int] | None


def _defaults(p: Problems, value: object) -> _Defaults:
    if value is None:
        return _Defaults(None, None)
    raw = p.mapping(value, "trace.defaults", allowed=("requests", "limits"))
    if raw is None:
        return _Defaults(None, None)
    requests = (
        _resources(p, raw["requests"], "trace.defaults.requests")
        if raw.get("requests") is not None
        else None
    )
    limits = (
        _resources(p, raw["limits"], "trace.defaults.limits")
        if raw.get("limits") is not None
        else None
    )
    if limits is not None and requests is None:
        p.add("trace.defaults.requests", "required with limits")
    if (
        limits is not None
        and requests is not None
        and (limits[0] < requests[0] or limits[1] < requests[1])
    ):
        p.add("trace.defaults.limits", "must not be below the requests")
    return _Defaults(requests, limits)


@dataclass(frozen=True)
class _Vpa:
    mode: str | None
    min_replicas: int


def _vpa(p: Problems, value: object) -> _Vpa:
    if value is False:
        return _Vpa(None, DEFAULT_VPA_MIN_REPLICAS)
    if value is None or value is True:
        return _Vpa("Auto", DEFAULT_VPA_MIN_REPLICAS)
    raw = p.mapping(value, "trace.vpa", allowed=("mode", "minReplicas"))
    if raw is None:
        return _Vpa(None, DEFAULT_VPA_MIN_REPLICAS)
    mode = p.choice(
        raw.get("mode", "Auto"),
        "trace.vpa.mode",
        what="update mode",
        choices=("Off", "Initial", "Recreate", "InPlaceOrRecreate", "Auto"),
    )
    low = p.integer(
        raw.get("minReplicas"),
        "trace.vpa.minReplicas",
        default=DEFAULT_VPA_MIN_REPLICAS,
        minimum=1,
    )
    return _Vpa(mode, low if low is not None else DEFAULT_VPA_MIN_REPLICAS)


@dataclass(frozen=True)
class _Hpa:
    target: int
    min_replicas: int | None
    max_replicas: int | None


def _hpa(p: Problems, value: object) -> _Hpa:
    if value is None:
        return _Hpa(DEFAULT_HPA_TARGET, None, None)
    raw = p.mapping(
        value, "trace.hpa", allowed=("targetCPUUtilization", "minReplicas", "maxReplicas")
    )
    if raw is None:
        return _Hpa(DEFAULT_HPA_TARGET, None, None)
    target = p.integer(
        raw.get("targetCPUUtilization"),
        "trace.hpa.targetCPUUtilization",
        default=DEFAULT_HPA_TARGET,
        minimum=1,
    )
    low = p.integer(raw.get("minReplicas"), "trace.hpa.minReplicas", minimum=1)
    high = p.integer(raw.get("maxReplicas"), "trace.hpa.maxReplicas", minimum=1)
    if low is not None and high is not None and low > high:
        p.add("trace.hpa.minReplicas", f"min ({low}) is greater than max ({high})")
    return _Hpa(target or DEFAULT_HPA_TARGET, low, high)


def _workloads(
    p: Problems,
    kept: Mapping[tuple[str, str], SeriesSummary],
    recorded: Mapping[str, ReplicaSeries],
    *,
    trace: Path,
    replicas_file: Path | None,
    namespace: str,
    kind: str,
    defaults: _Defaults,
    vpa: _Vpa,
    hpa: _Hpa,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[_Pod]]:
    """The workload entries, the VPA/HPA manifests and the initial pods' requests."""
    by_workload: dict[str, list[SeriesSummary]] = {}
    for (workload, _), summary in sorted(kept.items()):
        by_workload.setdefault(workload, []).append(summary)
    workloads: list[dict[str, Any]] = []
    objects: list[dict[str, Any]] = []
    pods: list[_Pod] = []
    for name, summaries in by_workload.items():
        counts = recorded.get(name)
        containers: list[dict[str, Any]] = []
        pod_cpu = pod_memory = 0
        for summary in summaries:
            sized = _sizes(p, summary, defaults, trace)
            if sized is None:
                continue
            (req_cpu, req_memory), (lim_cpu, lim_memory) = sized
            pod_cpu += req_cpu
            pod_memory += req_memory
            usage: dict[str, Any] = {
                "type": "replay",
                "file": str(trace),
                "workload": name,
                "container": summary.container,
            }
            if counts is not None and replicas_file is not None:
                usage.update(shared=True, replicas=str(replicas_file))
            containers.append(
                {
                    "name": summary.container,
                    "requests": _as_quantities(req_cpu, req_memory),
                    "limits": _as_quantities(lim_cpu, lim_memory),
                    "usage": usage,
                }
            )
        replicas = 1 if counts is None else counts.counts[0]
        workloads.append(
            {
                "kind": kind,
                "name": name,
                "namespace": namespace,
                "replicas": replicas,
                "labels": {"app": name},
                "containers": containers,
            }
        )
        pods += [_Pod(name, pod_cpu, pod_memory)] * replicas
        target_ref = {"apiVersion": "apps/v1", "kind": kind, "name": name}
        if vpa.mode is not None:
            objects.append(
                {
                    "apiVersion": "autoscaling.k8s.io/v1",
                    "kind": "VerticalPodAutoscaler",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {
                        "targetRef": target_ref,
                        "updatePolicy": {"updateMode": vpa.mode, "minReplicas": vpa.min_replicas},
                    },
                }
            )
        if counts is not None:
            low = hpa.min_replicas or max(1, min(counts.counts))
            high = max(hpa.max_replicas or max(counts.counts), low)
            objects.append(
                {
                    "apiVersion": "autoscaling/v2",
                    "kind": "HorizontalPodAutoscaler",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "annotations": {"hpa.kubescale.io/controller": "kubescale"},
                    },
                    "spec": {
                        "scaleTargetRef": target_ref,
                        "minReplicas": low,
                        "maxReplicas": high,
                        "metrics": [
                            {
                                "type": "Resource",
                                "resource": {
                                    "name": "cpu",
                                    "target": {
                                        "type": "Utilization",
                                        "averageUtilization": hpa.target,
                                    },
                                },
                            }
                        ],
                    },
                }
            )
    return workloads, objects, pods


def _sizes(
    p: Problems, summary: SeriesSummary, defaults: _Defaults, trace: Path
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(requests, limits) of a container: provisioned (requests = limits), else the
    defaults."""
    if summary.provisioned is not None:
        cpu = _millicores(summary.provisioned.cpu_cores)
        memory = math.ceil(Fraction(summary.provisioned.memory_bytes))
        if cpu > 0 and memory > 0:
            return (cpu, memory), (cpu, memory)
    if defaults.requests is None:
        p.add(
            "trace.defaults.requests",
            f"required: {trace} has no provisioned CPU and memory (> 0) for "
            f"{summary.workload}/{summary.container}",
        )
        return None
    return defaults.requests, defaults.limits or defaults.requests


def _go_seconds(seconds: float) -> str:
    """A Go duration string of ``seconds`` (``300s``, ``2.5s``)."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds:.6f}".rstrip("0") + "s"


def _document(
    document: Mapping[str, Any],
    *,
    kept: Mapping[tuple[str, str], SeriesSummary],
    namespace: str,
    workloads: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    node_group: dict[str, Any],
    with_hpa: bool,
) -> dict[str, Any]:
    first = min(s.first for s in kept.values())
    last = max(s.last for s in kept.values())
    gaps = [s.interval for s in kept.values() if s.interval is not None]
    step = min(gaps) if gaps else 300.0
    expanded = {key: value for key, value in document.items() if key != "trace"}
    expanded.setdefault("start", datetime.fromtimestamp(first, tz=UTC).isoformat())
    expanded.setdefault("step", _go_seconds(step))
    expanded.setdefault("duration", _go_seconds(last - first + step))
    expanded.setdefault("compare", True)
    if namespace not in _BUILTIN_NAMESPACES:
        listed = list(expanded.get("namespaces") or [])
        if namespace not in listed:
            expanded["namespaces"] = [*listed, namespace]
    expanded["workloads"] = [*(expanded.get("workloads") or []), *workloads]
    expanded["objects"] = [*(expanded.get("objects") or []), *objects]
    expanded["nodeGroups"] = [*(expanded.get("nodeGroups") or []), node_group]
    if "kubescale" not in expanded:
        suite: dict[str, Any] = {
            "webhook": {},
            "vpa-recommender": {},
            "vpa-updater": {},
            "cluster-autoscaler": {},
        }
        if with_hpa:
            suite["hpa-controller"] = {}
        expanded["kubescale"] = suite
    return expanded
