"""The store every admission cache keeps its entries in: least recently used first out, bounded
by count, by bytes and by age, hits and misses counted.

A count alone does not bound memory: the keys and values come from request bodies, and one
entry can be a thousand times another (issue 27, item 14: 100,000 fuzzed reviews, RSS 100 →
283 MB with every cache "bounded"). Each entry is stored with its cost (an estimate of the bytes
it holds, computed by the cache from the text it keeps) and the total is kept under
``max_bytes``: the least recently used entries go first, and an entry costing more than the
whole budget is not stored.

The caches add their own rules on top: the match cache checks an entry against the informers
before it is used (:mod:`.match_cache`); the decision and answer caches index their entries by
VPA and namespace so that the informers' event handlers can drop them (:mod:`.decision_cache`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["BoundedLru"]

V = TypeVar("V")


class BoundedLru(Generic[V]):
    """At most ``max_entries`` values (none when it is 0) costing at most ``max_bytes`` in
    all, none older than ``max_age`` seconds by ``now``."""

    def __init__(
        self,
        *,
        max_entries: int,
        max_age: float,
        max_bytes: int,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_age = max_age
        self.max_bytes = max_bytes
        self._now = now
        self._entries: OrderedDict[Hashable, tuple[V, float, int]] = OrderedDict()
        self.bytes = 0
        """The summed cost of the entries held."""
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def discard(self, key: Hashable) -> None:
        self._remove(key)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def _get(self, key: Hashable, valid: Callable[[V], bool] | None = None) -> V | None:
        """The value under ``key``, unless it is too old or ``valid`` says it is not (then it
        is removed)."""
        stored = self._entries.get(key)
        if stored is None:
            self.misses += 1
            return None
        value, stored_at, _ = stored
        if self._now() - stored_at >= self.max_age or (valid is not None and not valid(value)):
            self._remove(key)
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return value

    def _store(self, key: Hashable, value: V, cost: int) -> bool:
        """Keep ``value``, costing ``cost`` bytes, under ``key`` (the least recently used go
        past ``max_entries`` or ``max_bytes``); whether it is kept."""
        if key in self._entries:
            self._remove(key)
        if self.max_entries <= 0 or cost > self.max_bytes:
            return False
        self._entries[key] = (value, self._now(), cost)
        self.bytes += cost
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))
        return True

    def _remove(self, key: Hashable) -> None:
        stored = self._entries.pop(key, None)
        if stored is not None:
            self.bytes -= stored[2]
