"""OOM kills the recommender learns from: pod status transitions and ``Evicted`` events.

Upstream ``pkg/recommender/input/oom/observer.go``, on raw API dicts:

* **Pod updates** (``OnUpdate(old, new)`` of the pod informer): for each container status of the
  new pod that the old pod also had,

  - *new OOM*: the container is now ``state.terminated`` with reason ``OOMKilled`` and either
    was not terminated before or its ``restartCount`` went up (a container that fails fast may
    go Terminated → Terminated). The OOM happened with the new pod's resources;
  - *previous OOM*: it was running and is running again with a higher ``restartCount`` and a
    ``lastState.terminated`` of reason ``OOMKilled`` (the kubelet skipped reporting the
    terminated state). Both states must be *running*, so a Waiting → Running after
    CrashLoopBackOff is not counted twice. The OOM happened with the old pod's resources.

  The OOM's memory is the container's memory **request** then (``ContainerRequestsAndLimits``:
  the status' applied resources before the spec's, ``Quantity.Value()`` rounding up), its time
  the terminated state's ``finishedAt``.
* **Events** with reason ``Evicted`` about a Pod (the kubelet's eviction under node memory
  pressure): the annotations ``offending_containers``, ``offending_containers_usage`` and
  ``starved_resource`` are comma-separated lists of equal length (else the event is ignored);
  every entry whose starved resource is ``memory`` is an OOM of that container with the usage as
  memory, at the event's ``creationTimestamp``.

:class:`OomObserver` queues what it sees, in arrival order, for the next iteration's
``LoadRealTimeMetrics`` to drain (upstream's buffered channel of 5000; a full channel blocks the
informer upstream — here the newest OOM is dropped and counted instead). Native sidecars (init
containers with ``restartPolicy: Always``, behind upstream's ``NativeSidecar`` gate) are not
observed: the model tracks app containers only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, cast

from kubescale.base.logs import component_logger
from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.current_resources import MEMORY, container_requests_and_limits
from kubescale.objects.event import Event
from kubescale.objects.pod import ContainerStateTerminated, ContainerStatus, Pod
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, mapping, status_of

__all__ = [
    "OOM_BUFFER",
    "OomInfo",
    "OomObserver",
    "ooms_from_eviction_event",
    "ooms_from_pod_update",
]

log = component_logger("vpa-recommender")

OOM_BUFFER: Final = 5000
"""Upstream's ``make(chan OomInfo, 5000)``."""
OOM_KILLED: Final = "OOMKilled"
EVICTED: Final = "Evicted"


@dataclass(frozen=True)
class OomInfo:
    """One OOM: which container, when, and the memory it had (a ResourceAmount, bytes)."""

    namespace: str
    pod: str
    container: str
    timestamp: datetime
    memory: int


def _statuses(pod: Pod) -> list[ContainerStatus]:
    statuses: object = status_of(pod).get("containerStatuses")  # cached JSON, not validated
    if not isinstance(statuses, list):
        return []
    return [cast(ContainerStatus, status) for status in statuses if isinstance(status, Mapping)]


def _find(name: object, statuses: list[ContainerStatus]) -> ContainerStatus | None:
    for status in statuses:
        if status.get("name") == name:
            return status
    return None


def _restart_count(status: ContainerStatus) -> int:
    count: object = status.get("restartCount")
    return count if isinstance(count, int) else 0


def _terminated(
    status: ContainerStatus, field: Literal["state", "lastState"]
) -> ContainerStateTerminated | None:
    """``status.<field>.terminated``, ``None`` when unset."""
    value: object = mapping(status.get(field)).get("terminated")
    return cast(ContainerStateTerminated, value) if isinstance(value, Mapping) else None


def _running(status: ContainerStatus) -> bool:
    """``status.state.running`` is set."""
    return isinstance(mapping(status.get("state")).get("running"), Mapping)


def _memory_request(pod: Pod, container: str) -> int:
    """The container's memory request as ``Quantity.Value()``; 0 without one."""
    try:
        requests, _ = container_requests_and_limits(pod, container)
    except QuantityError:
        return 0
    if not requests or MEMORY not in requests:
        return 0
    return requests[MEMORY].value()


def ooms_from_pod_update(old: Pod, new: Pod) -> list[OomInfo]:
    """``observer.OnUpdate``: the OOMs a pod update reveals (see the module docstring)."""
    metadata = Meta(new).raw
    namespace = str(metadata.get("namespace") or "")
    pod_name = str(metadata.get("name") or "")
    old_statuses = _statuses(old)
    found: list[OomInfo] = []
    for status in _statuses(new):
        name = status.get("name")
        old_status = _find(name, old_statuses)
        if old_status is None or not isinstance(name, str):
            continue
        restarted = _restart_count(status) > _restart_count(old_status)
        terminated = _terminated(status, "state")
        is_new_oom = (
            terminated is not None
            and terminated.get("reason") == OOM_KILLED
            and (_terminated(old_status, "state") is None or restarted)
        )
        last_terminated = _terminated(status, "lastState")
        is_previous_oom = (
            _running(status)
            and _running(old_status)
            and restarted
            and last_terminated is not None
            and last_terminated.get("reason") == OOM_KILLED
        )
        if is_new_oom and terminated is not None:
            oom_state, oom_pod = terminated, new
        elif is_previous_oom and last_terminated is not None:
            oom_state, oom_pod = last_terminated, old
        else:
            continue
        finished = parse_time(oom_state.get("finishedAt"))
        if finished is None:
            # Go's zero time: an OOM that old is always discarded by the model.
            finished = datetime(1, 1, 1, tzinfo=UTC)
        found.append(
            OomInfo(
                namespace=namespace,
                pod=pod_name,
                container=name,
                timestamp=finished,
                memory=_memory_request(oom_pod, name),
            )
        )
    return found


def _split(annotations: Mapping[str, object], key: str) -> list[str]:
    """``extractArray``: an absent annotation is an empty list, a present one split on ``,``."""
    value = annotations.get(key)
    if not isinstance(value, str):
        return []
    return value.split(",")


def ooms_from_eviction_event(event: Event) -> list[OomInfo]:
    """``parseEvictionEvent``: the memory OOMs an ``Evicted`` Event of a Pod carries."""
    involved = mapping(event.get("involvedObject"))
    if event.get("reason") != EVICTED or involved.get("kind") != "Pod":
        return []
    metadata = Meta(event).raw
    annotations = mapping(metadata.get("annotations"))
    containers = _split(annotations, "offending_containers")
    usages = _split(annotations, "offending_containers_usage")
    starved = _split(annotations, "starved_resource")
    if len(containers) != len(usages) or len(containers) != len(starved):
        return []
    created = parse_time(metadata.get("creationTimestamp")) or datetime(1, 1, 1, tzinfo=UTC)
    found: list[OomInfo] = []
    for container, usage, resource in zip(containers, usages, starved, strict=True):
        if resource != MEMORY:
            continue
        try:
            memory = Quantity.parse(usage).value()
        except QuantityError:
            log.warning(
                "cannot parse resource quantity in eviction", extra={"fields": {"usage": usage}}
            )
            continue
        found.append(
            OomInfo(
                namespace=str(involved.get("namespace") or ""),
                pod=str(involved.get("name") or ""),
                container=container,
                timestamp=created,
                memory=memory,
            )
        )
    return found


class OomObserver:
    """Collects OOMs from informer callbacks until the loop drains them."""

    def __init__(self, *, capacity: int = OOM_BUFFER) -> None:
        self.capacity = capacity
        self._queue: deque[OomInfo] = deque()
        self.dropped = 0
        """OOMs lost because the buffer was full."""

    def __len__(self) -> int:
        return len(self._queue)

    def _put(self, ooms: list[OomInfo]) -> None:
        for oom in ooms:
            if len(self._queue) >= self.capacity:
                self.dropped += 1
                log.warning(
                    "OOM buffer full; dropping an OOM",
                    extra={
                        "fields": {"pod": f"{oom.namespace}/{oom.pod}", "container": oom.container}
                    },
                )
                continue
            self._queue.append(oom)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        """The pod informer's ``on_update``."""
        self._put(ooms_from_pod_update(old, new))

    def on_event(self, event: Event) -> None:
        """The ``reason=Evicted`` Event informer's ``on_add`` (upstream handles ADDED only)."""
        self._put(ooms_from_eviction_event(event))

    def drain(self) -> list[OomInfo]:
        """Every OOM queued so far, oldest first; the queue is then empty."""
        drained = list(self._queue)
        self._queue.clear()
        return drained
