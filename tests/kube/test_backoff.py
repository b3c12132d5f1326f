"""Backoff sequences (client-go wait.Backoff / reflector manager) and Retry-After parsing."""

from __future__ import annotations

import asyncio
import random

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.backoff import Backoff, BackoffPolicy, parse_retry_after


def test_without_jitter_doubles_up_to_the_cap() -> None:
    clock = VirtualClock()
    backoff = Backoff(
        BackoffPolicy(initial=0.8, cap=30.0, factor=2.0, jitter=0.0),
        clock=clock,
        rng=random.Random(1),
    )
    delays = [backoff.next_delay() for _ in range(8)]
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_jitter_adds_at_most_jitter_times_the_step() -> None:
    clock = VirtualClock()
    policy = BackoffPolicy(initial=1.0, cap=8.0, factor=2.0, jitter=1.0)
    backoff = Backoff(policy, clock=clock, rng=random.Random(7))
    bases = [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    for base in bases:
        delay = backoff.next_delay()
        assert base <= delay < 2 * base


def test_seeded_sequences_repeat() -> None:
    policy = BackoffPolicy()
    first = Backoff(policy, clock=VirtualClock(), rng=random.Random(3))
    second = Backoff(policy, clock=VirtualClock(), rng=random.Random(3))
    assert [first.next_delay() for _ in range(5)] == [second.next_delay() for _ in range(5)]


async def test_quiet_period_resets_the_sequence() -> None:
    clock = VirtualClock()
    policy = BackoffPolicy(initial=1.0, cap=60.0, jitter=0.0, reset_after=120.0)
    backoff = Backoff(policy, clock=clock, rng=random.Random(0))
    assert [backoff.next_delay() for _ in range(3)] == [1.0, 2.0, 4.0]
    await clock.advance(120.0)  # not more than reset_after: keeps growing
    assert backoff.next_delay() == 8.0
    await clock.advance(120.5)
    assert backoff.next_delay() == 1.0


async def test_sleep_waits_on_the_clock_and_honours_a_longer_minimum() -> None:
    clock = VirtualClock()
    backoff = Backoff(BackoffPolicy(initial=1.0, jitter=0.0), clock=clock, rng=random.Random(0))
    task = asyncio.create_task(backoff.sleep(at_least=5.0))
    await asyncio.sleep(0)
    await clock.advance(4.9)
    assert not task.done()
    await clock.advance(0.1)
    assert await task == 5.0


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("3", 3.0),
        (" 10 ", 10.0),
        ("0", 0.0),
        ("1.5", 1.5),
        ("-1", None),
        ("nan", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header) == expected


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": -1.0}, {"initial": 5.0, "cap": 1.0}, {"factor": 0.5}, {"jitter": -0.1}],
)
def test_invalid_policies_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        BackoffPolicy(**kwargs)
