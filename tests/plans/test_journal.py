"""The plans journal: what every executor on a registry applied, told through
``observe_plans``, counted in full and kept in detail up to a bound per actor and kind.

Through the real client against the in-process API server (done, gone, refused after the
Lease is lost, dry run), then a property: however many intents, of whatever actors and kinds,
the journal holds the first ``detailed_per_kind`` of each (actor, kind) and counts them all.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.kube.client import KubeClient
from kubescale.kube.resources import PODS
from kubescale.objects.pod import Pod
from kubescale.plans.executor import observe_plans
from kubescale.plans.intents import DeleteObject, Event, Evict, Intent, ObjectRef, Resize
from kubescale.plans.journal import DETAILED_PER_KIND, JournalEntry, PlanJournal
from kubescale.sim.apiserver.server import ApiServer
from tests.plans.test_executor import ACTOR, CPU_500M, NOW, apiserver, client, executor, running

__all__ = ["apiserver", "client"]  # the fixtures, re-exported for pytest


class Clock:
    """The journal's ``elapsed``: seconds a test sets."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


async def test_every_executor_on_the_registry_reports_each_intent_and_outcome(
    apiserver: ApiServer, client: KubeClient
) -> None:
    registry = CollectorRegistry()
    clock = Clock()
    journal = PlanJournal(elapsed=clock)
    observe_plans(registry, journal)
    holding = [True]
    applying, events, _ = executor(client.gated(lambda: holding[0]), registry)
    printing, _, _ = executor(client, registry, dry_run=True, sink=lambda line: None)
    first, third = running(apiserver, "web-0"), running(apiserver, "web-2")
    second: Pod = {**first, "metadata": {**first["metadata"], "name": "web-1"}}  # never created
    try:
        await applying.execute(Evict(actor=ACTOR, pod=first, reason="below"), now=NOW)
        clock.t = 60.0
        await applying.execute(Evict(actor=ACTOR, pod=second), now=NOW)  # gone: 404
        holding[0] = False
        await applying.execute(Resize(actor=ACTOR, pod=third, patches=CPU_500M), now=NOW)
        clock.t = 120.0
        await printing.execute(
            Event(actor="other", involved=third, type="Normal", reason="R", message="m"),
            now=NOW,
        )
    finally:
        await events.close()
    assert [
        (e.time, e.actor, e.intent, e.outcome, e.object, e.reason) for e in journal.entries
    ] == [
        (0.0, ACTOR, "Evict", "done", "pods default/web-0", "below"),
        (60.0, ACTOR, "Evict", "gone", "pods default/web-1", ""),
        (60.0, ACTOR, "Resize", "refused", "pods default/web-2", ""),
        (120.0, "other", "Event", "dry-run", "Pod default/web-2", ""),
    ]
    assert journal.entries[0].describe == f"{ACTOR}: evict pods default/web-0"
    assert journal.report()["counts"] == [  # sorted by actor, kind, outcome
        {"actor": "other", "intent": "Event", "outcome": "dry-run", "count": 1},
        {"actor": ACTOR, "intent": "Evict", "outcome": "done", "count": 1},
        {"actor": ACTOR, "intent": "Evict", "outcome": "gone", "count": 1},
        {"actor": ACTOR, "intent": "Resize", "outcome": "refused", "count": 1},
    ]


def test_an_executor_on_another_registry_is_not_observed() -> None:
    observed = CollectorRegistry()
    journal = PlanJournal(elapsed=lambda: 0.0)
    observe_plans(observed, journal)
    assert journal.entries == []
    assert journal.total == 0
    with pytest.raises(ValueError, match="detailed_per_kind"):
        PlanJournal(elapsed=lambda: 0.0, detailed_per_kind=-1)


def _intent(actor: str, kind: str, n: int) -> Intent:
    target = ObjectRef(PODS, "default", f"p{n}")
    if kind == "Delete":
        return DeleteObject(actor=actor, target=target)
    pod: Pod = {"metadata": {"namespace": "default", "name": f"p{n}"}}
    return Evict(actor=actor, pod=pod, reason=f"r{n}")


_INTENTS = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["Evict", "Delete"]), st.booleans()),
    max_size=60,
)


@given(_INTENTS, st.integers(min_value=0, max_value=5))
def test_the_journal_keeps_the_first_n_of_each_kind_and_counts_all(
    intents: list[tuple[str, str, bool]], bound: int
) -> None:
    journal = PlanJournal(elapsed=lambda: 0.0, detailed_per_kind=bound)
    made = [
        (_intent(actor, kind, n), "done" if ok else "refused")
        for n, (actor, kind, ok) in enumerate(intents)
    ]
    for intent, outcome in made:
        journal(intent, outcome)
    # the first `bound` of each (actor, kind), in order
    seen: Counter[tuple[str, str]] = Counter()
    expected: list[tuple[str, str]] = []
    for intent, outcome in made:
        key = (intent.actor, type(intent).__name__)
        seen[key] += 1
        if seen[key] <= bound:
            expected.append((intent.actor, outcome))
    assert [(e.actor, e.outcome) for e in journal.entries] == expected
    assert Counter((e.actor, e.intent) for e in journal.entries) <= Counter(
        dict.fromkeys(seen, bound)
    )
    report = journal.report()
    assert report["total"] == len(made) == sum(c["count"] for c in report["counts"])
    assert report["left_out"] == len(made) - len(journal.entries)
    assert all(isinstance(e, JournalEntry) for e in journal.entries)


def test_the_default_bound() -> None:
    # a month of 500 workloads: every intent counted, at most 500 per (actor, kind) in detail
    journal = PlanJournal(elapsed=lambda: 0.0)
    for n in range(DETAILED_PER_KIND + 7):
        journal(_intent("vpa-recommender", "Delete", n), "done")
    assert DETAILED_PER_KIND == 500
    assert len(journal.entries) == 500
    assert journal.report()["left_out"] == 7
    assert journal.counts[("vpa-recommender", "DeleteObject", "done")] == 507
