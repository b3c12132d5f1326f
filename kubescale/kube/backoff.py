"""Jittered, capped exponential backoff on the injected clock.

Mirrors client-go's ``wait.Backoff`` as the reflector uses it
(``NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)``): each step returns the current
duration with up to ``jitter`` × itself added at random (``wait.Jitter``), then multiplies the
duration by ``factor`` up to ``cap``; when no step was taken for ``reset_after`` seconds the next
one starts from ``initial`` again. Sleeps go through the :class:`~kubescale.base.clock.Clock`,
jitter through an injectable :class:`random.Random`, so tests run it on a virtual clock with a seed.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from kubescale.base.clock import Clock


@dataclass(frozen=True, kw_only=True)
class BackoffPolicy:
    """Shape of a backoff sequence (defaults: client-go's reflector)."""

    initial: float = 0.8
    """First delay, seconds."""
    cap: float = 30.0
    """Largest un-jittered delay, seconds."""
    factor: float = 2.0
    jitter: float = 1.0
    """Up to ``jitter`` × delay is added at random (client-go ``wait.Jitter``)."""
    reset_after: float = 120.0
    """Seconds without a step after which the sequence starts over from ``initial``."""

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < self.initial:
            raise ValueError("backoff needs 0 <= initial <= cap")
        if self.factor < 1.0 or self.jitter < 0:
            raise ValueError("backoff needs factor >= 1 and jitter >= 0")


class Backoff:
    """One running backoff sequence (one per retry loop, not shared)."""

    def __init__(self, policy: BackoffPolicy, *, clock: Clock, rng: random.Random) -> None:
        self.policy = policy
        self._clock = clock
        self._rng = rng
        self._duration = policy.initial
        self._last_step: float | None = None

    def next_delay(self) -> float:
        """The next delay in seconds; advances the sequence."""
        now = self._clock.monotonic()
        if self._last_step is not None and now - self._last_step > self.policy.reset_after:
            self._duration = self.policy.initial
        self._last_step = now
        duration = self._duration
        self._duration = min(self._duration * self.policy.factor, self.policy.cap)
        if self.policy.jitter > 0:
            duration += self._rng.random() * self.policy.jitter * duration
        return duration

    def reset(self) -> None:
        """Start over from ``initial`` (after a success)."""
        self._duration = self.policy.initial
        self._last_step = None

    async def sleep(self, *, at_least: float = 0.0) -> float:
        """Sleep the next delay, or ``at_least`` (a server's Retry-After) if that is longer."""
        delay = max(self.next_delay(), at_least)
        await self._clock.sleep(delay)
        return delay


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header; kube-apiserver sends whole seconds.

    An HTTP-date (allowed by RFC 9110 but never sent by the API server) or a malformed value
    gives ``None``, as client-go's ``checkWait`` ignores what it cannot parse as an integer.
    """
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds
