"""Node utilization for scale-down (``pkg/simulator/utilization/info.go``).

``utilization = max(cpu, memory)`` with, per resource, ``Σ pod requests / allocatable``; pod
requests as kube-scheduler computes them (init containers, sidecars, overhead). With
``--ignore-daemonsets-utilization`` (per group) DaemonSet pods, and with
``--ignore-mirror-pods-utilization`` mirror pods, are taken out of both the requests and the
allocatable; pods terminating for longer than their grace period + 30 s do not count
(``IsPodLongTerminating``). A node without cpu or memory allocatable has no utilization (an
error upstream: the node is ``UnexpectedError``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kubescale.base.go_strings import go_float
from kubescale.controllers.autoscaler.model.pod_facts import (
    is_daemonset_pod,
    is_mirror_pod,
    parse_time,
)
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.pod_resources import Amounts, pod_requests

__all__ = [
    "LONG_TERMINATING_EXTRA",
    "Utilization",
    "go_utilization",
    "is_long_terminating",
    "node_utilization",
]

LONG_TERMINATING_EXTRA: Final = timedelta(seconds=30)


@dataclass(frozen=True)
class Utilization:
    cpu: float
    memory: float

    @property
    def value(self) -> float:
        return max(self.cpu, self.memory)

    @property
    def resource(self) -> str:
        return "cpu" if self.cpu > self.memory else "memory"


def go_utilization(used: Utilization | None) -> str:
    """``%v`` of upstream's ``utilization.Info{CpuUtil, MemUtil, GpuUtil, DynamicResourceUtil,
    ResourceName, Utilization}`` as the scale-down events print it: ``{0.25 0.1 0 0 cpu 0.25}``
    (``ResourceName`` is cpu when cpu > memory, else memory); the zero value
    ``{0 0 0 0  0}`` when there is none."""
    if used is None:
        return "{0 0 0 0  0}"
    return (
        f"{{{go_float(used.cpu)} {go_float(used.memory)} 0 0 {used.resource} "
        f"{go_float(used.value)}}}"
    )


def is_long_terminating(pod: Pod, now: datetime) -> bool:
    """Being deleted for longer than its grace period plus 30 s."""
    meta = Meta(pod).raw
    deleted = parse_time(meta.get("deletionTimestamp"))
    if deleted is None:
        return False
    grace = meta.get("deletionGracePeriodSeconds")
    if not isinstance(grace, int):
        grace = spec_of(pod).get("terminationGracePeriodSeconds")
    grace_period = timedelta(seconds=grace if isinstance(grace, int) else 30)
    return deleted + grace_period + LONG_TERMINATING_EXTRA < now


def node_utilization(
    *,
    allocatable: Amounts,
    pods: Iterable[Pod],
    now: datetime,
    skip_daemon_sets: bool = False,
    skip_mirror_pods: bool = False,
) -> Utilization | None:
    """The module docstring's utilization; ``None`` when cpu or memory allocatable is 0."""
    if allocatable.get("cpu", 0) <= 0 or allocatable.get("memory", 0) <= 0:
        return None
    used = {"cpu": 0, "memory": 0}
    excluded = {"cpu": 0, "memory": 0}
    for pod in pods:
        requests = pod_requests(pod)
        if (skip_daemon_sets and is_daemonset_pod(pod)) or (
            skip_mirror_pods and is_mirror_pod(pod)
        ):
            for name in used:
                excluded[name] += requests.get(name, 0)
            continue
        if is_long_terminating(pod, now):
            continue
        for name in used:
            used[name] += requests.get(name, 0)
    shares = {}
    for name, amount in used.items():
        available = allocatable[name] - excluded[name]
        shares[name] = amount / available if available > 0 else 0.0
    return Utilization(cpu=shares["cpu"], memory=shares["memory"])
