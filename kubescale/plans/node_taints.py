"""The executor's node taint writes (:class:`~.intents.Taint`, :class:`~.intents.Untaint`).

Upstream cluster autoscaler's ``pkg/utils/taints`` (``MarkToBeDeleted`` / ``CleanToBeDeleted``):
GET the node, change its ``spec.taints`` (and ``spec.unschedulable`` for the cordon), PUT it
conditionally on the version read; a conflict reads again, up to 5 times (the ``addTaintToSpec``
loop), then ``409`` is the error. Nothing to change -- the taint already there, or not there to
remove -- writes nothing; a node that is gone is not an error.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import NODES
from kubescale.plans.intents import Taint, Untaint

__all__ = ["CONFLICT_RETRIES", "node_taint", "tainted"]

CONFLICT_RETRIES: Final = 5


def tainted(node: dict[str, Any], intent: Taint | Untaint) -> dict[str, Any] | None:
    """``node`` changed as ``intent`` says, or ``None`` when there is nothing to write."""
    spec = node.setdefault("spec", {})
    taints = [dict(t) for t in spec.get("taints") or []]
    present = any(t.get("key") == intent.key for t in taints)
    if isinstance(intent, Taint):
        if present and (not intent.cordon or spec.get("unschedulable")):
            return None
        if not present:
            spec["taints"] = [
                *taints,
                {"key": intent.key, "value": intent.value, "effect": intent.effect},
            ]
        if intent.cordon:
            spec["unschedulable"] = True
        return node
    if not present:
        return None
    spec["taints"] = [t for t in taints if t.get("key") != intent.key]
    if intent.uncordon:
        spec.pop("unschedulable", None)
    return node


async def node_taint(client: KubeClient, intent: Taint | Untaint) -> dict[str, Any] | None:
    """Apply ``intent`` (module docstring); the node as stored, or ``None`` when nothing was
    written (nothing to change, or the node is gone)."""
    for _ in range(CONFLICT_RETRIES):
        try:
            current = await client.get(NODES, intent.node)
        except KubeApiError as err:
            if err.not_found:
                return None
            raise
        updated = tainted(copy.deepcopy(current), intent)
        if updated is None:
            return None
        try:
            return await client.update(NODES, updated)
        except KubeApiError as err:
            if err.conflict:
                continue
            if err.not_found:
                return None
            raise
    raise KubeApiError(
        code=409, reason="Conflict", message=f"node {intent.node}: too many conflicting updates"
    )
