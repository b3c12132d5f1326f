"""EventThrottle: one event per key per window, bounded by size."""

from __future__ import annotations

from kubescale.webhook.event_throttle import EventThrottle


def test_repeats_within_the_window_are_dropped_and_let_through_after_it() -> None:
    now = [0.0]
    throttle = EventThrottle(window=300.0, now=lambda: now[0])
    assert throttle.allow("a")
    now[0] = 299.9
    assert not throttle.allow("a")
    assert throttle.allow("b")  # another VPA or message is not held back
    now[0] = 300.0
    assert throttle.allow("a")  # the window has passed: recorded again (the count goes up)
    assert throttle.suppressed == 1


def test_the_oldest_keys_go_first_when_full() -> None:
    throttle = EventThrottle(window=300.0, max_keys=2, now=lambda: 0.0)
    assert [throttle.allow(key) for key in ("a", "b", "c")] == [True, True, True]
    assert throttle.allow("a")  # forgotten: "c" pushed it out
    assert not throttle.allow("c")
