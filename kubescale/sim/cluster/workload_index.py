"""What the simulated workload controllers know of the cluster: an informer-like index fed by the
store's commit listener, and the work queue it fills.

kube-controller-manager's controllers watch their objects through shared informers and enqueue
the owner of whatever changed. Here the store calls :meth:`WorkloadIndex.observe` synchronously
after every committed write, so the index is never stale and a step with nothing changed finds
an empty queue and costs nothing. The index keeps the stored snapshots themselves (the store
never mutates a committed dict; do not mutate them either).

What a change enqueues (``dirty``), as the upstream event handlers do:

* a Deployment, ReplicaSet, StatefulSet, DaemonSet or Job: itself and its controller owner;
* a pod: its controller owner and that owner's owner (a Deployment follows its pods through
  its ReplicaSets, and ``Recreate`` waits for old pods to be gone);
* a node whose existence, labels, taints or ``unschedulable`` changed: every DaemonSet.

A deleted owner's uid is queued in ``deleted_owners`` for the garbage collection the API server
does not do (background propagation: the dependents are deleted).

Pod indexes (:data:`~.usage_models.POD_INDEX_ANNOTATION`): an index is held by a pod of the
workload from its creation until it is gone or terminal, and :meth:`WorkloadIndex.free_index`
hands out the lowest one not held.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubescale.kube.resources import (
    DAEMON_SETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
    ResourceType,
)
from kubescale.sim.apiserver.history import StoredEvent
from kubescale.sim.apiserver.store import ObjectStore

from .usage_models import WORKLOAD_LABEL
from .workload_pods import controller_ref, is_terminal, pod_index

__all__ = ["CONTROLLER_TYPES", "Key", "WorkloadIndex"]

Key = tuple[str, str, str]
"""``(plural, namespace, name)`` of an object the controllers sync or own."""

CONTROLLER_TYPES: Final[dict[str, ResourceType]] = {
    rt.plural: rt for rt in (DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS, DAEMON_SETS, JOBS)
}
_BY_RESOURCE: Final = {rt.key: rt.plural for rt in (*CONTROLLER_TYPES.values(), PODS, NODES)}


def _node_shape(node: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What DaemonSet placement reads of a node."""
    if node is None:
        return None
    spec = node.get("spec") or {}
    return (
        (node.get("metadata") or {}).get("labels"),
        spec.get("taints"),
        spec.get("unschedulable"),
    )


class WorkloadIndex:
    """Controller-relevant objects by key and by owner, the dirty queue, and pod indexes."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            plural: {} for plural in (*CONTROLLER_TYPES, PODS.plural)
        }
        self.nodes: dict[str, dict[str, Any]] = {}
        self._key_by_uid: dict[str, Key] = {}
        self._children: dict[str, dict[Key, dict[str, Any]]] = {}
        self._parent: dict[Key, str] = {}
        self._held: dict[tuple[str, str], dict[int, str]] = {}
        self._holding: dict[tuple[str, str], tuple[tuple[str, str], int]] = {}
        self.dirty: set[Key] = set()
        self.deleted_owners: list[str] = []

    # ------------------------------------------------------------------------------ feeding

    def load(self, store: ObjectStore) -> None:
        """Index what the store holds now (everything enqueued, as an informer's first list)."""
        for rt in (NODES, PODS, *CONTROLLER_TYPES.values()):
            for obj in store.snapshots(rt):
                meta = obj["metadata"]
                self.observe(
                    StoredEvent(
                        type="ADDED",
                        resource=rt.key,
                        namespace=meta.get("namespace") or "",
                        name=meta["name"],
                        rv=int(meta.get("resourceVersion") or 0),
                        obj=obj,
                        previous=None,
                    )
                )

    def observe(self, event: StoredEvent) -> None:
        """The store's commit listener: update the index, enqueue what must be synced."""
        plural = _BY_RESOURCE.get(event.resource)
        if plural is None:
            return
        deleted = event.type == "DELETED"
        if plural == NODES.plural:
            before = self.nodes.get(event.name)
            if deleted:
                self.nodes.pop(event.name, None)
            else:
                self.nodes[event.name] = event.obj
            if _node_shape(before) != _node_shape(None if deleted else event.obj):
                self.dirty.update(
                    (DAEMON_SETS.plural, ns, name) for ns, name in self._objects[DAEMON_SETS.plural]
                )
            return
        key: Key = (plural, event.namespace, event.name)
        bucket = self._objects[plural]
        old = bucket.get(key[1:])
        if old is not None:
            old_uid = old["metadata"].get("uid")
            if self._key_by_uid.get(old_uid) == key:
                del self._key_by_uid[old_uid]
        self._unparent(key)
        if deleted:
            bucket.pop(key[1:], None)
            if plural != PODS.plural:
                self.deleted_owners.append(str(event.obj["metadata"].get("uid")))
        else:
            bucket[key[1:]] = event.obj
            self._key_by_uid[str(event.obj["metadata"].get("uid"))] = key
            ref = controller_ref(event.obj)
            if ref is not None:
                parent_uid = str(ref.get("uid"))
                self._parent[key] = parent_uid
                self._children.setdefault(parent_uid, {})[key] = event.obj
        if plural == PODS.plural:
            self._hold_index(key, None if deleted else event.obj)
        else:
            self.dirty.add(key)
        self._enqueue_owners(event.obj, levels=2 if plural == PODS.plural else 1)

    def _unparent(self, key: Key) -> None:
        parent_uid = self._parent.pop(key, None)
        if parent_uid is not None:
            siblings = self._children.get(parent_uid)
            if siblings is not None:
                siblings.pop(key, None)
                if not siblings:
                    del self._children[parent_uid]

    def _enqueue_owners(self, obj: Mapping[str, Any], *, levels: int) -> None:
        current: Mapping[str, Any] | None = obj
        for _ in range(levels):
            ref = controller_ref(current) if current is not None else None
            if ref is None:
                return
            owner_key = self._key_by_uid.get(str(ref.get("uid")))
            if owner_key is None:
                return
            self.dirty.add(owner_key)
            current = self._objects[owner_key[0]].get(owner_key[1:])

    def _hold_index(self, key: Key, pod: Mapping[str, Any] | None) -> None:
        pod_key = key[1:]
        previous = self._holding.pop(pod_key, None)
        if previous is not None:
            held = self._held.get(previous[0], {})
            if held.get(previous[1]) == key[2]:
                del held[previous[1]]
        if pod is None or is_terminal(pod):
            return
        workload = ((pod.get("metadata") or {}).get("labels") or {}).get(WORKLOAD_LABEL)
        index = pod_index(pod)
        if not isinstance(workload, str) or index is None:
            return
        group = (key[1], workload)
        self._held.setdefault(group, {}).setdefault(index, key[2])
        self._holding[pod_key] = (group, index)

    # ------------------------------------------------------------------------------ reading

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects[plural].get((namespace, name))

    def all(self, plural: str) -> list[dict[str, Any]]:
        """Every indexed object of the kind, sorted by (namespace, name)."""
        bucket = self._objects[plural]
        return [bucket[k] for k in sorted(bucket)]

    def key_of_uid(self, uid: str) -> Key | None:
        return self._key_by_uid.get(uid)

    def children(self, owner_uid: str, plural: str) -> list[dict[str, Any]]:
        """The objects of kind ``plural`` whose controller is ``owner_uid``, sorted by name."""
        found = self._children.get(owner_uid) or {}
        return [found[k] for k in sorted(k for k in found if k[0] == plural)]

    def dependents(self, owner_uid: str) -> list[Key]:
        """Everything controlled by ``owner_uid`` (any kind), sorted."""
        return sorted(self._children.get(owner_uid) or {})

    def free_index(self, namespace: str, workload: str) -> int:
        """The lowest pod index no live pod of the workload holds."""
        held = self._held.get((namespace, workload)) or {}
        index = 0
        while index in held:
            index += 1
        return index

    def take_dirty(self) -> list[Key]:
        """The queued keys, sorted, and an empty queue."""
        keys = sorted(self.dirty)
        self.dirty.clear()
        return keys
