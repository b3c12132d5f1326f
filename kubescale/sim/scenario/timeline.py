"""The record of a simulated run: what every container requested and used, step by step.

Contract: the scenario runner calls :meth:`Timeline.record` once per simulation step, after all
actors (and kubescale's loops) ran, with the kubelet's container samples of that step, every pod
and node as raw API dicts, and the events of the step.
:func:`kubescale.sim.scenario.report_assembly.assemble_report` turns the record into the JSON
report; same inputs in the same order give an equal report and byte-identical JSON.

Time accounting: the record taken at ``t_i`` stands for the interval ``[t_i, t_(i+1))`` — the
state the actors left holds until the next step — and the last record for one ``step``. Every
integral of the report (slack, pod-seconds, node-hours, cost, throttled time) is the sum over
records of value × that interval, which is exact for a cluster that changes only at steps.

Recording is cheap per step (appends to per-container and per-workload columns); all
statistics are computed once, when the report is assembled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from kubescale.sim.cluster.cluster_events import (
    EVICTED,
    NODE_ADDED,
    NODE_REMOVED,
    OOM_KILL,
    POD_DELETED,
    POD_STARTED,
    TimelineEvent,
)
from kubescale.sim.cluster.usage_models import WORKLOAD_LABEL

__all__ = [
    "EVICTED",
    "NODE_ADDED",
    "NODE_REMOVED",
    "OOM_KILL",
    "POD_DELETED",
    "POD_STARTED",
    "WEBHOOK_RESIZE",
    "WORKLOAD_LABEL",
    "ContainerSampleLike",
    "Timeline",
    "TimelineEvent",
]


WEBHOOK_RESIZE = "webhook-resize"
"""A pod first seen with the VPA admission webhook's ``vpaUpdates`` annotation (upstream's:
``Pod resources updated by <vpa>: container 0: cpu request, memory request``): the webhook
set its resources at creation. Its detail is the annotation — which resources it set, so an
HPA/VPA conflict shows too (the webhook leaving CPU to the HPA sets memory only)."""
_VPA_UPDATES: Final = "vpaUpdates"


class ContainerSampleLike(Protocol):
    """What the report reads of the kubelet's ``ContainerSample`` (kubescale.sim.cluster.kubelet):
    one container of one pod in one step. CPU in cores, memory in bytes; ``None`` = not set. An
    empty ``workload`` (a pod no simulated controller made) makes the pod its own workload."""

    @property
    def namespace(self) -> str: ...
    @property
    def pod(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def container(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def cpu_request(self) -> float | None: ...
    @property
    def cpu_limit(self) -> float | None: ...
    @property
    def memory_request(self) -> float | None: ...
    @property
    def memory_limit(self) -> float | None: ...
    @property
    def cpu_usage(self) -> float: ...
    @property
    def memory_usage(self) -> float: ...
    @property
    def cpu_demand(self) -> float: ...
    @property
    def throttled(self) -> bool: ...
    @property
    def oom_killed(self) -> bool: ...
    @property
    def running(self) -> bool: ...


@dataclass
class ContainerColumns:
    """The samples of one container (``namespace/pod/container``), one entry per record it was
    sampled in; ``index`` is the record's position in :attr:`Timeline.times`."""

    namespace: str
    pod: str
    workload: str
    container: str
    node: str
    index: list[int] = field(default_factory=list)
    cpu_request: list[float | None] = field(default_factory=list)
    cpu_limit: list[float | None] = field(default_factory=list)
    cpu_usage: list[float] = field(default_factory=list)
    cpu_demand: list[float] = field(default_factory=list)
    memory_request: list[float | None] = field(default_factory=list)
    memory_limit: list[float | None] = field(default_factory=list)
    memory_usage: list[float] = field(default_factory=list)
    throttled: list[bool] = field(default_factory=list)
    oom_killed: list[bool] = field(default_factory=list)
    running: list[bool] = field(default_factory=list)


@dataclass
class WorkloadColumns:
    """Pod counts of one workload (``namespace/name``) per record, from its first appearance
    (``first``) on; ``throttled`` holds the records in which any of its containers was."""

    namespace: str
    name: str
    first: int
    replicas: list[int] = field(default_factory=list)
    """Pods that exist, are not being deleted and have not finished (Succeeded/Failed)."""
    running: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    """Pods in phase Pending (not yet bound, or bound and not started)."""
    unschedulable: list[int] = field(default_factory=list)
    """Pending pods the scheduler marked PodScheduled=False reason Unschedulable."""
    throttled: set[int] = field(default_factory=set)


def pod_workload(pod: Mapping[str, Any]) -> str:
    """The workload a pod belongs to: the simulated controllers' label, else the pod itself."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return str(labels.get(WORKLOAD_LABEL) or metadata.get("name") or "")


def _pod_phase(pod: Mapping[str, Any]) -> str:
    # A pod without status.phase is Pending: the API server defaults it on create.
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _is_unschedulable(pod: Mapping[str, Any]) -> bool:
    # The scheduler's verdict on an unplaceable pod (upstream: PodScheduled=False, reason
    # Unschedulable, set by the scheduling framework's failure handler).
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return bool(
                condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
            )
    return False


class Timeline:
    """Collects one record per simulation step and builds the report from them."""

    def __init__(
        self,
        *,
        scenario_name: str,
        seed: int,
        start: datetime,
        step: float,
        node_prices: Mapping[str, float],
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("the start of a timeline must be timezone-aware")
        if step <= 0:
            raise ValueError(f"step must be positive, got {step}")
        self.scenario_name = scenario_name
        self.seed = seed
        self.start = start
        self.step = float(step)
        self.node_prices: dict[str, float] = dict(node_prices)
        self.times: list[float] = []
        self.containers: dict[tuple[str, str, str], ContainerColumns] = {}
        self.workloads: dict[tuple[str, str], WorkloadColumns] = {}
        self.pod_workloads: dict[tuple[str, str], str] = {}
        self._pods_seen: set[tuple[str, str]] = set()
        """Pods already recorded (a pod's resize by the webhook is reported once)."""
        """``(namespace, pod)`` → workload name, for events that name a pod that is gone."""
        self.node_count: list[int] = []
        self.node_records: dict[str, list[int]] = {}
        self.node_instance_types: dict[str, str] = {}
        self.events: list[TimelineEvent] = []

    def add_node_price(self, node: str, price_per_hour: float) -> None:
        """Price per hour of a node (a node group's machine, known once it is created)."""
        if price_per_hour < 0:
            raise ValueError(f"a price cannot be negative, got {price_per_hour}")
        self.node_prices[node] = float(price_per_hour)

    def record(
        self,
        *,
        now: datetime,
        containers: Sequence[ContainerSampleLike],
        pods: Sequence[dict[str, Any]],
        nodes: Sequence[dict[str, Any]],
        events: Sequence[TimelineEvent],
    ) -> None:
        """Take this step's record (call once per step, after every actor and loop ran)."""
        t = (now - self.start).total_seconds()
        if self.times and t <= self.times[-1]:
            raise ValueError(f"records must move forward in time: {t} after {self.times[-1]}")
        index = len(self.times)
        self.times.append(t)
        self._record_containers(index, containers)
        resized = self._record_pods(index, pods, t)
        self._record_nodes(index, nodes)
        self.events.extend(events)
        self.events.extend(resized)

    def intervals(self) -> list[float]:
        """Seconds each record stands for: up to the next record, one ``step`` for the last."""
        times = self.times
        return [times[i + 1] - times[i] for i in range(len(times) - 1)] + (
            [self.step] if times else []
        )

    def _workload(self, namespace: str, name: str, index: int) -> WorkloadColumns:
        key = (namespace, name)
        columns = self.workloads.get(key)
        if columns is None:
            columns = WorkloadColumns(namespace=namespace, name=name, first=index)
            self.workloads[key] = columns
        return columns

    def _record_containers(self, index: int, samples: Sequence[ContainerSampleLike]) -> None:
        for sample in samples:
            key = (sample.namespace, sample.pod, sample.container)
            columns = self.containers.get(key)
            if columns is None:
                columns = ContainerColumns(
                    namespace=sample.namespace,
                    pod=sample.pod,
                    workload=sample.workload or sample.pod,  # as pod_workload: its own workload
                    container=sample.container,
                    node=sample.node,
                )
                self.containers[key] = columns
                self.pod_workloads[(sample.namespace, sample.pod)] = columns.workload
            columns.node = sample.node
            columns.index.append(index)
            columns.cpu_request.append(sample.cpu_request)
            columns.cpu_limit.append(sample.cpu_limit)
            columns.cpu_usage.append(sample.cpu_usage)
            columns.cpu_demand.append(sample.cpu_demand)
            columns.memory_request.append(sample.memory_request)
            columns.memory_limit.append(sample.memory_limit)
            columns.memory_usage.append(sample.memory_usage)
            columns.throttled.append(sample.throttled)
            columns.oom_killed.append(sample.oom_killed)
            columns.running.append(sample.running)
            workload = self._workload(sample.namespace, columns.workload, index)
            if sample.throttled:
                workload.throttled.add(index)

    def _record_pods(
        self, index: int, pods: Sequence[dict[str, Any]], t: float
    ) -> list[TimelineEvent]:
        """The pods' counts per workload; the webhook's resizes of pods first seen now."""
        # (replicas, running, pending, unschedulable) per workload this step.
        counts: dict[tuple[str, str], list[int]] = {}
        resized: list[TimelineEvent] = []
        for pod in pods:
            metadata = pod.get("metadata") or {}
            namespace = str(metadata.get("namespace") or "")
            name = pod_workload(pod)
            pod_key = (namespace, str(metadata.get("name") or ""))
            if pod_key not in self._pods_seen:
                self._pods_seen.add(pod_key)
                updates = (metadata.get("annotations") or {}).get(_VPA_UPDATES)
                if updates:
                    resized.append(
                        TimelineEvent(
                            time=t, kind=WEBHOOK_RESIZE, subject="/".join(pod_key), detail=updates
                        )
                    )
            self.pod_workloads.setdefault(pod_key, name)
            self._workload(namespace, name, index)
            row = counts.setdefault((namespace, name), [0, 0, 0, 0])
            phase = _pod_phase(pod)
            if metadata.get("deletionTimestamp") or phase in {"Succeeded", "Failed"}:
                continue
            row[0] += 1
            if phase == "Running":
                row[1] += 1
            elif phase == "Pending":
                row[2] += 1
                if _is_unschedulable(pod):
                    row[3] += 1
        for key, columns in self.workloads.items():
            replicas, running, pending, unschedulable = counts.get(key, (0, 0, 0, 0))
            # A workload first seen this step through its samples has no rows yet either way.
            columns.replicas.append(replicas)
            columns.running.append(running)
            columns.pending.append(pending)
            columns.unschedulable.append(unschedulable)
        return resized

    def _record_nodes(self, index: int, nodes: Sequence[dict[str, Any]]) -> None:
        self.node_count.append(len(nodes))
        for node in nodes:
            metadata = node.get("metadata") or {}
            name = str(metadata.get("name") or "")
            self.node_records.setdefault(name, []).append(index)
            if name not in self.node_instance_types:
                labels = metadata.get("labels") or {}
                self.node_instance_types[name] = str(
                    labels.get("node.kubernetes.io/instance-type") or ""
                )
