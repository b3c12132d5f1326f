"""Which VPA controls a pod, remembered per owner reference and checked against the informers.

Matching a pod — :func:`~kubescale.controllers.vpa.api.controller_refs.topmost_controller` walks
the owner chain through the informers, then
:func:`~kubescale.controllers.vpa.api.vpa_matching.choose_vpa` parses and matches the target's
selector for every VPA indexed under that controller — reads only:

- from the pod: its direct controller reference (apiVersion, kind, name) and namespace, and its
  labels (the selector is matched against them);
- from the informers: every controller object the walk and the selector lookup read, and the
  VPAs indexed under the top-most controller.

:class:`MatchCache` keys a match by the pod's part (:func:`match_key`) and keeps, with the answer,
the objects it read. An entry is used only if every one of those objects is still *the* object
its informer holds (identity: an informer replaces an object on every change, so this is "the
same resourceVersion" without parsing it) — or one that differs from it only in what no match
reads (:func:`match_fields`: the uid, owner references and selector are all a match reads of a
controller, so the status updates the ReplicaSet controller writes while it creates the pods of
a scale-out keep the match) — and the VPAs indexed under the controller are the same objects in
the same order. A ReplicaSet or Deployment re-owned, re-selected, deleted or re-created, and a
VPA added, changed or deleted, therefore make the very next request match again; no event
handler has to be right about it.

Only matches made entirely from informers are remembered: one that read a controller of a kind
without informer (``/scale`` lookups, whose answers arrive asynchronously), or that found an
informed controller missing, is made again every time, exactly as without this cache.
Bounded by size (least recently used first) and age, as every cache here; a namespace's entries
(which hold its controller and VPA objects) are dropped when the namespace is deleted
(:meth:`MatchCache.forget_namespace`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubescale.controllers.vpa.admission.bounded_lru import BoundedLru
from kubescale.controllers.vpa.api.controller_refs import ControllerRef, controller_owner_ref

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_MATCHES",
    "Match",
    "MatchCache",
    "OwnerRead",
    "match_cost",
    "match_fields",
    "match_key",
]

DEFAULT_MAX_MATCHES: Final = 4096
"""Matches remembered: one per controller and label set."""
DEFAULT_MAX_AGE: Final = 3600.0
"""Seconds after which a match is made again even though nothing it read changed."""
DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024
"""The matches' summed cost (:func:`match_cost`): a pod's labels are part of the key, and a pod
may carry up to 256 KiB of them."""
ENTRY_OVERHEAD: Final = 1024
"""Bytes counted per match for its fixed objects (the entry, its reads, the index)."""

OwnerRead = tuple[str, str, str, str, dict[str, Any]]
"""``(apiVersion, kind, namespace, name, object)``: one informer read of the match."""


def match_key(pod: Mapping[str, Any]) -> Hashable | None:
    """What the match reads from ``pod`` (its namespace set): the direct controller reference
    and the labels as sent; ``None`` for a pod without controller or with labels that cannot be
    a key (then the match is made every time)."""
    ref = controller_owner_ref(pod)
    if ref is None:
        return None
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    key = (ref, tuple(labels.items()) if isinstance(labels, dict) else labels)
    try:
        hash(key)
    except TypeError:
        return None
    return key


@dataclass(frozen=True, kw_only=True)
class Match:
    """One remembered match and what it was made of."""

    controller: ControllerRef | None
    vpa: dict[str, Any] | None
    reads: tuple[OwnerRead, ...]
    """Every controller object read, in order."""
    vpas: tuple[dict[str, Any], ...]
    """The VPAs indexed under ``controller`` when the match was made."""


Lookup = Callable[[str, str, str, str], dict[str, Any] | None]


class MatchCache(BoundedLru[Match]):
    """Matches by :func:`match_key`, each checked against the informers on use (module doc)."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_MATCHES,
        max_age: float = DEFAULT_MAX_AGE,
        max_bytes: int = DEFAULT_MAX_BYTES,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(max_entries=max_entries, max_age=max_age, max_bytes=max_bytes, now=now)
        self._namespace_of: dict[Hashable, str] = {}
        self._by_namespace: dict[str, set[Hashable]] = {}

    def get(
        self,
        key: Hashable,
        *,
        lookup: Lookup,
        vpas_for: Callable[[ControllerRef], Sequence[dict[str, Any]]],
    ) -> Match | None:
        """The match under ``key`` if everything it read is unchanged (``lookup`` reads the
        controllers' informers, ``vpas_for`` the VPA index)."""
        return self._get(key, lambda entry: _unchanged(entry, lookup=lookup, vpas_for=vpas_for))

    def put(
        self,
        key: Hashable,
        *,
        controller: ControllerRef | None,
        vpa: dict[str, Any] | None,
        reads: Sequence[OwnerRead],
        vpas: Sequence[dict[str, Any]],
        namespace: str = "",
    ) -> Match | None:
        """Remember a match of a pod of ``namespace``; the entry (``None`` when nothing is
        remembered)."""
        match = Match(controller=controller, vpa=vpa, reads=tuple(reads), vpas=tuple(vpas))
        if not self._store(key, match, match_cost(key)):
            return None
        self._namespace_of[key] = namespace
        self._by_namespace.setdefault(namespace, set()).add(key)
        return match

    def forget_namespace(self, namespace: str) -> None:
        """``namespace`` was deleted: drop the matches of its pods."""
        for key in list(self._by_namespace.get(namespace, ())):
            self._remove(key)

    def namespaces(self) -> set[str]:
        """The namespaces whose pods have matches here."""
        return set(self._by_namespace)

    def clear(self) -> None:
        super().clear()
        self._namespace_of.clear()
        self._by_namespace.clear()

    def _remove(self, key: Hashable) -> None:
        super()._remove(key)
        namespace = self._namespace_of.pop(key, None)
        if namespace is None:
            return
        keys = self._by_namespace.get(namespace)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_namespace[namespace]


def match_cost(key: Hashable) -> int:
    """About the bytes a match holds: its key as text (the owner reference and the labels)
    and :data:`ENTRY_OVERHEAD` (the controller and VPA objects it refers to are the
    informers')."""
    return ENTRY_OVERHEAD + len(repr(key))


def match_fields(obj: Mapping[str, Any]) -> tuple[object, ...]:
    """What a match reads of a controller object: its uid, its owner references (the walk up)
    and where its selector comes from (``spec.selector``; a CronJob's job template labels)."""
    metadata = obj.get("metadata")
    spec = obj.get("spec")
    meta = metadata if isinstance(metadata, Mapping) else {}
    body = spec if isinstance(spec, Mapping) else {}
    return (
        metadata if not isinstance(metadata, Mapping) else None,
        spec if not isinstance(spec, Mapping) else None,
        meta.get("uid"),
        meta.get("ownerReferences"),
        body.get("selector"),
        body.get("jobTemplate"),
    )


def _unchanged(
    entry: Match,
    *,
    lookup: Lookup,
    vpas_for: Callable[[ControllerRef], Sequence[dict[str, Any]]],
) -> bool:
    for api_version, kind, namespace, name, obj in entry.reads:
        found = lookup(api_version, kind, namespace, name)
        if found is not obj and (found is None or match_fields(found) != match_fields(obj)):
            return False
    if entry.controller is None:
        return True
    current = vpas_for(entry.controller)
    if len(current) != len(entry.vpas):
        return False
    return all(a is b for a, b in zip(current, entry.vpas, strict=True))
