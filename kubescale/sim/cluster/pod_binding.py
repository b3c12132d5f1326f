"""The scheduler's two writes: binding a pod to a node, and recording why it cannot be placed.

* :func:`bind_pod` does what ``POST pods/<name>/binding`` does (``BindingREST``): it refuses a pod
  that is gone, being deleted or already assigned, else sets ``spec.nodeName`` and the
  ``PodScheduled=True`` condition, in one write. The condition replaces the one of that type as
  ``podutil.UpdatePodCondition`` does, so the reason and message of an earlier
  ``Unschedulable`` verdict go away.
* :func:`mark_unschedulable` writes ``PodScheduled=False`` with the reason
  (``Unschedulable``, ``SchedulerError``) and message through the status subresource, and only
  when the pod does not already carry exactly that condition (the scheduler's ``updatePod``
  skips unchanged conditions, so an unschedulable pod costs no write per retry).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubescale.base.logs import component_logger
from kubescale.kube.resources import PODS
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.store import ObjectStore, PreparedUpdate, format_time

__all__ = ["bind_pod", "mark_unschedulable", "set_pod_condition"]

log = component_logger("sim.scheduler")


def _key(pod: Mapping[str, Any]) -> tuple[str, str]:
    return str(pod["metadata"]["name"]), str(pod["metadata"].get("namespace", ""))


def _name(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


def set_pod_condition(pod: dict[str, Any], condition: Mapping[str, Any], now: str) -> None:
    """``podutil.UpdatePodCondition``: replace the condition of that type; the transition time
    moves only when the status changes."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition["type"]:
            moved = existing.get("status") != condition.get("status")
            conditions[index] = {
                **condition,
                "lastProbeTime": None,
                "lastTransitionTime": now if moved else existing.get("lastTransitionTime", now),
            }
            return
    conditions.append({**condition, "lastProbeTime": None, "lastTransitionTime": now})


def bind_pod(store: ObjectStore, pod: Mapping[str, Any], node: str, now: datetime) -> bool:
    """Bind ``pod`` to ``node``; ``False`` when the binding is refused."""
    current = store.peek(PODS, *_key(pod))
    if current is None or current["metadata"].get("deletionTimestamp"):
        return False
    if (current.get("spec") or {}).get("nodeName"):
        return False
    bound = copy.deepcopy(current)
    bound["spec"]["nodeName"] = node
    set_pod_condition(bound, {"type": "PodScheduled", "status": "True"}, format_time(now))
    try:
        store.commit_update(PODS, PreparedUpdate(old=current, new=bound), bump_generation=False)
    except ApiError as exc:
        log.warning("binding failed", extra={"fields": {"pod": _name(pod), "error": str(exc)}})
        return False
    return True


def mark_unschedulable(
    store: ObjectStore, pod: Mapping[str, Any], *, reason: str, message: str, now: datetime
) -> None:
    """Record ``PodScheduled=False`` with ``reason``/``message`` unless the pod already has it."""
    current = store.peek(PODS, *_key(pod))
    if current is None or (current.get("spec") or {}).get("nodeName"):
        return
    wanted = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
    for condition in (current.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and all(
            condition.get(k) == v for k, v in wanted.items()
        ):
            return
    updated = copy.deepcopy(current)
    set_pod_condition(updated, wanted, format_time(now))
    try:
        store.update_status(updated)
    except ApiError as exc:
        log.warning(
            "could not record unschedulable pod",
            extra={"fields": {"pod": _name(pod), "error": str(exc)}},
        )
