"""POST ``pods/<name>/eviction``: delete a pod only if its PodDisruptionBudget allows it.

The rules of ``pkg/registry/core/pod/storage/eviction.go`` (``EvictionREST.Create``):

1. A pod that is Pending, Succeeded, Failed or already being deleted is deleted without
   consulting any budget (``canIgnorePDB``).
2. The PDBs of the pod's namespace whose selector matches the pod's labels are found (a nil
   selector matches nothing, an empty one everything). More than one → 500 "This pod has more
   than one PodDisruptionBudget, which the eviction subresource does not support."; none → the
   pod is deleted.
3. A pod that is not Ready may be deleted without using up the budget when the PDB's
   ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default)
   when ``currentHealthy >= desiredHealthy > 0``.
4. ``checkAndDecrement``: ``status.observedGeneration < metadata.generation`` → 429 with
   retryAfterSeconds 10 ("still being processed"); ``disruptionsAllowed < 0`` → 403;
   ``disruptionsAllowed == 0`` → 429 "Cannot evict pod as it would violate the pod's disruption
   budget." with the DisruptionBudget cause; otherwise ``disruptionsAllowed`` is decremented, the
   pod is recorded in ``status.disruptedPods`` with the clock's time, and the PDB status is
   written.
5. The pod gets the ``DisruptionTarget`` condition and is deleted with the Eviction's
   ``deleteOptions`` (graceful deletion and finalizers apply); the answer is 201 with a Success
   Status.

No disruption controller runs here: a PDB's status is whatever the test or simulator last
wrote through ``/status`` (as the controller would), and it is not recomputed on reads.
"""

from __future__ import annotations

from typing import Any, Final

from kubescale.kube.resources import POD_DISRUPTION_BUDGETS, ResourceType
from kubescale.objects.selectors import SelectorError, label_selector_from_dict

from . import errors
from .json_copy import json_copy
from .routing import Target
from .store import PreparedUpdate, format_time
from .writes import ApiContext, admit

__all__ = ["evict"]

MAX_DISRUPTED_POD_SIZE: Final = 2000
VIOLATION: Final = "Cannot evict pod as it would violate the pod's disruption budget."


def _is_ready(pod: dict[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def _can_ignore_pdb(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in {"Succeeded", "Failed", "Pending"} or bool(
        pod["metadata"].get("deletionTimestamp")
    )


def _matching_pdbs(ctx: ApiContext, pod: dict[str, Any]) -> list[dict[str, Any]]:
    labels = pod["metadata"].get("labels") or {}
    found = []
    for pdb in ctx.store.snapshots(POD_DISRUPTION_BUDGETS, pod["metadata"]["namespace"]):
        raw = (pdb.get("spec") or {}).get("selector")
        if raw is None:
            continue
        try:
            selector = label_selector_from_dict(raw)
        except SelectorError:
            continue
        if selector.matches(labels):
            found.append(pdb)
    return found


def _check_and_decrement(
    ctx: ApiContext, pdb: dict[str, Any], pod_name: str, *, dry_run: bool
) -> None:
    meta, status = pdb["metadata"], pdb.get("status") or {}
    name = meta["name"]
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise errors.too_many_requests(
            VIOLATION,
            retry_after=10,
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {name} is still being processed by the "
                    "server.",
                }
            ],
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _pdb_forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        raise _pdb_forbidden(
            name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        raise errors.too_many_requests(
            VIOLATION,
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {name} needs "
                    f"{int(status.get('desiredHealthy') or 0)} healthy pods and has "
                    f"{int(status.get('currentHealthy') or 0)} currently",
                }
            ],
        )
    if dry_run:
        return
    updated = json_copy(pdb)
    new_status = updated.setdefault("status", {})
    new_status["disruptionsAllowed"] = allowed - 1
    now = format_time(ctx.store.clock.now())
    if allowed - 1 == 0:
        _set_insufficient_pods_condition(new_status, now=now, generation=meta.get("generation"))
    new_status.setdefault("disruptedPods", {})[pod_name] = now
    ctx.store.commit_update(
        POD_DISRUPTION_BUDGETS, PreparedUpdate(old=pdb, new=updated), bump_generation=False
    )


def _set_insufficient_pods_condition(status: dict[str, Any], *, now: str, generation: Any) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition with no disruptions left."""
    conditions = status.setdefault("conditions", [])
    wanted = {
        "type": "DisruptionAllowed",
        "status": "False",
        "reason": "InsufficientPods",
        "message": "",
        "observedGeneration": generation,
    }
    for index, condition in enumerate(conditions):
        if condition.get("type") == "DisruptionAllowed":
            changed = condition.get("status") != "False"
            conditions[index] = {
                **condition,
                **wanted,
                "lastTransitionTime": now if changed else condition.get("lastTransitionTime", now),
            }
            return
    conditions.append({**wanted, "lastTransitionTime": now})


def _pdb_forbidden(name: str, reason: str) -> errors.ApiError:
    return errors.status_error(
        code=403,
        reason="Forbidden",
        message=f'poddisruptionbudget.policy "{name}" is forbidden: {reason}',
        details={"name": name, "group": "policy", "kind": "poddisruptionbudget"},
    )


def _delete_pod(
    ctx: ApiContext,
    rt: ResourceType,
    pod: dict[str, Any],
    options: dict[str, Any],
    *,
    dry_run: bool,
    enforce_rv: bool,
) -> None:
    """addConditionAndDeletePod: DisruptionTarget condition, then an ordinary delete."""
    store = ctx.store
    meta = pod["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    preconditions = dict(options.get("preconditions") or {})
    if enforce_rv and not preconditions.get("resourceVersion"):
        preconditions["resourceVersion"] = meta["resourceVersion"]
    if not dry_run and not meta.get("deletionTimestamp"):
        current = store.peek(rt, name, namespace)
        if current is None:
            raise errors.not_found(rt, name)
        if preconditions.get("resourceVersion") and (
            current["metadata"]["resourceVersion"] != preconditions["resourceVersion"]
        ):
            raise errors.conflict(rt, name)
        updated = json_copy(current)
        conditions = updated.setdefault("status", {}).setdefault("conditions", [])
        if not any(c.get("type") == "DisruptionTarget" for c in conditions):
            conditions.append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": format_time(store.clock.now()),
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                }
            )
            result = store.commit_update(
                rt, PreparedUpdate(old=current, new=updated), bump_generation=False
            )
            if preconditions.get("resourceVersion"):
                preconditions["resourceVersion"] = result["metadata"]["resourceVersion"]
    store.delete(
        rt,
        name,
        namespace,
        grace_period_seconds=options.get("gracePeriodSeconds"),
        preconditions=preconditions or None,
        dry_run=dry_run,
    )


async def evict(ctx: ApiContext, *, target: Target, body: Any, dry_run: bool) -> dict[str, Any]:
    """Evict the pod named by ``target``; the Success Status, or the ApiError kube answers."""
    rt, name = target.rt, target.name
    assert name is not None
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be an Eviction object")
    body_name = (body.get("metadata") or {}).get("name")
    if body_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = body.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise errors.bad_request("deleteOptions must be an object")
    if "All" in (options.get("dryRun") or []):
        dry_run = True
    await admit(
        ctx,
        operation="CREATE",
        rt=rt,
        subresource="eviction",
        obj=json_copy(body),
        old_obj=None,
        namespace=target.namespace,
        dry_run=dry_run,
    )
    pod = ctx.store.get(rt, name, target.namespace)
    success = errors.success_status(code=201)
    if _can_ignore_pdb(pod):
        terminal = (pod.get("status") or {}).get("phase") in {"Succeeded", "Failed"}
        enforce = not terminal and not pod["metadata"].get("deletionTimestamp")
        _delete_pod(ctx, rt, pod, options, dry_run=dry_run, enforce_rv=enforce)
        return success
    pdbs = _matching_pdbs(ctx, pod)
    if len(pdbs) > 1:
        raise errors.internal_error(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support."
        )
    if not pdbs:
        _delete_pod(ctx, rt, pod, options, dry_run=dry_run, enforce_rv=False)
        return success
    pdb = pdbs[0]
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    if not _is_ready(pod):
        policy = spec.get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        desired = int(status.get("desiredHealthy") or 0)
        current_healthy = int(status.get("currentHealthy") or 0)
        if policy == "AlwaysAllow" or (current_healthy >= desired > 0):
            _delete_pod(ctx, rt, pod, options, dry_run=dry_run, enforce_rv=True)
            return success
    _check_and_decrement(ctx, pdb, name, dry_run=dry_run)
    _delete_pod(ctx, rt, pod, options, dry_run=dry_run, enforce_rv=False)
    return success
