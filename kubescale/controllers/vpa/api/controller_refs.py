"""The top-most well-known or scalable controller of a pod, as VPA resolves it.

A VPA names its workload through ``spec.targetRef`` (a Deployment, a StatefulSet, a custom
resource with a ``/scale`` subresource ...), while a pod names only its direct owner (usually a
ReplicaSet). The admission controller bridges the two exactly as upstream's
``vpa_api_util.FindParentControllerForPod`` + ``controllerfetcher.FindTopMostWellKnownOrScalable``
(``vertical-pod-autoscaler/pkg/target/controller_fetcher``) do, and this module repeats their
rules on raw API dicts:

* the pod's controller is its **last** ``ownerReferences`` entry with ``controller: true`` (the
  loop in ``FindParentControllerForPod`` keeps overwriting); no such entry -> no controller;
* a controller's own parent is its **first** ``controller: true`` owner reference
  (``getOwnerController``), in the same namespace;
* well-known kinds (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
  ReplicationController) are read from the informer caches: a missing object is an error, so the
  pod gets no controller;
* any other kind is "scalable" when it serves ``/scale`` and the object exists (the scale GET
  succeeds). Its parent would be read from the Scale object, whose metadata carries no owner
  references, so the walk stops there; a kind without ``/scale`` answers 404, which also ends
  the walk (without making that kind the answer);
* a ``Node`` owner is never valid (upstream refuses to fetch nodes): the pod gets no controller;
* the answer is the highest well-known-or-scalable object seen; a cycle in the ownership chain
  is an error (no controller).

Pure: the caller passes cache lookups; no I/O happens here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from kubescale.objects.meta import OwnerReference
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, ObjectRef, text

__all__ = [
    "WELL_KNOWN_CONTROLLER_KINDS",
    "ControllerRef",
    "OwnerLookup",
    "controller_owner_ref",
    "topmost_controller",
]

# controller_fetcher.go: the kinds read from informers (wellKnownController, minus Node).
WELL_KNOWN_CONTROLLER_KINDS = frozenset(
    {
        "CronJob",
        "DaemonSet",
        "Deployment",
        "Job",
        "ReplicaSet",
        "ReplicationController",
        "StatefulSet",
    }
)
_NODE_KIND = "Node"
# A chain longer than this is treated like a cycle (upstream detects only true cycles; owner
# chains in practice are two or three links long).
_MAX_CHAIN = 64


ControllerRef = ObjectRef
"""A controller: upstream's ``controllerfetcher.ControllerKeyWithAPIVersion``."""


OwnerLookup = Callable[[str, str, str, str], Mapping[str, object] | None]
"""``(apiVersion, kind, namespace, name)`` -> the cached object, or ``None`` when absent (a
controller of any kind: only its ``metadata`` is read, through :class:`Meta`)."""


def _controller_refs(obj: Mapping[str, object]) -> list[OwnerReference]:
    refs: object = Meta(obj).raw.get("ownerReferences")  # as sent: checked below
    if not isinstance(refs, list):
        return []
    # Checked entry by entry (a malformed one is skipped), then read as OwnerReference.
    return [
        cast(OwnerReference, ref)
        for ref in refs
        if isinstance(ref, Mapping) and ref.get("controller") is True
    ]


def _ref(owner: OwnerReference, namespace: str) -> ControllerRef:
    return ControllerRef(
        api_version=text(owner.get("apiVersion")),
        kind=text(owner.get("kind")),
        name=text(owner.get("name")),
        namespace=namespace,
    )


def _namespace(obj: Pod) -> str:
    return Meta(obj).namespace


def controller_owner_ref(pod: Pod) -> ControllerRef | None:
    """The pod's direct controller (FindParentControllerForPod: the last controller ref)."""
    refs = _controller_refs(pod)
    if not refs:
        return None
    return _ref(refs[-1], _namespace(pod))


class _NoController(Exception):
    """Upstream returns an error here; the matcher then treats the pod as uncontrolled."""


def topmost_controller(
    pod: Pod,
    *,
    lookup: OwnerLookup,
    scalable_kinds: Callable[[str, str], bool],
) -> ControllerRef | None:
    """FindTopMostWellKnownOrScalable for the pod's controller; ``None`` when there is none.

    ``scalable_kinds(apiVersion, kind)`` says whether that kind serves a ``/scale``
    subresource (discovery); ``lookup`` reads the caches. The pod's namespace must be set
    (upstream's pod handler fills it from the request when the pod has no name yet).
    """
    start = controller_owner_ref(pod)
    if start is None:
        return None
    try:
        return _walk(start, lookup=lookup, scalable_kinds=scalable_kinds)
    except _NoController:
        return None


def _is_well_known_or_scalable(
    key: ControllerRef, *, lookup: OwnerLookup, scalable_kinds: Callable[[str, str], bool]
) -> bool:
    # isWellKnownOrScalable: well-known kinds always; Node never; else the scale GET must work.
    if key.kind in WELL_KNOWN_CONTROLLER_KINDS:
        return True
    if key.kind == _NODE_KIND:
        return False
    if not scalable_kinds(key.api_version, key.kind):
        return False
    return lookup(key.api_version, key.kind, key.namespace, key.name) is not None


def _parent(
    key: ControllerRef, *, lookup: OwnerLookup, scalable_kinds: Callable[[str, str], bool]
) -> ControllerRef | None:
    # getParentOfController.
    if key.kind in WELL_KNOWN_CONTROLLER_KINDS:
        obj = lookup(key.api_version, key.kind, key.namespace, key.name)
        if obj is None:
            raise _NoController(f"{key.kind} {key.namespace}/{key.name} does not exist")
        refs = _controller_refs(obj)
        return _ref(refs[0], key.namespace) if refs else None
    if key.kind == _NODE_KIND:
        raise _NoController("node is not a valid owner")
    # getOwnerForScaleResource: the Scale object has no owner references (its metadata is
    # name, namespace, uid, resourceVersion and creationTimestamp only), and a kind without
    # /scale or an absent object answers NotFound; either way the chain ends here.
    return None


def _walk(
    start: ControllerRef, *, lookup: OwnerLookup, scalable_kinds: Callable[[str, str], bool]
) -> ControllerRef | None:
    key = start
    topmost = (
        key
        if _is_well_known_or_scalable(key, lookup=lookup, scalable_kinds=scalable_kinds)
        else None
    )
    visited = {key}
    for _ in range(_MAX_CHAIN):
        owner = _parent(key, lookup=lookup, scalable_kinds=scalable_kinds)
        if owner is None:
            return topmost
        if _is_well_known_or_scalable(owner, lookup=lookup, scalable_kinds=scalable_kinds):
            topmost = owner
        if owner in visited:
            raise _NoController("Cycle detected in ownership chain")
        visited.add(owner)
        key = owner
    raise _NoController("ownership chain too long")
