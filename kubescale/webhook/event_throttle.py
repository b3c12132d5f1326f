"""At most one Event per VPA and message in a window, however many pods trigger it.

Every pod a ReplicaSet creates gets the same admission decision, so an Event about a VPA
(``HPAConflict``, ``LimitRangeConflict``) would otherwise be recorded once per pod: a
ReplicaSet of 1,000 pods puts 1,000 events on the recorder's queue (bounded at 1,000; the
rest would be dropped) and client-go's correlator turns them into one Event whose count is
patched 25 times before its spam filter stops it. :class:`EventThrottle` lets the first event
for a key through and drops repeats for ``window`` seconds (5 minutes: the spam filter's
refill interval), so the Event says what happened and the API server sees one write.

Bounded by size (the oldest key goes first) and by age (a key older than the window is
forgotten when next seen, and keys past the window are swept from the oldest end on every
call); a deleted namespace's keys go with it (:meth:`EventThrottle.forget_namespace`; keys are
tuples whose first item is the namespace). The time source is injectable (monotonic seconds).
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

    def __len__(self) -> int:
        return len(self._last)

    def namespaces(self) -> set[str]:
        """The namespaces of the keys held (tuple keys whose first item is a string)."""
        return {k[0] for k in self._last if isinstance(k, tuple) and k and isinstance(k[0], str)}

    def forget_namespace(self, namespace: str) -> None:
        """Drop the keys of ``namespace`` (tuple keys whose first item is it)."""
        for key in [k for k in self._last if isinstance(k, tuple) and k[:1] == (namespace,)]:
            del self._last[key]

    def allow(self, key: Hashable) -> bool:
        """True for the first event with ``key`` in the window (and remember it)."""
        now = self._now()
        while self._last:  # the oldest first: keys past the window are dead weight
            oldest, at = next(iter(self._last.items()))
            if now - at < self.window:
                break
            del self._last[oldest]
        last = self._last.get(key)
        if last is not None and now - last < self.window:
            self.suppressed += 1
            return False
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self.max_keys:
            self._last.popitem(last=False)
        return True
