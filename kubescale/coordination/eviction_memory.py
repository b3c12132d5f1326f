"""Which node each workload's pods were recently evicted from (upstream issue #626's proposal).

The descheduler records every pod it evicts under its *owner* — the controller ownerReference
(or, without one, the first ownerReference): namespace, kind and name — and the node it ran on.
The scheduler extender then refuses that node to the owner's pods until ``duration`` has passed:
the replacement pod of an evicted pod cannot land right back (#994, #655).

Bounded by age (``duration``) and by size (``max_entries``; beyond it the oldest entries go).
Pods without ownerReferences are not remembered: their replacement, if any, is a new object the
memory cannot tie to them. Time is passed in (no clock is read here).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Protocol

from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta

__all__ = ["DEFAULT_MAX_ENTRIES", "EvictionMemory", "EvictionRecorder", "OwnerKey", "owner_key"]

DEFAULT_MAX_ENTRIES: Final = 10_000

OwnerKey = tuple[str, str, str]
"""``(namespace, kind, name)`` of a pod's owner."""


def owner_key(pod: Pod) -> OwnerKey | None:
    """The pod's controller ownerReference (else its first one) as an :data:`OwnerKey`."""
    meta = Meta(pod).raw
    refs = list(meta.get("ownerReferences") or ())
    if not refs:
        return None
    chosen = next((r for r in refs if r.get("controller") is True), refs[0])
    return (
        str(meta.get("namespace", "")),
        str(chosen.get("kind", "")),
        str(chosen.get("name", "")),
    )


class EvictionRecorder(Protocol):
    """Where the descheduler records its evictions (an :class:`EvictionMemory`, or the
    process's :class:`~.descheduling_board.DeschedulingBoard`)."""

    def record(self, pod: Pod, node: str, now: datetime) -> None: ...


@dataclass(frozen=True)
class Remembered:
    node: str
    owner: OwnerKey
    evicted_at: datetime

    def describe(self) -> str:
        """The reason given to the scheduler (the reference's sample answer)."""
        return f"recently descheduled {self.owner[1]}/{self.owner[2]} from {self.node}"


class EvictionMemory:
    """(owner, node) → last eviction time, bounded by age and size (module docstring)."""

    def __init__(self, *, duration: timedelta, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.duration = duration
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[OwnerKey, str], datetime] = OrderedDict()
        self._by_owner: dict[OwnerKey, dict[str, datetime]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def record(self, pod: Pod, node: str, now: datetime) -> None:
        """Remember that ``pod`` was evicted from ``node`` at ``now``."""
        owner = owner_key(pod)
        if owner is None or not node:
            return
        key = (owner, node)
        self._entries.pop(key, None)
        self._entries[key] = now
        self._by_owner.setdefault(owner, {})[node] = now
        self._expire(now)
        while len(self._entries) > self.max_entries:
            self._forget(*self._entries.popitem(last=False)[0])

    def _forget(self, owner: OwnerKey, node: str) -> None:
        nodes = self._by_owner.get(owner)
        if nodes is not None:
            nodes.pop(node, None)
            if not nodes:
                del self._by_owner[owner]

    def _expire(self, now: datetime) -> None:
        horizon = now - self.duration
        while self._entries:
            key, when = next(iter(self._entries.items()))
            if when > horizon:
                break
            del self._entries[key]
            self._forget(*key)

    def refused_nodes(self, pod: Pod, now: datetime) -> dict[str, Remembered]:
        """Node → why, for the nodes ``pod``'s owner was evicted from within ``duration``."""
        owner = owner_key(pod)
        if owner is None or not self._entries:
            return {}
        self._expire(now)
        return {
            node: Remembered(node=node, owner=owner, evicted_at=when)
            for node, when in self._by_owner.get(owner, {}).items()
        }
