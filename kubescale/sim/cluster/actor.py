"""The Actor protocol: one part of the simulated cluster that acts once per simulation step.

Actors are the *cluster* (what kube-controller-manager, kube-scheduler, the kubelets and the
cloud's machine controllers would do), not kubescale. The scenario runner calls every actor's
:meth:`Actor.step` once per step, in a fixed order — node groups → workload controllers →
scheduler → kubelet — with the VirtualClock's current time, so that within one step a new node
exists before the scheduler looks for room and a pod bound this step can be started by the
kubelet in the same step.

Contract for implementers:

* ``now`` is the only source of time (seconds since start = ``(now - start).total_seconds()``);
  nothing reads the wall clock or sleeps.
* Actors act in-process on ``ApiServer.store`` and must be cheap per step: touch only what
  changed, never rewrite an unchanged object (each write bumps resourceVersion and wakes watchers).
* Any randomness comes from a ``random.Random`` derived from the scenario seed, and anything
  whose order can matter is iterated sorted (namespace, name), so a fixed seed reproduces a run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Actor(Protocol):
    """Something in the simulated cluster that does its work once per simulation step."""

    async def step(self, now: datetime) -> None:
        """Do this step's work as of ``now`` (the VirtualClock's time for the step)."""
        ...
