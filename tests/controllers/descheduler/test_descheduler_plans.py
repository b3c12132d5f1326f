"""The descheduler's decision as plans: a cycle in, its intents out, each answered as a table
row says — no API server; and ``--dry-run`` through the real loop.

Nodes n1 (tainted ``NoSchedule``) and n2; pods a, b, c of ReplicaSet ``web`` on n1, none
tolerating the taint. RemovePodsViolatingNodeTaints (upstream's rules, reference §2) asks to
evict each, in order, while ``maxNoOfPodsToEvictPerNode`` allows: the limit counts evictions
*done* — a refused one (429, a PodDisruptionBudget) does not count, one whose outcome is unknown
(504: maybe committed) does. A done eviction brings a Normal event (reason = the strategy); a
refused one a Warning ``EvictionFailed`` only with ``evictionFailureEventNotification``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from kubescale.controllers.descheduler.descheduler_decision import CycleDecision
from kubescale.controllers.descheduler.descheduling_cycle import descheduling_cycle
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.kube.errors import KubeApiError
from kubescale.plans.executor import DRY_RUN_PREFIX, Applied, Decision, collect_plan
from kubescale.plans.intents import Event, Evict, Intent
from kubescale.sim.apiserver.faults import WRITE_VERBS

from .builders import NOW, cycle_node, cycle_pod, policy, view
from .test_descheduler_loop import Setup, cluster, make_loop, run, setup, terminating

__all__ = ["setup"]  # the fixture, re-exported for pytest

STRATEGY = "RemovePodsViolatingNodeTaints"
TAINT = {"key": "bad", "effect": "NoSchedule"}
NODES = [cycle_node("n1", taints=[TAINT]), cycle_node("n2")]
PODS = [cycle_pod(name, "n1") for name in ("a", "b", "c")]
DONE = WriteOutcome.DONE


def answer(outcome: WriteOutcome) -> Applied:
    error = {
        WriteOutcome.DONE: None,
        WriteOutcome.REFUSED: KubeApiError(code=429, reason="TooManyRequests", message="budget"),
        WriteOutcome.UNKNOWN: KubeApiError(code=504, reason="Timeout", message="deadline"),
    }[outcome]
    return Applied(WriteResult(outcome, error))


def drive(decision: Decision[Any], outcomes: Mapping[str, WriteOutcome]) -> list[Intent]:
    """Run ``decision``, answering each eviction of pod ``name`` with ``outcomes[name]`` (done
    by default) and every event done."""

    def reply(intent: Intent) -> Applied:
        name = intent.target.name if isinstance(intent, Evict) else ""
        return answer(outcomes.get(name, DONE))

    plan, _ = collect_plan(decision, reply)
    return plan


def summary(plan: list[Intent]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for intent in plan:
        if isinstance(intent, Evict):
            rows.append(("evict", intent.target.name))
        else:
            assert isinstance(intent, Event)
            name = str(intent.involved["metadata"]["name"])
            rows.append(("event", name, intent.type, intent.reason))
    return rows


CASES: list[tuple[str, dict[str, Any], dict[str, WriteOutcome], list[tuple[str, ...]]]] = [
    (
        # limit 2 per node: a done (1), b done (2), c not asked.
        "limit two",
        {"maxNoOfPodsToEvictPerNode": 2},
        {},
        [
            ("evict", "a"),
            ("event", "a", "Normal", STRATEGY),
            ("evict", "b"),
            ("event", "b", "Normal", STRATEGY),
        ],
    ),
    (
        # a refused (429): not counted, no event; b done (1), c done (2).
        "a refused",
        {"maxNoOfPodsToEvictPerNode": 2},
        {"a": WriteOutcome.REFUSED},
        [
            ("evict", "a"),
            ("evict", "b"),
            ("event", "b", "Normal", STRATEGY),
            ("evict", "c"),
            ("event", "c", "Normal", STRATEGY),
        ],
    ),
    (
        # The same with evictionFailureEventNotification: a Warning EvictionFailed on a.
        "a refused, notified",
        {"maxNoOfPodsToEvictPerNode": 2, "evictionFailureEventNotification": True},
        {"a": WriteOutcome.REFUSED},
        [
            ("evict", "a"),
            ("event", "a", "Warning", "EvictionFailed"),
            ("evict", "b"),
            ("event", "b", "Normal", STRATEGY),
            ("evict", "c"),
            ("event", "c", "Normal", STRATEGY),
        ],
    ),
    (
        # a unknown (504): counted as done (1) with its event; b done (2); c not asked.
        "a unknown",
        {"maxNoOfPodsToEvictPerNode": 2},
        {"a": WriteOutcome.UNKNOWN},
        [
            ("evict", "a"),
            ("event", "a", "Normal", STRATEGY),
            ("evict", "b"),
            ("event", "b", "Normal", STRATEGY),
        ],
    ),
    (
        # No limit: all three.
        "unlimited",
        {},
        {},
        [row for name in "abc" for row in (("evict", name), ("event", name, "Normal", STRATEGY))],
    ),
]


@pytest.mark.parametrize(
    ("top", "outcomes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_the_plan_for_a_cycle(
    top: dict[str, Any], outcomes: dict[str, WriteOutcome], expected: list[tuple[str, ...]]
) -> None:
    the_policy = policy(("deschedule", STRATEGY, None), **top)
    memory = EvictionMemory(duration=timedelta(minutes=10))
    decision = CycleDecision(policy=the_policy, memory=memory)
    cycle = descheduling_cycle(policy=the_policy, view=view(NODES, PODS, the_policy=the_policy))
    plan = drive(decision.decide(cycle, NOW), outcomes)
    assert summary(plan) == expected
    # The eviction memory the extender reads: (ReplicaSet web, n1), once one eviction counted.
    assert len(memory) == 1
    # Every eviction carries upstream's annotations and the policy's grace period (unset).
    for intent in plan:
        if isinstance(intent, Evict):
            assert intent.annotations is not None
            assert intent.annotations["requested-by"] == "kubescale-descheduler"
            assert intent.annotations["reason"].startswith(f"triggered by default/{STRATEGY}")
            assert intent.grace_period_seconds is None
            # the decision's reason (the plans journal's): the profile and strategy, as the
            # annotation says it
            assert intent.reason == intent.annotations["reason"]


async def test_dry_run_prints_the_plan_and_writes_nothing(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    """``test_descheduler_loop``'s cluster with ``--dry-run``: the three evictions the cycle
    asks for are printed, one line each; not one write request reaches the API server."""
    cluster(setup.api)
    the_policy = policy(("deschedule", STRATEGY, None))
    made = await make_loop(setup, the_policy, dry_run=True)
    try:
        caplog.set_level(logging.INFO, logger="kubescale.plans")
        caplog.clear()
        setup.api.requests.clear()
        await run(setup, made)
        written = {r: n for r, n in setup.api.requests.counts().items() if r.verb in WRITE_VERBS}
        assert written == {}
        assert terminating(setup.api) == []
        printed = [r.getMessage() for r in caplog.records if r.name == "kubescale.plans"]
        assert [line.split(" annotations=")[0] for line in printed] == [
            f"{DRY_RUN_PREFIX}descheduler: evict pods default/{name}"
            for name in ("api-0", "web-0", "web-1")
        ]
        assert all('"requested-by":"kubescale-descheduler"' in line for line in printed)
    finally:
        await made.events.close()
        await made.informers.stop()
