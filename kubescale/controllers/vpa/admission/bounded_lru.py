"""The store every admission cache keeps its entries in: least recently used first out, bounded
by size and by age, hits and misses counted.

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
    """At most ``max_entries`` values (none when it is 0), none older than ``max_age``
    seconds by ``now``."""

    def __init__(
        self,
        *,
        max_entries: int,
        max_age: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_age = max_age
        self._now = now
        self._entries: OrderedDict[Hashable, tuple[V, float]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def discard(self, key: Hashable) -> None:
        self._remove(key)

    def clear(self) -> None:
        self._entries.clear()

    def _get(self, key: Hashable, valid: Callable[[V], bool] | None = None) -> V | None:
        """The value under ``key``, unless it is too old or ``valid`` says it is not (then it
        is removed)."""
        stored = self._entries.get(key)
        if stored is None:
            self.misses += 1
            return None
        value, stored_at = stored
        if self._now() - stored_at >= self.max_age or (valid is not None and not valid(value)):
            self._remove(key)
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return value

    def _store(self, key: Hashable, value: V) -> bool:
        """Keep ``value`` under ``key`` (the least recently used go past ``max_entries``);
        whether it is kept."""
        if self.max_entries <= 0:
            return False
        if key in self._entries:
            self._remove(key)
        self._entries[key] = (value, self._now())
        while len(self._entries) > self.max_entries:
            self._remove(next(iter(self._entries)))
        return True

    def _remove(self, key: Hashable) -> None:
        self._entries.pop(key, None)
