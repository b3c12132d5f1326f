"""The simulated container runtime: one container's runs, kills, restarts and reported status.

What the kubelet and its runtime would keep per container, and the ``containerStatuses`` entry
it renders:

* a run starts at some ``t`` (``state.running.startedAt``); usage models are given the seconds
  since that start;
* an exit (an OOM kill, exit code 137 reason ``OOMKilled``, or a Job container's exit 0 reason
  ``Completed``) moves the run into ``lastState.terminated`` and, under restart policy
  ``Always`` (or ``OnFailure`` after a failure), counts a restart;
* restarts are paced as the kubelet's ``doBackOff`` does with its ``flowcontrol.Backoff``
  (initial 10 s, doubling, at most 300 s): an exit while no back-off entry is live restarts at
  once and arms the entry at 10 s; an exit while one is live waits out the entry's delay in
  ``waiting: CrashLoopBackOff`` (``back-off 20s restarting failed container=...``), then
  restarts and doubles it. An entry expires when the exit comes more than 600 s (twice the
  maximum) after its last update, so a container that ran ten minutes starts over at 10 s.
  The waits after consecutive quick exits are therefore 0, 10, 20, 40, 80, 160, 300, 300 ... s.

Times are seconds since the simulation started; :func:`timestamp` turns them into RFC 3339.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubescale.objects.quantities import Quantity, QuantityError

__all__ = [
    "BACKOFF_INITIAL",
    "BACKOFF_MAX",
    "ContainerRun",
    "ResourceView",
]

BACKOFF_INITIAL: Final = 10.0
BACKOFF_MAX: Final = 300.0
OOM_EXIT_CODE: Final = 137


def _cores(value: object) -> float | None:
    """A quantity as a float of its unit (cores, bytes); ``None`` if unparsable."""
    try:
        return Quantity.from_json(value).as_float()
    except QuantityError:
        return None


@dataclass(frozen=True)
class ResourceView:
    """A container's ``resources`` (requests/limits) and the same values as floats."""

    resources: Mapping[str, Any]
    """``{"requests": {...}, "limits": {...}}`` with only the keys present."""
    cpu_request: float | None
    cpu_limit: float | None
    memory_request: float | None
    memory_limit: float | None

    @classmethod
    def of(cls, resources: Mapping[str, Any] | None) -> ResourceView:
        resources = resources or {}
        requests = dict(resources.get("requests") or {})
        limits = dict(resources.get("limits") or {})
        kept: dict[str, Any] = {}
        if requests:
            kept["requests"] = requests
        if limits:
            kept["limits"] = limits
        return cls(
            resources=kept,
            cpu_request=_cores(requests["cpu"]) if "cpu" in requests else None,
            cpu_limit=_cores(limits["cpu"]) if "cpu" in limits else None,
            memory_request=_cores(requests["memory"]) if "memory" in requests else None,
            memory_limit=_cores(limits["memory"]) if "memory" in limits else None,
        )

    def same_as(self, resources: Mapping[str, Any] | None) -> bool:
        """Whether ``resources`` (a spec's) asks for exactly what this view holds."""
        return self.resources == ResourceView.of(resources).resources


@dataclass
class ContainerRun:
    """One container of a started pod, across its restarts."""

    name: str
    image: str
    applied: ResourceView
    """The resources the container runs with (the kubelet's ``status.resources``)."""
    restart_policy: str
    sidecar: bool = False
    """An init container with ``restartPolicy: Always`` (reported in initContainerStatuses)."""
    pod_uid: str = ""
    started_at: float | None = None
    """``t`` of the current run; ``None`` while not running."""
    restart_count: int = 0
    restart_at: float | None = None
    """When a container in CrashLoopBackOff runs again."""
    backoff: float = 0.0
    backoff_updated: float | None = None
    waiting_message: str = ""
    last_terminated: dict[str, Any] | None = None
    terminated: dict[str, Any] | None = None
    """The current state when the container exited for good (restart policy said no)."""
    throttled_core_seconds: float = 0.0
    excess_cpu: float = 0.0
    """Demand above the CPU limit at the previous sample (cores)."""

    @property
    def running(self) -> bool:
        return self.started_at is not None

    def start(self, t: float) -> None:
        self.started_at = t
        self.restart_at = None
        self.waiting_message = ""

    def exit(
        self,
        *,
        t: float,
        exit_code: int,
        reason: str,
        timestamp: Callable[[float], str],
        pod_ref: str,
    ) -> bool:
        """The running container exits at ``t``; whether it will run again."""
        record = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": timestamp(self.started_at if self.started_at is not None else t),
            "finishedAt": timestamp(t),
            "containerID": self.container_id(),
        }
        self.started_at = None
        self.excess_cpu = 0.0
        failed = exit_code != 0
        restarts = self.restart_policy == "Always" or (
            self.restart_policy == "OnFailure" and failed
        )
        if not restarts:
            self.terminated = record
            return False
        self.last_terminated = record
        self.restart_count += 1
        if self._in_backoff(t):
            # IsInBackOffSince: wait out the live entry, then Next() doubles it
            self.restart_at = t + self.backoff
            self.waiting_message = (
                f"back-off {_go_seconds(self.backoff)} restarting failed "
                f"container={self.name} pod={pod_ref}"
            )
        else:
            self._next_backoff(t)
            self.start(t)
        return True

    def _in_backoff(self, finished: float) -> bool:
        if self.backoff_updated is None:
            return False
        return finished - self.backoff_updated <= 2 * BACKOFF_MAX

    def _next_backoff(self, finished: float) -> None:
        """``Backoff.Next``: start at the initial delay (no or expired entry), else double."""
        if self.backoff_updated is None or finished - self.backoff_updated > 2 * BACKOFF_MAX:
            self.backoff = BACKOFF_INITIAL
        else:
            self.backoff = min(self.backoff * 2, BACKOFF_MAX)
        self.backoff_updated = finished

    def restart_due(self, t: float) -> bool:
        """Leave CrashLoopBackOff if its delay has passed (then Next() moves the entry on)."""
        if self.restart_at is None or t < self.restart_at:
            return False
        finished = self.restart_at - self.backoff
        self._next_backoff(finished)
        self.start(t)
        return True

    def container_id(self) -> str:
        return f"sim://{self.pod_uid[:8]}-{self.name}-{self.restart_count}"

    def status(self, *, timestamp: Callable[[float], str], ready: bool) -> dict[str, Any]:
        """This container's ``containerStatuses`` entry."""
        if self.started_at is not None:
            state: dict[str, Any] = {"running": {"startedAt": timestamp(self.started_at)}}
        elif self.terminated is not None:
            state = {"terminated": dict(self.terminated)}
        else:
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": self.waiting_message}}
        entry: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": f"sim://{self.image}",
            "containerID": self.container_id(),
            "ready": ready and self.running,
            "started": self.running,
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": dict(self.last_terminated)} if self.last_terminated else {},
            "resources": {k: dict(v) for k, v in self.applied.resources.items()},
        }
        requests = self.applied.resources.get("requests")
        if requests:
            entry["allocatedResources"] = dict(requests)
        return entry


def _go_seconds(seconds: float) -> str:
    """A back-off as Go prints a Duration of whole seconds: ``10s``, ``2m40s``, ``5m0s``."""
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
