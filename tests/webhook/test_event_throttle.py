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


def test_keys_past_the_window_are_swept_on_the_next_call() -> None:
    # 100 VPAs' events at t = 0 … 99 s; at t = 350 s a new event sweeps the keys recorded
    # before 350 - 300 = 50 s (t = 0 … 50: 51 keys), keeping t = 51 … 99 (49) and the new one.
    now = [0.0]
    throttle = EventThrottle(window=300.0, now=lambda: now[0])
    for second in range(100):
        now[0] = float(second)
        assert throttle.allow(("ns", f"vpa-{second}"))
    now[0] = 350.0
    assert throttle.allow(("ns", "new"))
    assert len(throttle) == 49 + 1


def test_a_deleted_namespaces_keys_are_forgotten() -> None:
    throttle = EventThrottle(window=300.0, now=lambda: 0.0)
    for key in (("a", "vpa"), ("b", "vpa"), ("a", "other")):
        assert throttle.allow(key)
    throttle.forget_namespace("a")
    assert throttle.namespaces() == {"b"}
    assert throttle.allow(("a", "vpa"))  # nothing held back any more
