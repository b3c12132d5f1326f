"""The decision log (kubescale/sim/scenario/decision_log.py) reads why the VPA updater evicted
or resized a pod from the run's plans journal (the report's ``plans``), by table: the recorded
reason, not one worked out again from requests and bands."""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.sim.scenario.decision_log import decisions

BELOW = "app memory request 128.0Mi below the lower bound 200.0Mi (target 256.0Mi)"


def _entry(
    time: float, intent: str, pod: str, reason: str, outcome: str = "done"
) -> dict[str, Any]:
    return {
        "time": time,
        "actor": "vpa-updater",
        "intent": intent,
        "outcome": outcome,
        "object": f"pods {pod}",
        "describe": f"vpa-updater: {intent.lower()} pods {pod}",
        "reason": reason,
    }


def _report(events: list[tuple[float, str, str]], plans: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "events": [
            {"time": time, "kind": kind, "subject": subject, "detail": "evicted by VPA"}
            for time, kind, subject in events
        ],
        "plans": plans,
    }


def _plans(*entries: dict[str, Any], left_out: int = 0) -> dict[str, Any]:
    return {"detailed_per_kind": 500, "total": len(entries) + left_out, "left_out": left_out,
            "counts": [], "entries": list(entries)}  # fmt: skip


STARTED = (0.0, "pod-started", "shop/web-0")


@pytest.mark.parametrize(
    ("events", "plans", "why"),
    [
        # the reason the updater's decision gave the Evict intent at that time
        ([STARTED, (60.0, "vpa-eviction", "shop/web-0")],
         _plans(_entry(60.0, "Evict", "shop/web-0", BELOW)), BELOW),
        # an earlier refused attempt on the same pod is not the one the event shows
        ([STARTED, (120.0, "vpa-eviction", "shop/web-0")],
         _plans(_entry(60.0, "Evict", "shop/web-0", "old", outcome="refused"),
                _entry(120.0, "Evict", "shop/web-0", BELOW)), BELOW),
        # a later intent on the same pod does not explain an earlier event
        ([STARTED, (60.0, "vpa-eviction", "shop/web-0")],
         _plans(_entry(60.0, "Evict", "shop/web-0", BELOW),
                _entry(180.0, "Evict", "shop/web-0", "later")), BELOW),
        # an in-place resize: its Resize intent's reason
        ([STARTED, (60.0, "vpa-in-place-resize", "shop/web-0")],
         _plans(_entry(60.0, "Resize", "shop/web-0", BELOW)), BELOW),
        # a pod that never started: said so, then the recorded reason
        ([(60.0, "vpa-eviction", "shop/web-0")],
         _plans(_entry(60.0, "Evict", "shop/web-0", BELOW)),
         "had not started (Pending with the requests it was created with): re-created with the "
         f"VPA's requests, no disruption; {BELOW}"),
        # beyond the journal's detailed entries: no reason made up
        ([STARTED, (60.0, "vpa-eviction", "shop/web-0")], _plans(left_out=3),
         "reason not recorded: the plans journal keeps the first 500 of each kind in detail"),
        # only a refused attempt recorded (the journal not full): that is not the eviction
        ([STARTED, (60.0, "vpa-eviction", "shop/web-0")],
         _plans(_entry(60.0, "Evict", "shop/web-0", BELOW, outcome="refused")),
         "reason not recorded by the decision"),
        # a report without a journal
        ([STARTED, (60.0, "vpa-eviction", "shop/web-0")], None,
         "reason not recorded: the report has no plans journal"),
    ],
)  # fmt: skip
def test_a_vpa_decision_reads_its_reason_from_the_journal(
    events: list[tuple[float, str, str]], plans: dict[str, Any] | None, why: str
) -> None:
    (decision,) = decisions(_report(events, plans))
    assert decision.why == why
    assert decision.subject == "shop/web-0"
