"""What happened in the simulated cluster: the events its actors emit, marked on a run's time
axis by the report (:mod:`kubescale.sim.scenario.timeline`).

Kinds the actors emit (kubelet: pod-started, oom-kill, evicted, pod-deleted; node groups:
node-added, node-removed). Other kinds (kubescale's loops, scenario events) are kept and shown
as they come.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "EVICTED",
    "NODE_ADDED",
    "NODE_REMOVED",
    "OOM_KILL",
    "POD_DELETED",
    "POD_STARTED",
    "TimelineEvent",
]

POD_STARTED: Final = "pod-started"
OOM_KILL: Final = "oom-kill"
EVICTED: Final = "evicted"
POD_DELETED: Final = "pod-deleted"
NODE_ADDED: Final = "node-added"
NODE_REMOVED: Final = "node-removed"


@dataclass(frozen=True)
class TimelineEvent:
    """Something that happened in the simulated cluster, marked on the report's time axis."""

    time: float
    """Seconds since the start of the run."""
    kind: str
    subject: str
    """``namespace/name`` of a pod, or the name of a node or node group."""
    detail: str
