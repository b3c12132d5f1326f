"""The simulated kubelets of every node: run bound pods, meter their usage, kill and restart.

One :class:`Kubelet` actor plays the kubelet of every node that exists. Each step, for every pod
bound to an existing node (sorted by namespace/name):

* **start**: ``start_delay`` seconds after the kubelet first saw the pod bound, its containers
  run (init containers counted as completed, sidecars running): phase Running, Ready, ``podIP``,
  ``startTime``, ``containerStatuses`` with ``started``/``ready``, ``state.running.startedAt``
  and ``resources`` = the requests/limits the container runs with (event ``pod-started``);
* **usage**: every running container asks the :class:`~.usage_models.UsageBook` (workload from
  the pod's ``WORKLOAD_LABEL``, ``pod_index`` from ``POD_INDEX_ANNOTATION``, ``replicas`` = the
  workload's running pods, ``since_start`` = seconds since the container last started). CPU
  above the limit is capped at the limit (CFS throttling) and the unmet core-seconds are
  counted; memory above the limit is an OOM kill (event ``oom-kill``, see
  :mod:`.container_runtime` for restarts and CrashLoopBackOff). Usage is published as
  metrics-server would (``api.metrics``: per pod, and per node as the sum);
* **resize**: spec resources changed through ``pods/resize`` are applied, or the pod gets
  ``PodResizePending`` Infeasible/Deferred (:mod:`.pod_status`);
* **Job pods** with ``RUN_SECONDS_ANNOTATION`` exit 0 after that many seconds of running, and
  the pod turns Succeeded (restart policy Never/OnFailure);
* **deletion**: a pod with ``deletionTimestamp`` stops using resources at once and is deleted
  with grace 0 when its grace period is over — event ``evicted`` when it carries the
  ``DisruptionTarget`` condition of an eviction (reason EvictionByEvictionAPI), else
  ``pod-deleted``; a pod that vanishes without the kubelet (force-deleted, its node removed)
  gets the same event.

Writes: a pod's status is written only when the runtime changed it; the steady state (running
containers, constant usage) writes nothing. :meth:`Kubelet.samples` and :meth:`Kubelet.events`
hold this step's container samples and events for the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.kube.resources import NODES, PODS
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.storage import format_time, parse_time
from kubescale.sim.cluster.cluster_events import (
    EVICTED,
    OOM_KILL,
    POD_DELETED,
    POD_STARTED,
    TimelineEvent,
)

from .container_runtime import OOM_EXIT_CODE, ContainerRun
from .pod_runs import TERMINAL_PHASES, PodRun
from .usage_models import UsageBook

__all__ = ["DEFAULT_START_DELAY", "ContainerSample", "Kubelet"]

log = component_logger("sim.kubelet")

DEFAULT_START_DELAY: Final = 5.0


@dataclass(frozen=True, slots=True)
class ContainerSample:
    """One container of one pod in one step (CPU in cores, memory in bytes)."""

    namespace: str
    pod: str
    workload: str
    container: str
    node: str
    cpu_request: float | None
    cpu_limit: float | None
    memory_request: float | None
    memory_limit: float | None
    cpu_usage: float
    """What the container used, after throttling."""
    memory_usage: float
    cpu_demand: float
    """What the usage model asked for, before throttling."""
    throttled: bool
    oom_killed: bool
    """Killed for memory this step."""
    running: bool


class Kubelet:
    """An :class:`~kubescale.sim.cluster.actor.Actor`: the kubelets of all nodes, acting on
    ``api.store``."""

    def __init__(
        self,
        api: ApiServer,
        *,
        usage: UsageBook,
        start: datetime,
        start_delay: float = DEFAULT_START_DELAY,
    ) -> None:
        self._api = api
        self._store = api.store
        self._usage = usage
        self._start = start
        self._start_delay = start_delay
        self._pods: dict[tuple[str, str], PodRun] = {}
        self._last_t: float | None = None
        self._samples: list[ContainerSample] = []
        self._events: list[TimelineEvent] = []
        self._ips = 0
        self._node_metrics: set[str] = set()
        self._times: dict[float, str] = {}

    # --------------------------------------------------------------------------- outputs

    def samples(self) -> list[ContainerSample]:
        """This step's container samples (pods bound to a node, not finished), sorted."""
        return list(self._samples)

    def events(self) -> list[TimelineEvent]:
        """This step's events: pod-started, oom-kill, evicted, pod-deleted."""
        return list(self._events)

    def throttled_core_seconds(self) -> dict[tuple[str, str, str], float]:
        """Unmet CPU demand so far, core-seconds, per (namespace, pod, container) still known."""
        return {
            (run.namespace, run.name, c.name): c.throttled_core_seconds
            for run in self._pods.values()
            for c in run.containers
        }

    def _timestamp(self, t: float) -> str:
        text = self._times.get(t)
        if text is None:
            if len(self._times) > 64:
                self._times.clear()
            text = self._times[t] = format_time(self._start + timedelta(seconds=t))
        return text

    def _event(self, t: float, kind: str, subject: str, detail: str) -> None:
        self._events.append(TimelineEvent(time=t, kind=kind, subject=subject, detail=detail))

    # ------------------------------------------------------------------------------ step

    async def step(self, now: datetime) -> None:
        t = (now - self._start).total_seconds()
        dt = t - self._last_t if self._last_t is not None else 0.0
        self._last_t = t
        self._samples = []
        self._events = []
        nodes = {n["metadata"]["name"]: n for n in self._store.snapshots(NODES)}
        pods = self._store.snapshots(PODS)
        runs: list[PodRun] = []
        seen: set[tuple[str, str]] = set()
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue
            meta = pod["metadata"]
            key = (str(meta["namespace"]), str(meta["name"]))
            run = self._pods.get(key)
            if node not in nodes:
                # no kubelet runs there (yet, or any more): nothing runs, nothing is reported
                if run is not None and run.uid == meta.get("uid"):
                    seen.add(key)
                    self._unpublish(run)
                continue
            if run is None or run.uid != meta.get("uid"):
                if run is not None:
                    self._vanished(run, t)
                run = self._pods[key] = self._adopt(pod, str(node), t)
            run.snapshot = pod
            seen.add(key)
            runs.append(run)
        for key in sorted(set(self._pods) - seen):
            self._vanished(self._pods.pop(key), t)
        for run in runs:
            self._lifecycle(run, t, nodes, pods)
        replicas: dict[str, int] = {}
        for run in runs:
            if run.active and run.workload:
                replicas[run.workload] = replicas.get(run.workload, 0) + 1
        node_usage = {name: [0.0, 0.0] for name in nodes}
        for run in runs:
            if not run.gone:
                self._use(run, t=t, dt=dt, replicas=replicas, node_usage=node_usage, now=now)
            if run.dirty and not run.gone:
                self._write_status(run, t)
        for run in runs:
            if run.gone:
                self._pods.pop((run.namespace, run.name), None)
        for name in sorted(self._node_metrics - set(node_usage)):
            self._api.metrics.remove_node_metrics(name=name)
        for name, (cpu, memory) in node_usage.items():
            self._api.metrics.set_node_metrics(
                name=name,
                usage={"cpu": f"{round(cpu * 1e9)}n", "memory": str(round(memory))},
                labels=nodes[name]["metadata"].get("labels") or {},
                timestamp=now,
            )
        self._node_metrics = set(node_usage)

    def _adopt(self, pod: Mapping[str, Any], node: str, t: float) -> PodRun:
        run = PodRun.of_pod(pod, node=node, t=t)
        phase = (pod.get("status") or {}).get("phase")
        if phase in TERMINAL_PHASES:
            run.finished = True
        elif phase == "Running":
            self._start_pod(run, t)  # already running (adopted from a seeded cluster)
        return run

    def _vanished(self, run: PodRun, t: float) -> None:
        """A pod the kubelet knew is gone without it (force-deleted, or its node removed)."""
        self._unpublish(run)
        if not run.gone:
            self._deleted_event(run, t)

    def _deleted_event(self, run: PodRun, t: float) -> None:
        if run.evicted():
            self._event(t, EVICTED, run.ref, f"evicted from node {run.node}")
        else:
            self._event(t, POD_DELETED, run.ref, f"deleted from node {run.node}")

    # ------------------------------------------------------------------------ lifecycle

    def _lifecycle(
        self,
        run: PodRun,
        t: float,
        nodes: Mapping[str, Mapping[str, Any]],
        pods: Sequence[Mapping[str, Any]],
    ) -> None:
        pod = run.snapshot
        meta = pod["metadata"]
        deletion = meta.get("deletionTimestamp")
        if deletion:
            if not run.stopping:
                run.stopping = True
                for container in run.containers:
                    container.started_at = None
                self._unpublish(run)
            if t >= (parse_time(deletion) - self._start).total_seconds():
                self._delete(run, t)
            return
        if run.finished:
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            run.finished = True  # someone else finished it
            self._unpublish(run)
            return
        if run.started_at is None:
            if t >= run.seen_at + self._start_delay:
                self._start_pod(run, t)
                self._event(t, POD_STARTED, run.ref, f"on node {run.node}")
            return
        for container in run.containers:
            if container.restart_due(t):
                run.dirty = True
        if run.resize_checked is not pod or run.resize is not None:
            run.check_resize(node=nodes.get(run.node), pods=pods)

    def _start_pod(self, run: PodRun, t: float) -> None:
        self._ips += 1
        ip = f"10.244.{self._ips // 250}.{self._ips % 250 + 1}"
        run.start(t=t, ip=ip, timestamp=self._timestamp)

    def _delete(self, run: PodRun, t: float) -> None:
        """The kubelet's final delete of a terminated pod (grace period 0), once.

        A pod held by finalizers stays until they are removed; its event comes when it goes.
        """
        if run.delete_requested:
            return
        run.delete_requested = True
        self._unpublish(run)
        try:
            outcome = self._store.delete(
                PODS,
                run.name,
                run.namespace,
                grace_period_seconds=0,
                preconditions={"uid": run.uid},
            )
        except ApiError as exc:
            log.warning(
                "could not delete pod", extra={"fields": {"pod": run.ref, "error": str(exc)}}
            )
            return
        if outcome.removed:
            run.gone = True
            self._deleted_event(run, t)

    def _unpublish(self, run: PodRun) -> None:
        if run.metrics_published:
            self._api.metrics.remove_pod_metrics(namespace=run.namespace, name=run.name)
            run.metrics_published = False

    # ---------------------------------------------------------------------------- usage

    def _use(
        self,
        run: PodRun,
        *,
        t: float,
        dt: float,
        replicas: Mapping[str, int],
        node_usage: dict[str, list[float]],
        now: datetime,
    ) -> None:
        if run.finished:
            return
        active = run.active
        if (
            active
            and run.run_seconds is not None
            and run.started_at is not None
            and t - run.started_at >= run.run_seconds
        ):
            self._complete(run, t)
            active = run.active
        metrics: dict[str, dict[str, str]] = {}
        totals = node_usage.get(run.node)
        for container in run.containers:
            applied = container.applied
            cpu = memory = demand = 0.0
            throttled = oom = False
            # the demand left unmet since the previous sample, which stood for that interval
            container.throttled_core_seconds += container.excess_cpu * dt
            container.excess_cpu = 0.0
            if active and container.running:
                assert container.started_at is not None
                usage = (
                    self._usage.usage(
                        workload=run.workload,
                        container=container.name,
                        pod_index=run.pod_index,
                        t=t,
                        replicas=replicas.get(run.workload, 0),
                        since_start=t - container.started_at,
                    )
                    if run.workload
                    else None
                )
                if usage is not None:
                    demand, memory = usage.cpu_cores, usage.memory_bytes
                cpu = demand
                limit = applied.cpu_limit
                if limit is not None and demand > limit:
                    cpu, throttled = limit, True
                container.excess_cpu = demand - cpu
                memory_limit = applied.memory_limit
                if memory_limit is not None and memory > memory_limit:
                    memory, oom = memory_limit, True
                    self._oom_kill(run, container, t=t, usage_bytes=memory)
                if container.running:
                    metrics[container.name] = {
                        "cpu": f"{round(cpu * 1e9)}n",
                        "memory": str(round(memory)),
                    }
                if totals is not None:
                    totals[0] += cpu
                    totals[1] += memory
            self._samples.append(
                ContainerSample(
                    namespace=run.namespace,
                    pod=run.name,
                    workload=run.workload,
                    container=container.name,
                    node=run.node,
                    cpu_request=applied.cpu_request,
                    cpu_limit=applied.cpu_limit,
                    memory_request=applied.memory_request,
                    memory_limit=applied.memory_limit,
                    cpu_usage=cpu,
                    memory_usage=memory,
                    cpu_demand=demand,
                    throttled=throttled,
                    oom_killed=oom,
                    running=container.running and active,
                )
            )
        if metrics and run.active:
            self._api.metrics.set_pod_metrics(
                namespace=run.namespace,
                name=run.name,
                containers=metrics,
                labels=run.snapshot["metadata"].get("labels") or {},
                timestamp=now,
            )
            run.metrics_published = True
        else:
            self._unpublish(run)

    def _oom_kill(self, run: PodRun, container: ContainerRun, t: float, usage_bytes: float) -> None:
        container.exit(
            t=t,
            exit_code=OOM_EXIT_CODE,
            reason="OOMKilled",
            timestamp=self._timestamp,
            pod_ref=run.pod_ref,
        )
        run.dirty = True
        self._event(
            t,
            OOM_KILL,
            run.ref,
            f"container {container.name} reached its memory limit of {round(usage_bytes)} bytes "
            f"(restarts: {container.restart_count})",
        )
        run.settle_phase(self._timestamp)

    def _complete(self, run: PodRun, t: float) -> None:
        """A Job pod's work is done: its containers exit 0."""
        for container in run.containers:
            if container.running:
                container.exit(
                    t=t,
                    exit_code=0,
                    reason="Completed",
                    timestamp=self._timestamp,
                    pod_ref=run.pod_ref,
                )
        run.dirty = True
        run.settle_phase(self._timestamp)

    # --------------------------------------------------------------------------- status

    def _write_status(self, run: PodRun, t: float) -> None:
        run.dirty = False
        node = self._store.peek(NODES, run.node)
        status = run.render_status(
            t=t,
            host_ip=_internal_ip(node) if node is not None else "",
            timestamp=self._timestamp,
        )
        if status == run.snapshot.get("status"):
            return
        try:
            self._store.update_status({**run.snapshot, "status": status})
        except ApiError as exc:
            log.warning(
                "could not write pod status", extra={"fields": {"pod": run.ref, "error": str(exc)}}
            )


def _internal_ip(node: Mapping[str, Any]) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address") or "")
    return ""
