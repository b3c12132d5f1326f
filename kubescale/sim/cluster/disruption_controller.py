"""The simulated cluster's disruption controller: keeps PodDisruptionBudget status current.

kube-controller-manager's ``disruption`` controller computes each PDB's status from the pods it
selects; the API server's eviction subresource then reads ``disruptionsAllowed`` (and adds the
pods it evicts to ``status.disruptedPods``). The rules mirrored here
(``pkg/controller/disruption/disruption.go``):

- pods: the PDB's namespace, matched by ``spec.selector`` (an empty selector matches every pod);
- ``expectedPods``: with ``minAvailable`` as an integer, the number of matched pods; otherwise the
  summed desired replicas of the pods' controllers (a ReplicaSet owned by a Deployment counts the
  Deployment's ``spec.replicas``; ReplicaSets and StatefulSets their own);
- ``desiredHealthy``: ``minAvailable`` (an integer, or a percentage of expected rounded up), or
  expected − ``maxUnavailable`` (a percentage of expected rounded up), never below 0;
- ``currentHealthy``: matched pods that are Ready, not being deleted, and not listed in
  ``disruptedPods`` within the 2-minute deletion timeout (an evicted pod stops counting at once);
- ``disruptionsAllowed`` = max(0, currentHealthy − desiredHealthy); expired ``disruptedPods``
  entries and entries of pods that are gone or being deleted are dropped.

Status is written through the status subresource only when it changes, so a quiet step costs a
read of the PDBs and their pods and no write.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from kubescale.kube.resources import (
    DEPLOYMENTS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
)
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.storage import format_time, parse_time

__all__ = ["DELETION_TIMEOUT", "DisruptionController", "pdb_status"]

DELETION_TIMEOUT: Final = timedelta(minutes=2)
"""``DeletionTimeout``: how long an evicted pod is kept out of ``currentHealthy``."""


def _ready(pod: Mapping[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            owner: Mapping[str, Any] = ref
            return owner
    return None


def _expected_from_controllers(
    api: ApiServer, namespace: str, pods: Iterable[Mapping[str, Any]]
) -> int:
    seen: set[tuple[str, str]] = set()
    total = 0
    for pod in pods:
        owner = _controller(pod)
        if owner is None:
            continue
        kind, name = str(owner.get("kind")), str(owner.get("name"))
        if kind == "ReplicaSet":
            rs = api.store.peek(REPLICA_SETS, name, namespace)
            parent = _controller(rs) if rs is not None else None
            if parent is not None and parent.get("kind") == "Deployment":
                kind, name = "Deployment", str(parent.get("name"))
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        rt = {
            "Deployment": DEPLOYMENTS,
            "ReplicaSet": REPLICA_SETS,
            "StatefulSet": STATEFUL_SETS,
        }.get(kind)
        obj = api.store.peek(rt, name, namespace) if rt is not None else None
        if obj is not None:
            total += int((obj.get("spec") or {}).get("replicas", 1) or 0)
    return total


def pdb_status(
    api: ApiServer, pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: datetime
) -> dict[str, Any]:
    """The status the disruption controller would write for ``pdb`` over its matched ``pods``."""
    spec = pdb.get("spec") or {}
    status = dict(pdb.get("status") or {})
    namespace = str(pdb["metadata"]["namespace"])
    min_available = spec.get("minAvailable")
    if min_available is not None and not (isinstance(min_available, str) and "%" in min_available):
        expected = len(pods)
        desired = int(min_available)
    else:
        expected = _expected_from_controllers(api, namespace, pods)
        if min_available is not None:
            desired = _scaled(min_available, expected)
        else:
            desired = max(0, expected - _scaled(spec.get("maxUnavailable", 0), expected))
    live = {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}
    disrupted = {
        name: when
        for name, when in (status.get("disruptedPods") or {}).items()
        if name in live and parse_time(when) + DELETION_TIMEOUT > now
    }
    healthy = sum(1 for name, pod in live.items() if name not in disrupted and _ready(pod))
    allowed = max(0, healthy - desired)
    status.update(
        observedGeneration=pdb["metadata"].get("generation", 1),
        expectedPods=expected,
        desiredHealthy=desired,
        currentHealthy=healthy,
        disruptionsAllowed=allowed,
    )
    if disrupted:
        status["disruptedPods"] = disrupted
    else:
        status.pop("disruptedPods", None)
    condition = {
        "type": "DisruptionAllowed",
        "status": "True" if allowed > 0 else "False",
        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
        "message": "",
        "observedGeneration": status["observedGeneration"],
    }
    old = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None
    )
    same = old is not None and old.get("status") == condition["status"]
    condition["lastTransitionTime"] = (
        old["lastTransitionTime"] if same and old else format_time(now)
    )
    status["conditions"] = [condition]
    return status


class DisruptionController:
    """Recomputes every PodDisruptionBudget's status each step; writes only changes."""

    def __init__(self, api: ApiServer) -> None:
        self._api = api

    async def step(self, now: datetime) -> None:
        store = self._api.store
        for pdb in store.list(POD_DISRUPTION_BUDGETS):
            namespace = pdb["metadata"]["namespace"]
            try:
                selector = label_selector_from_dict((pdb.get("spec") or {}).get("selector") or {})
            except SelectorError:
                continue
            pods = [
                pod for pod in store.snapshots(PODS, namespace)
                if selector.matches((pod.get("metadata") or {}).get("labels") or {})
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]  # fmt: skip
            status = pdb_status(self._api, pdb, pods, now=now)
            if status != (pdb.get("status") or {}):
                try:
                    store.update_status({**pdb, "status": status})
                except ApiError:
                    continue  # changed under us (an eviction): recomputed next step
