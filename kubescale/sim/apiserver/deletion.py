"""DELETE: graceful deletion, finalizers, preconditions, and namespace termination.

``delete_object`` follows ``rest.BeforeDelete`` and ``Store.Delete``/
``updateForGracefulDeletionAndFinalizers`` of the generic registry:

* pods are deleted gracefully (``podStrategy.CheckGracefulDelete``): ``deletionTimestamp`` is set
  to now + grace and ``deletionGracePeriodSeconds`` to the grace; with grace 0 (an unscheduled
  or terminated pod) the marked object is written and then removed at once; a later delete may
  only shorten a pending grace period;
* an object with finalizers is only marked (``markAsDeleting``: ``deletionTimestamp`` now,
  grace 0, generation + 1) and stays until an update removes the last finalizer;
* anything else is removed at once.

There is no namespace controller: deleting a namespace marks it Terminating, deletes what is in
it right away, and removes the namespace when its last object is gone (so objects held by
finalizers or by a pod's grace period keep it Terminating, as in a cluster). Propagation
policies are accepted and not acted on: no garbage collector follows owner references.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kubescale.kube.resources import NAMESPACES, ResourceType

from . import errors, strategy
from .json_copy import json_copy
from .storage import Storage, format_time, parse_time

__all__ = [
    "IMMORTAL_NAMESPACES",
    "RETURNS_DELETED_OBJECT",
    "DeleteOutcome",
    "delete_object",
    "finish_namespace",
]

RETURNS_DELETED_OBJECT: Final = frozenset(
    {("", "pods"), ("", "persistentvolumeclaims"), ("", "namespaces")}
)
"""Stores with ``ReturnDeletedObject: true``; the others answer an immediate delete with a
Success Status naming the object."""
IMMORTAL_NAMESPACES: Final = ("default", "kube-system", "kube-public")
"""NamespaceLifecycle admission refuses to delete these."""


@dataclass(frozen=True, kw_only=True)
class DeleteOutcome:
    """What a DELETE did: ``obj`` is the object after the call; ``removed`` if it is gone."""

    obj: dict[str, Any]
    removed: bool


def delete_object(
    store: Storage,
    rt: ResourceType,
    name: str,
    namespace: str | None = None,
    *,
    grace_period_seconds: int | None = None,
    preconditions: dict[str, Any] | None = None,
    dry_run: bool = False,
) -> DeleteOutcome:
    """DELETE as ``Store.Delete`` does (graceful pods, finalizers, preconditions)."""
    rt = store.served(rt)
    ns = store.namespace_key(rt, namespace)
    current = store.peek(rt, name, ns)
    if current is None:
        raise errors.not_found(rt, name)
    _check_preconditions(rt, current, preconditions)
    if rt.key == NAMESPACES.key and name in IMMORTAL_NAMESPACES:
        raise errors.status_error(
            code=403,
            reason="Forbidden",
            message=f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            details={"name": name, "kind": "namespaces"},
        )
    grace = grace_period_seconds
    if grace is not None and grace < 0:
        grace = 1
    obj = json_copy(current)
    meta = obj["metadata"]
    now = store.clock.now()
    graceful = False
    if meta.get("deletionTimestamp"):
        pending_grace = meta.get("deletionGracePeriodSeconds")
        if pending_grace:
            if grace is None or grace >= pending_grace:
                return DeleteOutcome(obj=obj, removed=False)  # graceful deletion pending
            # "only a shorter grace period may be provided by a user"
            started = parse_time(meta["deletionTimestamp"]) - timedelta(seconds=pending_grace)
            meta["deletionTimestamp"] = format_time(started + timedelta(seconds=grace))
            meta["deletionGracePeriodSeconds"] = grace
            graceful = True
    else:
        period = strategy.graceful_delete_period(rt, obj, grace)
        if period is not None:
            meta["deletionTimestamp"] = format_time(now + timedelta(seconds=period))
            meta["deletionGracePeriodSeconds"] = period
            if meta.get("generation"):
                meta["generation"] = int(meta["generation"]) + 1
            graceful = True
            grace = period
    finalizers = bool(meta.get("finalizers"))
    if rt.key == NAMESPACES.key and not dry_run:
        return _delete_namespace(store, name, obj, current)
    if not graceful and finalizers:
        # markAsDeleting
        if not meta.get("deletionTimestamp"):
            if meta.get("generation"):
                meta["generation"] = int(meta["generation"]) + 1
            meta["deletionTimestamp"] = format_time(now)
        meta["deletionGracePeriodSeconds"] = 0
    if graceful or finalizers:
        if obj != current and not dry_run:
            store.write(rt, ns=ns, name=name, event_type="MODIFIED", obj=obj, previous=current)
            obj = json_copy(store.bucket(rt)[(ns, name)])
        if finalizers or (graceful and grace):
            return DeleteOutcome(obj=obj, removed=False)
    if not dry_run:
        store.remove(rt, ns, name)
    return DeleteOutcome(obj=obj, removed=True)


def _check_preconditions(
    rt: ResourceType, current: dict[str, Any], preconditions: dict[str, Any] | None
) -> None:
    if not preconditions:
        return
    meta = current["metadata"]
    uid = preconditions.get("uid")
    if uid and uid != meta.get("uid"):
        raise errors.conflict(
            rt,
            meta["name"],
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
            f"{meta.get('uid')}",
        )
    rv = preconditions.get("resourceVersion")
    if rv and rv != meta.get("resourceVersion"):
        raise errors.conflict(
            rt,
            meta["name"],
            f"Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion "
            f"in object meta: {meta.get('resourceVersion')}",
        )


def _delete_namespace(
    store: Storage, name: str, obj: dict[str, Any], current: dict[str, Any]
) -> DeleteOutcome:
    """Namespace deletion with the namespace controller's work done at once.

    The namespace turns Terminating (new content is refused), every object in it is
    deleted with default options, and the namespace goes away with the last of them.
    Objects held by finalizers or a pod grace period keep it Terminating until they go.
    """
    if not obj["metadata"].get("deletionTimestamp"):
        obj["metadata"]["deletionTimestamp"] = format_time(store.clock.now())
        obj["metadata"]["deletionGracePeriodSeconds"] = 0
    obj.setdefault("status", {})["phase"] = "Terminating"
    if obj != current:
        store.write(NAMESPACES, ns="", name=name, event_type="MODIFIED", obj=obj, previous=current)
    for rt in store.registry.types():
        if not rt.namespaced:
            continue
        for child in list(store.snapshots(rt, name)):
            child_meta = child["metadata"]
            if child_meta.get("deletionTimestamp") and child_meta.get("finalizers"):
                continue
            delete_object(store, rt, child_meta["name"], name)
    finish_namespace(store, name)
    stored = store.peek(NAMESPACES, name)
    if stored is None:
        return DeleteOutcome(obj=obj, removed=True)
    return DeleteOutcome(obj=json_copy(stored), removed=False)


def finish_namespace(store: Storage, name: str) -> bool:
    ns_obj = store.peek(NAMESPACES, name)
    if ns_obj is None or (ns_obj.get("status") or {}).get("phase") != "Terminating":
        return False
    if ns_obj["metadata"].get("finalizers"):
        return False
    for rt in store.registry.types():
        if rt.namespaced and store.snapshots(rt, name):
            return False
    store.remove(NAMESPACES, "", name)
    return True
