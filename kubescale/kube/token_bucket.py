"""A token bucket on the caller's monotonic seconds, as ``golang.org/x/time/rate`` fills it.

client-go's token-bucket rate limiter (``flowcontrol.NewTokenBucketRateLimiter``) is a
``rate.Limiter``: it starts full (``burst`` tokens) and refills at ``qps`` tokens per second up
to ``burst``. Used by the event correlator's spam filter and by the ``/scale`` lookups (so a
burst of misses from one admission storm cannot become a storm of GETs). No clock is read here:
every call takes ``now``; a ``now`` earlier than the last one refills nothing.
"""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved; starts full."""

    def __init__(self, *, qps: float, burst: int, now: float) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last = now

    def _refill(self, now: float) -> None:
        self._tokens = min(self._burst, self._tokens + max(0.0, now - self._last) * self._qps)
        self._last = max(self._last, now)

    def try_accept(self, now: float) -> bool:
        """Take one token if one is available at ``now``."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
