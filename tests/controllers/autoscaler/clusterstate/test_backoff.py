"""Node group backoff (reference §2.6): 5m first, doubled after expiry, capped at 30m, same
duration while still backed off, forgotten 3h after the last failure."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    InstanceErrorInfo,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from tests.controllers.autoscaler.builders import NOW

ERROR = InstanceErrorInfo(error_class=ErrorClass.OTHER, code="timeout", message="timed out")


def make() -> ExponentialBackoff:
    return ExponentialBackoff(
        initial=timedelta(minutes=5),
        maximum=timedelta(minutes=30),
        reset_timeout=timedelta(hours=3),
    )


def test_durations_follow_upstreams_rules() -> None:
    backoff = make()
    # failure at 0: 5m → until 0+5
    assert backoff.backoff("g", ERROR, NOW) == NOW + timedelta(minutes=5)
    # failure at 2m while still backed off: same 5m → until 2+5 = 7
    assert backoff.backoff("g", ERROR, NOW + timedelta(minutes=2)) == NOW + timedelta(minutes=7)
    # failure at 10m, after expiry (7 < 10): doubled 10m → until 20
    assert backoff.backoff("g", ERROR, NOW + timedelta(minutes=10)) == NOW + timedelta(minutes=20)
    # at 25m: 20m → until 45
    assert backoff.backoff("g", ERROR, NOW + timedelta(minutes=25)) == NOW + timedelta(minutes=45)
    # at 50m: 40m capped at 30m → until 80
    assert backoff.backoff("g", ERROR, NOW + timedelta(minutes=50)) == NOW + timedelta(minutes=80)


def test_status_until_inclusive() -> None:
    backoff = make()
    backoff.backoff("g", ERROR, NOW)
    # backed off while until (NOW+5m) is not before now: inclusive at until
    assert backoff.status("g", NOW + timedelta(minutes=5)) is not None
    assert backoff.status("g", NOW + timedelta(minutes=5, seconds=1)) is None
    assert backoff.status("other", NOW) is None


def test_entries_are_forgotten_after_the_reset_timeout() -> None:
    backoff = make()
    backoff.backoff("g", ERROR, NOW)
    backoff.remove_stale(NOW + timedelta(hours=3))  # last failure + 3h is not before now
    assert backoff.entry("g") is not None
    backoff.remove_stale(NOW + timedelta(hours=3, seconds=1))
    assert backoff.entry("g") is None
    # the next failure starts at the initial duration again
    later = NOW + timedelta(hours=4)
    assert backoff.backoff("g", ERROR, later) == later + timedelta(minutes=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=120), min_size=1, max_size=20))
def test_duration_always_within_bounds(gaps: list[int]) -> None:
    """Property: every backoff lasts between the initial and the maximum duration, and never
    shrinks without a reset."""
    backoff = make()
    moment = NOW
    previous = timedelta(0)
    for gap in gaps:
        moment += timedelta(minutes=gap)
        until = backoff.backoff("g", ERROR, moment)
        duration = until - moment
        assert timedelta(minutes=5) <= duration <= timedelta(minutes=30)
        assert duration >= previous
        previous = duration
