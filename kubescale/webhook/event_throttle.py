"""At most one Event per VPA and message in a window, however many pods trigger it.

Every pod a ReplicaSet creates gets the same admission decision, so an Event about a VPA
(``HPAConflict``, ``LimitRangeConflict``) would otherwise be recorded once per pod: a
ReplicaSet of 1,000 pods puts 1,000 events on the recorder's queue (bounded at 1,000; the
rest would be dropped) and client-go's correlator turns them into one Event whose count is
patched 25 times before its spam filter stops it. :class:`EventThrottle` lets the first event
for a key through and drops repeats for ``window`` seconds (5 minutes: the spam filter's
refill interval), so the Event says what happened and the API server sees one write.

Bounded by size (the oldest key goes first) and by age (a key older than the window is
forgotten when next seen). The time source is injectable (monotonic seconds).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final

__all__ = ["DEFAULT_WINDOW", "MAX_KEYS", "EventThrottle"]

DEFAULT_WINDOW: Final = 300.0
MAX_KEYS: Final = 4096


class EventThrottle:
    """Decides whether an event with a given key may be recorded now."""

    def __init__(
        self,
        *,
        window: float = DEFAULT_WINDOW,
        max_keys: int = MAX_KEYS,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window
        self.max_keys = max_keys
        self._now = now
        self._last: OrderedDict[Hashable, float] = OrderedDict()
        self.suppressed = 0
        """Events dropped as repeats so far."""

    def allow(self, key: Hashable) -> bool:
        """True for the first event with ``key`` in the window (and remember it)."""
        now = self._now()
        last = self._last.get(key)
        if last is not None and now - last < self.window:
            self.suppressed += 1
            return False
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self.max_keys:
            self._last.popitem(last=False)
        return True
