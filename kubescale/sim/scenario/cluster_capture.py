"""A live cluster as a scenario: what ``kubescale simulate --from-cluster`` writes.

:mod:`.live_reading` reads the cluster (LIST only) and its usage history (Prometheus); this
module turns what was read into three files the user can edit and rerun — pure, no I/O but
:func:`write_capture`:

* ``usage.csv`` — the usage history as a trace of replay protocol v1
  (``timestamp, workload, container, cpu_cores, memory_bytes``; ``/work/shared/traces/README.md``),
  one series per container of each captured workload, ``workload`` = ``namespace/name``: one
  replica's usage (the average over the workload's pods at each step);
* ``replicas.csv`` — ``timestamp, workload, replicas``: the workload's recorded replica count
  (kube-state-metrics), for the workloads that have one;
* ``scenario.yaml`` — the cluster as it is, not by rule: each Deployment/StatefulSet with its
  pod template's requests, limits and scheduling fields and its replay usage; its VPAs, HPAs
  and PodDisruptionBudgets as found (HPAs keep their Resource metrics — the only ones the
  simulated cluster produces); one Cluster API node group per instance type.

Rules, each one that holds for any cluster (not a fit to one):

* **Load follows replicas.** A workload with a recorded replica series replays ``shared``
  usage: its load at a step is one replica's sample × the recorded count, divided among the
  replicas the simulated run has (what the trace section does for a replica series). Without
  one, each simulated replica uses one replica's sample. A workload with an HPA needs the
  series (its HPA would otherwise scale a load that does not move): a :class:`CaptureError`
  names the metric.
* **Node groups.** Nodes are grouped by ``node.kubernetes.io/instance-type`` (the well-known
  label; ``beta.kubernetes.io/instance-type`` before it, else ``unknown``); control-plane
  nodes (``node-role.kubernetes.io/control-plane``) carry no workloads and are left out. A
  group starts at its node count with the most common allocatable of its nodes, ``min`` 0 and
  ``max`` twice the count (the trace section's rule), the zones of
  ``topology.kubernetes.io/zone``, and the price per hour given for its instance type (0, and
  a note, without one).
* **What is left out is said.** Workloads without history, VPAs/HPAs/PDBs whose target was not
  captured, an HPA's non-Resource metrics: each a line in :attr:`Capture.notes`, which the
  command prints and the scenario's comment header repeats.
"""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import yaml

from kubescale.objects.views import mapping, meta, text

from .workload_validation import POD_SPEC_FIELDS

__all__ = [
    "INSTANCE_TYPE_LABELS",
    "Capture",
    "CaptureError",
    "LiveCluster",
    "WorkloadHistory",
    "WorkloadKey",
    "build_capture",
    "write_capture",
]

INSTANCE_TYPE_LABELS: Final = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
)
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
CONTROL_PLANE_LABELS: Final = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)
HPA_CONTROLLER_ANNOTATION: Final = "hpa.kubescale.io/controller"
SYSTEM_NAMESPACES: Final = ("kube-system", "kube-public", "kube-node-lease")
_BUILTIN_NAMESPACES: Final = ("default", *SYSTEM_NAMESPACES)
_SCHEDULING_FIELDS: Final = tuple(
    f for f in POD_SPEC_FIELDS if f not in ("priorityClassName", "priority", "restartPolicy")
)
"""Pod-template fields carried over. A PriorityClass is not captured, so neither is a pod's
priority; the restart policy is the kind's."""
USAGE_FILE: Final = "usage.csv"
REPLICAS_FILE: Final = "replicas.csv"
SCENARIO_FILE: Final = "scenario.yaml"


class CaptureError(Exception):
    """A one-line reason the cluster cannot be captured (names what is missing)."""


@dataclass(frozen=True, order=True)
class WorkloadKey:
    namespace: str
    kind: str
    name: str

    @property
    def trace_name(self) -> str:
        """The workload column of the usage trace."""
        return f"{self.namespace}/{self.name}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class LiveCluster:
    """What was listed: raw API objects (Deployments and StatefulSets with ``kind`` set)."""

    workloads: Sequence[Mapping[str, Any]] = ()
    vpas: Sequence[Mapping[str, Any]] = ()
    hpas: Sequence[Mapping[str, Any]] = ()
    pdbs: Sequence[Mapping[str, Any]] = ()
    nodes: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True, kw_only=True)
class WorkloadHistory:
    """A workload's history: per container, (unix seconds, value) samples in time order."""

    cpu: Mapping[str, Sequence[tuple[int, float]]] = field(default_factory=dict)
    memory: Mapping[str, Sequence[tuple[int, float]]] = field(default_factory=dict)
    replicas: Sequence[tuple[int, int]] | None = None


@dataclass(frozen=True, kw_only=True)
class Capture:
    document: dict[str, Any]
    usage_rows: list[tuple[int, str, str, float, float]]
    replica_rows: list[tuple[int, str, int]]
    notes: list[str]


def workload_key(obj: Mapping[str, Any]) -> WorkloadKey:
    m = meta(obj)
    return WorkloadKey(m.namespace or "default", text(obj.get("kind")), m.name)


def _target_key(obj: Mapping[str, Any], field_name: str) -> WorkloadKey:
    ref = mapping(mapping(obj.get("spec")).get(field_name))
    return WorkloadKey(
        meta(obj).namespace or "default", text(ref.get("kind")), text(ref.get("name"))
    )


def _joined(history: WorkloadHistory, container: str) -> list[tuple[int, float, float]]:
    """The steps at which both a CPU and a memory sample exist."""
    memory = dict(history.memory.get(container, ()))
    return [(t, cpu, memory[t]) for t, cpu in history.cpu.get(container, ()) if t in memory]


def _containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = mapping(mapping(mapping(obj.get("spec")).get("template")).get("spec"))
    containers = spec.get("containers")
    return [mapping(c) for c in containers] if isinstance(containers, list) else []


def _resources(container: Mapping[str, Any], part: str) -> dict[str, str]:
    amounts = mapping(mapping(container.get("resources")).get(part))
    return {r: str(amounts[r]) for r in ("cpu", "memory") if r in amounts}


def _workload_entry(obj: Mapping[str, Any], key: WorkloadKey, *, shared: bool) -> dict[str, Any]:
    spec = mapping(obj.get("spec"))
    template = mapping(spec.get("template"))
    pod_spec = mapping(template.get("spec"))
    containers = []
    for container in _containers(obj):
        name = text(container.get("name"))
        usage: dict[str, Any] = {
            "type": "replay",
            "file": USAGE_FILE,
            "workload": key.trace_name,
            "container": name,
        }
        if shared:
            usage.update(shared=True, replicas=REPLICAS_FILE)
        entry: dict[str, Any] = {"name": name}
        image = text(container.get("image"))
        if image:
            entry["image"] = image
        for part in ("requests", "limits"):
            amounts = _resources(container, part)
            if amounts:
                entry[part] = amounts
        entry["usage"] = usage
        containers.append(entry)
    replicas = spec.get("replicas")
    workload: dict[str, Any] = {
        "kind": key.kind,
        "name": key.name,
        "namespace": key.namespace,
        "replicas": replicas if isinstance(replicas, int) else 1,
        "labels": dict(meta(template).labels),
        "containers": containers,
    }
    scheduling = {f: pod_spec[f] for f in _SCHEDULING_FIELDS if pod_spec.get(f)}
    if scheduling:
        workload["podSpec"] = scheduling
    return workload


def _clean(obj: Mapping[str, Any], *, keep_spec: Sequence[str] | None = None) -> dict[str, Any]:
    """``obj`` as a manifest: apiVersion, kind, name, namespace, labels, spec (or the listed
    spec fields) — no status, no server-set metadata."""
    m = meta(obj)
    metadata: dict[str, Any] = {"name": m.name, "namespace": m.namespace or "default"}
    if m.labels:
        metadata["labels"] = dict(m.labels)
    spec = mapping(obj.get("spec"))
    if keep_spec is not None:
        spec = {k: spec[k] for k in keep_spec if k in spec}
    return {
        "apiVersion": text(obj.get("apiVersion")),
        "kind": text(obj.get("kind")),
        "metadata": metadata,
        "spec": dict(spec),
    }


def _hpa_manifest(hpa: Mapping[str, Any], notes: list[str]) -> dict[str, Any] | None:
    manifest = _clean(hpa)
    where = f"HorizontalPodAutoscaler {meta(hpa).namespace}/{meta(hpa).name}"
    metrics = manifest["spec"].get("metrics")
    if metrics is None:
        kept: list[Any] | None = None  # upstream's default: 80 % CPU utilization
    else:
        listed = metrics if isinstance(metrics, list) else []
        kept = [m for m in listed if isinstance(m, Mapping) and m.get("type") == "Resource"]
        dropped = len(listed) - len(kept)
        if dropped:
            notes.append(
                f"{where}: {dropped} metric(s) not of type Resource left out (the simulated "
                "cluster has no custom or external metrics)"
            )
        if not kept:
            notes.append(f"{where}: left out (no Resource metric)")
            return None
        manifest["spec"]["metrics"] = kept
    manifest["metadata"]["annotations"] = {HPA_CONTROLLER_ANNOTATION: "kubescale"}
    return manifest


def _instance_type(node: Mapping[str, Any]) -> str:
    labels = meta(node).labels
    for label in INSTANCE_TYPE_LABELS:
        if labels.get(label):
            return labels[label]
    return "unknown"


def _group_name(instance_type: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in instance_type.lower()).strip("-")
    return f"ng-{cleaned or 'unknown'}"


def _node_groups(
    nodes: Sequence[Mapping[str, Any]], prices: Mapping[str, float], notes: list[str]
) -> list[dict[str, Any]]:
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        labels = meta(node).labels
        if any(label in labels for label in CONTROL_PLANE_LABELS):
            notes.append(f"node {meta(node).name}: control-plane node left out")
            continue
        by_type.setdefault(_instance_type(node), []).append(node)
    groups = []
    for instance_type, members in sorted(by_type.items()):
        shapes: Counter[tuple[tuple[str, str], ...]] = Counter()
        for node in members:
            allocatable = mapping(mapping(node.get("status")).get("allocatable"))
            shapes[
                tuple(
                    (r, str(allocatable[r])) for r in ("cpu", "memory", "pods") if r in allocatable
                )
            ] += 1
        shape = dict(max(shapes.items(), key=lambda item: (item[1], item[0]))[0])
        if "pods" in shape:
            shape["pods"] = int(shape["pods"])  # type: ignore[assignment]
        zones = sorted({meta(n).labels.get(ZONE_LABEL, "") for n in members} - {""})
        template: dict[str, Any] = {"instanceType": instance_type, "allocatable": shape}
        if zones:
            template["zones"] = zones
        price = prices.get(instance_type)
        if price is None:
            notes.append(f"instance type {instance_type}: no price given (--node-price), cost 0")
        groups.append(
            {
                "name": _group_name(instance_type),
                "min": 0,
                "max": max(2 * len(members), 1),
                "replicas": len(members),
                "template": template,
                "pricePerHour": price or 0.0,
            }
        )
    return groups


def build_capture(
    cluster: LiveCluster,
    histories: Mapping[WorkloadKey, WorkloadHistory],
    *,
    start: datetime,
    end: datetime,
    step_seconds: int,
    prices: Mapping[str, float],
    name: str = "from-cluster",
) -> Capture:
    """The scenario and trace rows for ``cluster`` over [start, end) (module docstring)."""
    notes: list[str] = []
    usage_rows: list[tuple[int, str, str, float, float]] = []
    replica_rows: list[tuple[int, str, int]] = []
    workloads: list[dict[str, Any]] = []
    captured: set[WorkloadKey] = set()
    with_hpa = {_target_key(h, "scaleTargetRef") for h in cluster.hpas}
    for obj in sorted(cluster.workloads, key=workload_key):
        key = workload_key(obj)
        history = histories.get(key, WorkloadHistory())
        names = [text(c.get("name")) for c in _containers(obj)]
        series = {c: _joined(history, c) for c in names}
        missing = [c for c in names if not series[c]]
        if not names or missing:
            notes.append(
                f"{key}: left out (no usage history for container(s) {', '.join(missing)})"
                if missing
                else f"{key}: left out (no containers)"
            )
            continue
        if key in with_hpa and not history.replicas:
            metric = (
                "kube_statefulset_status_replicas"
                if key.kind == "StatefulSet"
                else "kube_deployment_status_replicas"
            )
            raise CaptureError(
                f"{key} has an HorizontalPodAutoscaler: its replica history needs {metric} "
                "(kube-state-metrics) in Prometheus, and there is none"
            )
        shared = bool(history.replicas)
        for container in names:
            usage_rows += [
                (t, key.trace_name, container, cpu, mem) for t, cpu, mem in series[container]
            ]
        if history.replicas:
            replica_rows += [(t, key.trace_name, count) for t, count in history.replicas]
        workloads.append(_workload_entry(obj, key, shared=shared))
        captured.add(key)
    if not workloads:
        raise CaptureError("no workload has usage history in Prometheus over the history length")
    objects: list[dict[str, Any]] = []
    for vpa in sorted(cluster.vpas, key=lambda o: (meta(o).namespace, meta(o).name)):
        target = _target_key(vpa, "targetRef")
        if target not in captured:
            notes.append(
                f"VerticalPodAutoscaler {meta(vpa).namespace}/{meta(vpa).name}: "
                f"left out (target {target} not captured)"
            )
            continue
        objects.append(
            _clean(vpa, keep_spec=("targetRef", "updatePolicy", "resourcePolicy", "recommenders"))
        )
    for hpa in sorted(cluster.hpas, key=lambda o: (meta(o).namespace, meta(o).name)):
        target = _target_key(hpa, "scaleTargetRef")
        if target not in captured:
            notes.append(
                f"HorizontalPodAutoscaler {meta(hpa).namespace}/{meta(hpa).name}: "
                f"left out (target {target} not captured)"
            )
            continue
        manifest = _hpa_manifest(hpa, notes)
        if manifest is not None:
            objects.append(manifest)
    namespaces = sorted({w["namespace"] for w in workloads} - set(_BUILTIN_NAMESPACES))
    for pdb in sorted(cluster.pdbs, key=lambda o: (meta(o).namespace, meta(o).name)):
        if (meta(pdb).namespace or "default") not in {w["namespace"] for w in workloads}:
            continue
        objects.append(
            _clean(
                pdb,
                keep_spec=(
                    "selector",
                    "minAvailable",
                    "maxUnavailable",
                    "unhealthyPodEvictionPolicy",
                ),
            )
        )
    groups = _node_groups(cluster.nodes, prices, notes)
    if not groups:
        raise CaptureError("the cluster has no worker nodes to build node groups from")
    suite: dict[str, Any] = {
        "webhook": {},
        "vpa-recommender": {},
        "vpa-updater": {},
        "cluster-autoscaler": {},
    }
    if any(o["kind"] == "HorizontalPodAutoscaler" for o in objects):
        suite["hpa-controller"] = {}
    document: dict[str, Any] = {
        "name": name,
        "start": start.astimezone(UTC).isoformat(),
        "duration": f"{int((end - start).total_seconds())}s",
        "step": f"{step_seconds}s",
        "compare": True,
    }
    if namespaces:
        document["namespaces"] = namespaces
    document.update(workloads=workloads, objects=objects, nodeGroups=groups, kubescale=suite)
    usage_rows.sort(key=lambda r: (r[1], r[2], r[0]))
    replica_rows.sort(key=lambda r: (r[1], r[0]))
    return Capture(document=document, usage_rows=usage_rows, replica_rows=replica_rows, notes=notes)


def _csv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def write_capture(capture: Capture, directory: Path, *, source: str) -> Path:
    """Write the three files into ``directory`` (created), each atomically (a temporary file
    renamed over it: an interrupted capture leaves no half-written file); the scenario's path."""
    directory.mkdir(parents=True, exist_ok=True)
    header = [
        f"# Captured by kubescale simulate --from-cluster from {source}",
        "# Edit and rerun: kubescale simulate " + str(directory / SCENARIO_FILE),
    ]
    header += [f"# note: {note}" for note in capture.notes]
    files = {
        USAGE_FILE: _csv(
            ("timestamp", "workload", "container", "cpu_cores", "memory_bytes"),
            [(t, w, c, repr(cpu), repr(mem)) for t, w, c, cpu, mem in capture.usage_rows],
        ),
        SCENARIO_FILE: "\n".join(header) + "\n" + yaml.safe_dump(capture.document, sort_keys=False),
    }
    if capture.replica_rows:
        files[REPLICAS_FILE] = _csv(("timestamp", "workload", "replicas"), capture.replica_rows)
    for file_name, content in files.items():
        target = directory / file_name
        partial = target.with_name(f".{file_name}.partial")
        partial.write_text(content, encoding="utf-8")
        os.replace(partial, target)
    return directory / SCENARIO_FILE
