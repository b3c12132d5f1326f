"""Token bucket semantics of ``--eviction-rate-limit`` / ``--eviction-rate-burst`` (x/time/rate)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubescale.controllers.vpa.updater.eviction_rate_limit import EvictionRateLimiter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("rate", [-1.0, 0.0])
def test_non_positive_rate_disables_limit(rate: float) -> None:
    limiter = EvictionRateLimiter(rate=rate, burst=1)
    assert limiter.disabled
    assert all(limiter.try_acquire(T0) for _ in range(100))
    assert limiter.wait_time(T0) == timedelta(0)


def test_default_flags_are_disabled() -> None:
    assert EvictionRateLimiter().disabled


@pytest.mark.parametrize(
    ("rate", "burst", "schedule", "expected"),
    [
        # Starts full: `burst` immediate grants, then one per 1/rate seconds.
        (1.0, 1, [0.0, 0.0, 0.5, 1.0, 1.5, 2.0], [True, False, False, True, False, True]),
        (1.0, 3, [0.0, 0.0, 0.0, 0.0], [True, True, True, False]),
        # Refill never exceeds burst: after a long pause only `burst` tokens.
        (2.0, 2, [0.0, 0.0, 100.0, 100.0, 100.0], [True, True, True, True, False]),
        (0.1, 1, [0.0, 5.0, 9.9, 10.0], [True, False, False, True]),
        # Positive rate with burst 0 never grants (x/time/rate: exceeds limiter's burst).
        (5.0, 0, [0.0, 10.0], [False, False]),
    ],
)
def test_token_bucket(rate: float, burst: int, schedule: list[float], expected: list[bool]) -> None:
    limiter = EvictionRateLimiter(rate=rate, burst=burst)
    got = [limiter.try_acquire(T0 + timedelta(seconds=s)) for s in schedule]
    assert got == expected


def test_wait_time() -> None:
    limiter = EvictionRateLimiter(rate=0.5, burst=1)
    assert limiter.wait_time(T0) == timedelta(0)
    assert limiter.try_acquire(T0)
    assert limiter.wait_time(T0) == timedelta(seconds=2)
    assert limiter.wait_time(T0 + timedelta(seconds=1.5)) == timedelta(seconds=0.5)
    assert EvictionRateLimiter(rate=1.0, burst=0).wait_time(T0) is None


def test_clock_going_backwards_refills_nothing() -> None:
    limiter = EvictionRateLimiter(rate=1.0, burst=1)
    assert limiter.try_acquire(T0 + timedelta(seconds=10))
    assert not limiter.try_acquire(T0)
    assert not limiter.try_acquire(T0 + timedelta(seconds=10.5))
    assert limiter.try_acquire(T0 + timedelta(seconds=11))
