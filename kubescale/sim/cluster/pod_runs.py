"""The kubelet's record of one pod bound to a node, and the status it reports for it.

A :class:`PodRun` is made when the kubelet first sees a pod on an existing node: its workload
(``WORKLOAD_LABEL``), pod index (``POD_INDEX_ANNOTATION``), a Job pod's run time
(``RUN_SECONDS_ANNOTATION``) and one :class:`~.container_runtime.ContainerRun` per sidecar and
regular container. It tracks the pod's life (started, stopping, finished, gone), the pending
in-place resize, and whether its status must be written (``dirty``).
:meth:`PodRun.render_status` builds the status the kubelet would post (see :mod:`.pod_status`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .container_runtime import ContainerRun, ResourceView
from .pod_status import judge_resize, merge_conditions, pod_phase
from .usage_models import POD_INDEX_ANNOTATION, RUN_SECONDS_ANNOTATION, WORKLOAD_LABEL

__all__ = ["TERMINAL_PHASES", "PodRun"]

TERMINAL_PHASES: Final = ("Succeeded", "Failed")

Timestamp = Callable[[float], str]


def _container_runs(pod: Mapping[str, Any], uid: str) -> list[ContainerRun]:
    """Sidecars (init containers with ``restartPolicy: Always``) first, then the containers."""
    spec = pod.get("spec") or {}
    policy = str(spec.get("restartPolicy") or "Always")
    runs: list[ContainerRun] = []
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    for container in [*sidecars, *(spec.get("containers") or [])]:
        sidecar = container in sidecars
        run = ContainerRun(
            name=str(container["name"]),
            image=str(container.get("image") or ""),
            applied=ResourceView.of(container.get("resources")),
            restart_policy="Always" if sidecar else policy,
            sidecar=sidecar,
            pod_uid=uid,
        )
        runs.append(run)
    return runs


def _annotation_number(annotations: Mapping[str, str], key: str) -> float | None:
    try:
        return float(annotations[key])
    except (KeyError, ValueError):
        return None


@dataclass
class PodRun:
    """What the kubelet keeps for one pod bound to a node."""

    namespace: str
    name: str
    uid: str
    node: str
    workload: str
    pod_index: int
    restart_policy: str
    seen_at: float
    containers: list[ContainerRun]
    snapshot: Mapping[str, Any]
    """The stored pod as of this step (shared: never mutated)."""
    run_seconds: float | None
    started_at: float | None = None
    ip: str = ""
    stopping: bool = False
    finished: bool = False
    gone: bool = False
    delete_requested: bool = False
    dirty: bool = False
    resize: tuple[str, str] | None = None
    """The PodResizePending (reason, message), if a resize waits."""
    resize_checked: Mapping[str, Any] | None = None
    metrics_published: bool = False
    init_statuses: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of_pod(cls, pod: Mapping[str, Any], *, node: str, t: float) -> PodRun:
        meta = pod["metadata"]
        annotations = meta.get("annotations") or {}
        index = _annotation_number(annotations, POD_INDEX_ANNOTATION)
        uid = str(meta.get("uid", ""))
        return cls(
            namespace=str(meta["namespace"]),
            name=str(meta["name"]),
            uid=uid,
            node=node,
            workload=str((meta.get("labels") or {}).get(WORKLOAD_LABEL, "")),
            pod_index=int(index) if index is not None else 0,
            restart_policy=str((pod.get("spec") or {}).get("restartPolicy") or "Always"),
            seen_at=t,
            containers=_container_runs(pod, uid),
            snapshot=pod,
            run_seconds=_annotation_number(annotations, RUN_SECONDS_ANNOTATION),
        )

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pod_ref(self) -> str:
        """The kubelet's ``format.Pod``: ``name_namespace(uid)``."""
        return f"{self.name}_{self.namespace}({self.uid})"

    @property
    def active(self) -> bool:
        """Started and neither finished nor being deleted (counts as a running replica)."""
        return self.started_at is not None and not (self.stopping or self.finished or self.gone)

    def evicted(self) -> bool:
        """The pod carries the eviction API's ``DisruptionTarget`` condition."""
        for condition in (self.snapshot.get("status") or {}).get("conditions") or []:
            if (
                condition.get("type") == "DisruptionTarget"
                and condition.get("status") == "True"
                and condition.get("reason") == "EvictionByEvictionAPI"
            ):
                return True
        return False

    # ------------------------------------------------------------------------ lifecycle

    def start(self, *, t: float, ip: str, timestamp: Timestamp) -> None:
        """The sandbox is up: init containers ran to completion, the rest run from ``t``."""
        self.started_at = t
        self.ip = ip
        for container in self.containers:
            container.start(t)
        spec = self.snapshot.get("spec") or {}
        self.init_statuses = [
            {
                "name": str(c["name"]),
                "image": str(c.get("image") or ""),
                "imageID": f"sim://{c.get('image') or ''}",
                "containerID": f"sim://{self.uid[:8]}-{c['name']}-0",
                "ready": True,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": timestamp(t),
                        "finishedAt": timestamp(t),
                    }
                },
                "lastState": {},
            }
            for c in spec.get("initContainers") or []
            if c.get("restartPolicy") != "Always"
        ]
        self.dirty = True

    def settle_phase(self, timestamp: Timestamp) -> None:
        """Mark the pod finished when its containers' states make the phase terminal."""
        states = [c.status(timestamp=timestamp, ready=True)["state"] for c in self.regular()]
        if pod_phase(states, restart_policy=self.restart_policy) in TERMINAL_PHASES:
            self.finished = True

    def regular(self) -> list[ContainerRun]:
        return [c for c in self.containers if not c.sidecar]

    def check_resize(
        self, *, node: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
    ) -> None:
        """Apply a resize the node has room for, else record why it waits."""
        pod = self.snapshot
        self.resize_checked = pod
        spec = pod.get("spec") or {}
        wanted = {
            str(c["name"]): c.get("resources")
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        }
        changed = [c for c in self.containers if not c.applied.same_as(wanted.get(c.name))]
        if not changed or node is None:
            if self.resize is not None:
                self.resize = None
                self.dirty = True
            return
        others = [
            p
            for p in pods
            if (p.get("spec") or {}).get("nodeName") == self.node
            and p is not pod
            and (p.get("status") or {}).get("phase") not in TERMINAL_PHASES
        ]
        verdict = judge_resize(pod=pod, node=node, others=others)
        if verdict.reason is None:
            for container in changed:
                container.applied = ResourceView.of(wanted.get(container.name))
            self.resize = None
            self.dirty = True
            return
        pending = (verdict.reason, verdict.message)
        if self.resize != pending:
            self.resize = pending
            self.dirty = True

    # --------------------------------------------------------------------------- status

    def render_status(self, *, t: float, host_ip: str, timestamp: Timestamp) -> dict[str, Any]:
        """The status the kubelet posts for this pod now (other writers' fields kept)."""
        current = self.snapshot.get("status") or {}
        sidecars = [c for c in self.containers if c.sidecar]
        ready = not self.stopping and all(c.running for c in self.containers)
        states = [c.status(timestamp=timestamp, ready=ready) for c in self.regular()]
        phase = pod_phase([s["state"] for s in states], restart_policy=self.restart_policy)
        flag = "True" if ready and phase == "Running" else "False"
        owned: dict[str, dict[str, Any]] = {
            "PodReadyToStartContainers": {"status": "True" if phase == "Running" else "False"},
            "Initialized": {"status": "True"},
            "ContainersReady": {"status": flag},
            "Ready": {"status": flag},
        }
        if self.resize is not None:
            owned["PodResizePending"] = {
                "status": "True",
                "reason": self.resize[0],
                "message": self.resize[1],
            }
        status: dict[str, Any] = {
            **current,
            "phase": phase,
            "conditions": merge_conditions(
                current.get("conditions") or [], owned, now=timestamp(t)
            ),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}] if host_ip else [],
            "podIP": self.ip,
            "podIPs": [{"ip": self.ip}],
            "startTime": timestamp(self.started_at if self.started_at is not None else t),
            "containerStatuses": sorted(states, key=lambda s: str(s["name"])),
        }
        init = self.init_statuses + [c.status(timestamp=timestamp, ready=ready) for c in sidecars]
        if init:
            status["initContainerStatuses"] = init
        return status
