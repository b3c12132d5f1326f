"""The ReplicaSet controller (``pkg/controller/replicaset/replica_set.go``), one sync per call.

``manageReplicas``: the active pods it controls (not terminal, not being deleted) are compared
with ``spec.replicas``; missing pods are created from the template (through admission), surplus
pods deleted in :func:`~.workload_pods.deletion_order`. A pod that was deleted or evicted stops
being active at once — its replacement is created while it terminates, as upstream does. Pod
creation stops at the first refused create (upstream's slow-start batches stop there too).

Status (``calculateStatus``): ``replicas`` active pods, ``fullyLabeledReplicas`` (carrying all
template labels), ``readyReplicas``, ``availableReplicas`` (ready for ``minReadySeconds``),
``observedGeneration``. A ready pod that is not available yet schedules a sync for the moment it
will be.

Pods are named ``<replicaset>-<5 random characters>`` (generateName) and carry the workload of
the owning Deployment (or of the ReplicaSet when it has none).
"""

from __future__ import annotations

from typing import Any

from kubescale.kube.resources import DEPLOYMENTS, REPLICA_SETS

from .controller_context import ControllerContext
from .workload_pods import (
    available_since,
    controller_ref,
    deletion_order,
    is_active,
    is_ready,
    pod_from_template,
    workload_of,
)

__all__ = ["replica_set_status", "sync_replica_set"]

BURST_REPLICAS = 500
"""``BurstReplicas``: at most this many creates or deletes per sync."""


def _workload(ctx: ControllerContext, rs: dict[str, Any]) -> str:
    ref = controller_ref(rs)
    default = rs["metadata"]["name"]
    if ref is not None and ref.get("kind") == "Deployment":
        key = ctx.index.key_of_uid(str(ref.get("uid")))
        if key is not None and key[0] == DEPLOYMENTS.plural:
            default = key[2]
    return workload_of((rs.get("spec") or {}).get("template") or {}, default)


def replica_set_status(
    ctx: ControllerContext, rs: dict[str, Any], *, active: list[dict[str, Any]]
) -> dict[str, Any]:
    """``calculateStatus`` over the active pods."""
    spec = rs.get("spec") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    labeled = ready = available = 0
    for pod in active:
        labels = pod["metadata"].get("labels") or {}
        if all(labels.get(k) == v for k, v in template_labels.items()):
            labeled += 1
        if is_ready(pod):
            ready += 1
            since = available_since(pod, min_ready)
            if since is not None and (min_ready == 0 or since <= ctx.now):
                available += 1
            elif since is not None:
                meta = rs["metadata"]
                ctx.wake_at((REPLICA_SETS.plural, meta["namespace"], meta["name"]), since)
    status = dict(rs.get("status") or {})
    status.update(
        {
            "replicas": len(active),
            "fullyLabeledReplicas": labeled,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": int(rs["metadata"].get("generation") or 1),
        }
    )
    return status


async def sync_replica_set(ctx: ControllerContext, rs: dict[str, Any]) -> None:
    meta = rs["metadata"]
    uid = str(meta["uid"])
    active = [p for p in ctx.index.children(uid, "pods") if is_active(p)]
    wanted = int((rs.get("spec") or {}).get("replicas", 1))
    if meta.get("deletionTimestamp"):
        wanted = len(active)  # being deleted: leave the pods to the garbage collector
    if len(active) < wanted:
        template = (rs.get("spec") or {}).get("template") or {}
        workload = _workload(ctx, rs)
        for _ in range(min(wanted - len(active), BURST_REPLICAS)):
            pod = pod_from_template(
                template=template,
                owner=rs,
                workload=workload,
                index=ctx.index.free_index(meta["namespace"], workload),
                generate_name=f"{meta['name']}-",
            )
            await ctx.create(pod)
    elif len(active) > wanted:
        for pod in deletion_order(active)[: min(len(active) - wanted, BURST_REPLICAS)]:
            ctx.delete_pod(pod)
    current = ctx.index.get(REPLICA_SETS.plural, meta["namespace"], meta["name"])
    if current is not None:
        active = [p for p in ctx.index.children(uid, "pods") if is_active(p)]
        ctx.update_status(current, replica_set_status(ctx, current, active=active))
