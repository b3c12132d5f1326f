"""One value per live key, made on first use and released with the key.

Metrics are registered once per Prometheus registry, however many objects report to it (the
plan executors of every system, the electors of every Lease): registering a second collector of
the same name raises. :class:`PerKey` keeps the one value per registry in a weak mapping, so a
registry that is dropped (a test's, a simulated run's) takes its metrics with it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["PerKey"]

K = TypeVar("K")
V = TypeVar("V")


class PerKey(Generic[K, V]):
    """``per_key(key)``: the value ``make(key)`` made for ``key`` on its first call."""

    def __init__(self, make: Callable[[K], V]) -> None:
        self._make = make
        self._values: weakref.WeakKeyDictionary[K, V] = weakref.WeakKeyDictionary()

    def __call__(self, key: K) -> V:
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = self._make(key)
        return found
