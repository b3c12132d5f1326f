"""The cyclic garbage collector while caches fill from LISTs (issue 29).

An informer's LIST allocates its whole collection at once — tens of thousands of dicts and
lists per page that live as long as the process, none of them in a reference cycle. CPython
runs a young-generation collection every 700 net container allocations and a full one whenever
the objects promoted since the last grow by a quarter of the heap, so filling a cache makes the
collector traverse the growing cache again and again: measured with ``bench/informer_sync.py``
(10,000 pods, every collection ``serve`` watches), 1.7 of the client's 3.2 CPU-s to sync were
spent in 1,228 collections.

:func:`bulk_allocation` raises the young generation's threshold to :data:`BULK_THRESHOLD` while
at least one holder is inside it (informers list concurrently: the threshold is restored when
the last one leaves, on success, failure or cancellation alike). The collector still runs —
cyclic garbage made meanwhile (aiohttp's, asyncio's) is still freed, only in fewer, larger
collections — and nothing is frozen or untracked, so no object's lifetime changes. The older
generations' thresholds are left as they are. Whatever threshold the process had set is the one
restored (a ``gc.set_threshold`` by the holder meanwhile is overwritten on the last exit).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Final

__all__ = ["BULK_THRESHOLD", "bulk_allocation"]

BULK_THRESHOLD: Final = 50_000
"""Young-generation threshold while a bulk allocation is under way (CPython's default: 700).
At ~100 bytes a container, at most ~5 MB of young objects wait for a collection."""


class _Holders:
    """The process's holders (the collector is one per process) and the threshold to restore."""

    count = 0
    saved: tuple[int, ...] = ()


@contextlib.contextmanager
def bulk_allocation() -> Iterator[None]:
    """Collect less often inside the block (module docstring); re-entrant and shared."""
    if _Holders.count == 0:
        _Holders.saved = saved = gc.get_threshold()
        if saved[0] != 0:  # 0: automatic collection disabled by the process; leave it so
            gc.set_threshold(max(saved[0], BULK_THRESHOLD), *saved[1:])
    _Holders.count += 1
    try:
        yield
    finally:
        _Holders.count -= 1
        if _Holders.count == 0:
            gc.set_threshold(*_Holders.saved)
