"""The kubelet's side of a pod's status: the conditions it owns, and in-place resize decisions.

``status`` of a started pod is rebuilt from the simulated runtime (:mod:`.container_runtime`)
the way ``generateAPIPodStatus`` does: phase (``getPhase``: Running while any container runs or
will restart; Succeeded when all exited 0; Failed when all exited and one failed), the
kubelet-owned conditions (PodReadyToStartContainers, Initialized, ContainersReady, Ready and the
resize condition), IPs, start time and the container statuses sorted by name. Conditions other
writers own (PodScheduled, DisruptionTarget) are kept. A condition's ``lastTransitionTime``
moves only when its status changes.

In-place resize (``canResizePod``, Kubernetes 1.33): when a container's spec resources differ
from what it runs with, the resize is

* ``Infeasible`` if the pod's new requests exceed the node's allocatable —
  ``Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000`` (memory is named
  first when both are short);
* ``Deferred`` if they fit the node but not next to the other pods on it (the admission check
  a new pod would get) — ``Node didn't have enough resource: cpu, requested: 2000, used: 3500,
  capacity: 4000``;
* otherwise applied: the container's status resources follow the spec.

CPU amounts in these messages are millicores, memory bytes, as upstream prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.scheduling.pod_resources import Amounts, add_into, node_allocatable, pod_requests

__all__ = [
    "KUBELET_CONDITIONS",
    "ResizeVerdict",
    "judge_resize",
    "merge_conditions",
    "pod_phase",
]

KUBELET_CONDITIONS: Final = (
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "PodResizePending",
)


@dataclass(frozen=True)
class ResizeVerdict:
    """``None`` reason: apply the resize; else the PodResizePending reason and message."""

    reason: str | None
    message: str = ""


def judge_resize(
    *,
    pod: Mapping[str, Any],
    node: Mapping[str, Any],
    others: Iterable[Mapping[str, Any]],
) -> ResizeVerdict:
    """Whether the node can give the pod its resized requests (see the module docstring)."""
    # The simulated kubelet holds the store's untyped JSON; the shared pod_resources reads it
    # as the typed objects it is (a TypedDict is the same dict at run time, nothing copied).
    typed_pod, typed_node, typed_others = cast(
        tuple[Pod, Node, list[Pod]], (pod, node, list(others))
    )
    wanted = pod_requests(typed_pod, use_status=False)
    capacity = node_allocatable(typed_node)
    cpu, memory = wanted.get("cpu", 0), wanted.get("memory", 0)
    cpu_cap, memory_cap = capacity.get("cpu", 0), capacity.get("memory", 0)
    if memory > memory_cap:
        return ResizeVerdict(
            "Infeasible",
            f"Node didn't have enough capacity: memory, requested: {memory}, "
            f"capacity: {memory_cap}",
        )
    if cpu > cpu_cap:
        return ResizeVerdict(
            "Infeasible",
            f"Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {cpu_cap}",
        )
    used: Amounts = {}
    for other in typed_others:
        add_into(used, pod_requests(other))
    for resource in ("cpu", "memory"):
        requested = wanted.get(resource, 0)
        if requested and requested + used.get(resource, 0) > capacity.get(resource, 0):
            return ResizeVerdict(
                "Deferred",
                f"Node didn't have enough resource: {resource}, requested: {requested}, "
                f"used: {used.get(resource, 0)}, capacity: {capacity.get(resource, 0)}",
            )
    return ResizeVerdict(None)


def pod_phase(states: Sequence[Mapping[str, Any]], *, restart_policy: str) -> str:
    """``getPhase`` over the regular containers' states of a started pod.

    A container waiting to restart (CrashLoopBackOff, with a last termination) counts as
    stopped, not succeeded; stopped containers leave the pod Running under ``Always`` and
    ``OnFailure`` (they restart), Succeeded when all exited 0, else Failed (``Never``).
    """
    running = stopped = succeeded = 0
    for state in states:
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"].get("exitCode") == 0
        else:
            stopped += 1
    if running or not stopped:
        return "Running"
    if restart_policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    return "Failed" if restart_policy == "Never" else "Running"


def merge_conditions(
    existing: Sequence[Mapping[str, Any]],
    owned: Mapping[str, Mapping[str, Any]],
    *,
    now: str,
) -> list[dict[str, Any]]:
    """The kubelet's conditions (``owned``, by type; absent types are removed) merged into the
    pod's, keeping other writers' conditions and unchanged transition times."""
    previous = {c.get("type"): c for c in existing}
    merged: list[dict[str, Any]] = [
        dict(c) for c in existing if c.get("type") not in KUBELET_CONDITIONS
    ]
    for kind in KUBELET_CONDITIONS:
        wanted = owned.get(kind)
        if wanted is None:
            continue
        old = previous.get(kind)
        moved = old is None or old.get("status") != wanted.get("status")
        merged.append(
            {
                "type": kind,
                **wanted,
                "lastProbeTime": None,
                "lastTransitionTime": now
                if moved or old is None
                else old.get("lastTransitionTime"),
            }
        )
    return merged
