"""The autoscaler's writes to Node objects: its taints and the cordon (``pkg/utils/taints``).

``MarkToBeDeleted`` adds ``ToBeDeletedByClusterAutoscaler=<unix seconds>:NoSchedule`` and, with
``--cordon-node-before-terminating``, sets ``spec.unschedulable``; ``CleanToBeDeleted`` takes both
back; ``MarkDeletionCandidate`` / ``CleanDeletionCandidate`` do the same for the
``DeletionCandidateOfClusterAutoscaler`` soft taint (PreferNoSchedule). Each is a GET and a
conditional PUT, retried on a conflict (upstream's ``addTaintToSpec`` loop); a node that is gone
is not an error.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Final

from kubescale.controllers.autoscaler.model.node_facts import (
    DELETION_CANDIDATE_TAINT,
    TO_BE_DELETED_TAINT,
    with_taint,
    without_taint,
)
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import NODES

__all__ = ["NodeWriter"]

_CONFLICT_RETRIES: Final = 5


class NodeWriter:
    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def _change(self, name: str, change: Any) -> bool:
        """GET, apply ``change(node) -> node | None`` (``None``: nothing to do), PUT; whether a
        write happened."""
        for _ in range(_CONFLICT_RETRIES):
            try:
                current = await self.client.get(NODES, name)
            except KubeApiError as err:
                if err.not_found:
                    return False
                raise
            updated = change(copy.deepcopy(current))
            if updated is None:
                return False
            try:
                await self.client.update(NODES, updated)
            except KubeApiError as err:
                if err.conflict:
                    continue
                if err.not_found:
                    return False
                raise
            return True
        raise KubeApiError(
            code=409, reason="Conflict", message=f"node {name}: too many conflicting updates"
        )

    async def mark_to_be_deleted(self, name: str, *, now: datetime, cordon: bool) -> bool:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            spec = node.setdefault("spec", {})
            taints = with_taint(
                spec.get("taints") or [], key=TO_BE_DELETED_TAINT, effect="NoSchedule", now=now
            )
            if taints is None and (not cordon or spec.get("unschedulable")):
                return None
            if taints is not None:
                spec["taints"] = taints
            if cordon:
                spec["unschedulable"] = True
            return node

        return await self._change(name, change)

    async def clean_to_be_deleted(self, name: str, *, uncordon: bool) -> bool:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            spec = node.setdefault("spec", {})
            taints = without_taint(spec.get("taints") or [], TO_BE_DELETED_TAINT)
            if taints is None:
                return None
            spec["taints"] = taints
            if uncordon:
                spec.pop("unschedulable", None)
            return node

        return await self._change(name, change)

    async def mark_deletion_candidate(self, name: str, *, now: datetime) -> bool:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            spec = node.setdefault("spec", {})
            taints = with_taint(
                spec.get("taints") or [],
                key=DELETION_CANDIDATE_TAINT,
                effect="PreferNoSchedule",
                now=now,
            )
            if taints is None:
                return None
            spec["taints"] = taints
            return node

        return await self._change(name, change)

    async def clean_deletion_candidate(self, name: str) -> bool:
        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            spec = node.setdefault("spec", {})
            taints = without_taint(spec.get("taints") or [], DELETION_CANDIDATE_TAINT)
            if taints is None:
                return None
            spec["taints"] = taints
            return node

        return await self._change(name, change)
