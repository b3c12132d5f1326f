"""Client-side request rate limit: client-go's token bucket (``--kube-api-qps``, ``-burst``).

client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``: the bucket holds up to
``burst`` tokens and refills at ``qps`` tokens a second; every request takes one, waiting for it
when the bucket is empty (``Wait``), so a steady state runs at ``qps`` after a burst. Waiting
requests are served in arrival order. Time is the injected clock's.
"""

from __future__ import annotations

import asyncio

from kubescale.base.clock import Clock

__all__ = ["TokenBucket"]


class TokenBucket:
    """``qps`` requests a second on average, ``burst`` at once."""

    def __init__(self, *, qps: float, burst: int, clock: Clock) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()
        self._lock = asyncio.Lock()
        self.waited = 0.0
        """Total seconds requests have waited for a token (for tests and debugging)."""

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    async def wait(self) -> None:
        """Take one token, waiting until one is there (first come, first served)."""
        async with self._lock:
            self._refill()
            if self._tokens < 1.0:
                delay = (1.0 - self._tokens) / self.qps
                self.waited += delay
                await self._clock.sleep(delay)
                self._refill()
            self._tokens -= 1.0
