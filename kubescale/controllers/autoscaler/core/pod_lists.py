"""Which pods the loop works with, and which of them need a new node (reference §1 steps 5-19).

* :func:`pods_by_schedulability` (``listPods``): pods bound to a node (``scheduled``), pods the
  scheduler marked ``PodScheduled=False`` with reason ``Unschedulable`` (``unschedulable``);
  finished pods and pods being deleted are left out;
* :func:`drop_expendable` (``FilterOutExpendablePods``): pods below
  ``--expendable-pods-priority-cutoff`` neither go in the snapshot nor trigger a scale-up;
* :func:`filter_out_schedulable` (``FilterOutSchedulable``): pending pods sorted by priority
  (highest first, stable) are placed in the snapshot (existing and upcoming nodes); those that
  fit are dropped from the list **and stay in the snapshot**;
* :func:`drop_young_pods` (``filterOutYoungPods``): a pod waits ``--new-pod-scale-up-delay``
  (or the longer ``pod-scale-up-delay`` annotation) before it counts — kept once its age is
  strictly above the delay;
* :func:`all_pods_are_new` (``shouldScaleUp``): when the oldest pending pod is less than 2 s
  old (30 s for GPU pods), the loop skips scale-up and scale-down, more pods are probably
  coming.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from kubescale.controllers.autoscaler.model.pod_facts import (
    PriorityResolver,
    creation_time,
    is_daemonset_pod,
    is_terminal,
    pod_scale_up_delay,
)
from kubescale.controllers.autoscaler.simulator.scheduling_simulation import SchedulingSimulator
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "GPU_POD_TIME_BUFFER",
    "NEITHER",
    "POD_TIME_BUFFER",
    "SCHEDULED",
    "UNSCHEDULABLE",
    "PodsBySchedulability",
    "all_pods_are_new",
    "drop_expendable",
    "drop_young_pods",
    "filter_out_schedulable",
    "pods_by_schedulability",
    "schedulability",
]

POD_TIME_BUFFER: Final = timedelta(seconds=2)
GPU_POD_TIME_BUFFER: Final = timedelta(seconds=30)
_GPU_RESOURCES: Final = ("nvidia.com/gpu", "amd.com/gpu")


@dataclass
class PodsBySchedulability:
    scheduled: list[Pod] = field(default_factory=list)
    unschedulable: list[Pod] = field(default_factory=list)


def _unschedulable(pod: Pod) -> bool:
    for condition in status_of(pod).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return bool(
                condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
            )
    return False


SCHEDULED: Final = 1
"""Bound to a node (``spec.nodeName``), not finished."""
UNSCHEDULABLE: Final = 2
"""Not bound, not being deleted, ``PodScheduled=False`` with reason ``Unschedulable``."""
NEITHER: Final = 0
"""Finished, or neither of the above: in no list."""


def schedulability(pod: Pod) -> int:
    """The list :func:`pods_by_schedulability` puts ``pod`` in (:data:`SCHEDULED`,
    :data:`UNSCHEDULABLE` or :data:`NEITHER`)."""
    if is_terminal(pod):
        return NEITHER
    if spec_of(pod).get("nodeName"):
        return SCHEDULED
    if not Meta(pod).raw.get("deletionTimestamp") and _unschedulable(pod):
        return UNSCHEDULABLE
    return NEITHER


def pods_by_schedulability(pods: Iterable[Pod]) -> PodsBySchedulability:
    result = PodsBySchedulability()
    for pod in pods:
        kind = schedulability(pod)
        if kind == SCHEDULED:
            result.scheduled.append(pod)
        elif kind == UNSCHEDULABLE:
            result.unschedulable.append(pod)
    return result


def drop_expendable(pods: Iterable[Pod], *, cutoff: int, priority: PriorityResolver) -> list[Pod]:
    return [p for p in pods if priority.priority(p) >= cutoff]


def filter_out_schedulable(
    pods: Sequence[Pod], *, simulator: SchedulingSimulator, priority: PriorityResolver
) -> tuple[list[Pod], list[Pod]]:
    """(pods that still need room, pods placed in the snapshot); DaemonSet pods are dropped
    (``FilterOutDaemonSetPods``: a new node gets its own)."""
    ordered = sorted(
        (p for p in pods if not is_daemonset_pod(p)), key=lambda p: -priority.priority(p)
    )
    result = simulator.try_schedule_pods(ordered)
    return list(result.unschedulable), [placement.pod for placement in result.scheduled]


def drop_young_pods(pods: Iterable[Pod], *, now: datetime, delay: timedelta) -> list[Pod]:
    return [p for p in pods if now - creation_time(p) > pod_scale_up_delay(p, delay)]


def _requests_gpu(pod: Pod) -> bool:
    for container in spec_of(pod).get("containers") or ():
        resources = container.get("resources") or {}
        for section in (resources.get("requests"), resources.get("limits")):
            if any(name in (section or {}) for name in _GPU_RESOURCES):
                return True
    return False


def all_pods_are_new(pods: Sequence[Pod], *, now: datetime) -> bool:
    if not pods:
        return False
    if min(creation_time(p) for p in pods) + POD_TIME_BUFFER > now:
        return True
    gpu = [creation_time(p) for p in pods if _requests_gpu(p)]
    return bool(gpu) and min(gpu) + GPU_POD_TIME_BUFFER > now
