"""The updater's eviction rate limit: a token bucket driven by the caller's ``now``.

Upstream (``pkg/updater/logic/updater.go getRateLimiter``) builds a ``golang.org/x/time/rate``
limiter from ``--eviction-rate-limit`` (tokens per second) and ``--eviction-rate-burst``; a limit
``<= 0`` means ``rate.Inf`` (no limit). The bucket starts full (``burst`` tokens) and refills at
``rate`` tokens per second up to ``burst``. A positive rate with ``burst < 1`` never grants a token
(``Wait`` fails with "exceeds limiter's burst"). In-place resizes use a second limiter with the
same settings.

No clock is read here: every call takes ``now``; a ``now`` earlier than the last one refills
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

DEFAULT_EVICTION_RATE_LIMIT = -1.0
DEFAULT_EVICTION_RATE_BURST = 1


@dataclass
class EvictionRateLimiter:
    """A token bucket; :meth:`try_acquire` takes one token when one is available at ``now``."""

    rate: float = DEFAULT_EVICTION_RATE_LIMIT
    burst: int = DEFAULT_EVICTION_RATE_BURST
    _tokens: float = field(default=0.0, init=False)
    _last: datetime | None = field(default=None, init=False)

    @property
    def disabled(self) -> bool:
        """``--eviction-rate-limit <= 0``: every request is granted."""
        return self.rate <= 0

    def _refill(self, now: datetime) -> None:
        if self._last is None:
            self._tokens = float(self.burst)
            self._last = now
            return
        elapsed = (now - self._last).total_seconds()
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
            self._last = now

    def try_acquire(self, now: datetime) -> bool:
        """Take one token if available at ``now``."""
        if self.disabled:
            return True
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait_time(self, now: datetime) -> timedelta | None:
        """How long until a token is available (zero if now); ``None`` if it never will be."""
        if self.disabled:
            return timedelta(0)
        if self.burst < 1:
            return None
        self._refill(now)
        missing = 1.0 - self._tokens
        if missing <= 0:
            return timedelta(0)
        return timedelta(seconds=missing / self.rate)
