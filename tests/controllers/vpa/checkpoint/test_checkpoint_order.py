"""The checkpoint pass writes in one order, whatever the order of events and answers (issue 30).

Upstream's ``getVpasToCheckpoint`` (``checkpoint_writer.go``) sorts the VPAs by
``CheckpointWritten``, oldest first; ties (upstream's unstable ``sort.Slice`` leaves them
arbitrary) are broken by namespace/name, and a VPA's containers are written by name. A
simulated run must give the same report on any event loop, so neither the order in which the
objects' events reached the recommender's caches nor the order in which the API server answers
its concurrent writes may change the order of the writes issued or of the plan journal.

* A property over the pass alone: VPAs (1–3 containers, last checkpointed at one of three
  moments, in two namespaces) added to the model in any order, driven by 1–8 writers whose
  writes are answered in any order: the writes are issued in upstream's order.
* Through the recommender loop and its executor against the in-process API server, on
  asyncio's loop and on uvloop: the VPAs created in shuffled orders, each checkpoint PATCH held
  by the server and the newest one answered first: the loop's plan journal lists the writes
  in upstream's order.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.checkpoint.checkpoint_store import CheckpointPass
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.kube.resources import VPA_CHECKPOINTS
from kubescale.objects.selectors import label_selector_from_set
from kubescale.objects.views import spec_of
from kubescale.plans.executor import Applied, Decision, observe_plans
from kubescale.plans.intents import Intent, PatchOrCreate
from kubescale.plans.journal import PlanJournal
from kubescale.sim.apiserver.request_log import RequestRecord
from tests.builders.vpas import target_ref, typed_vpa
from tests.controllers.vpa.checkpoint.test_checkpoint_store import _FixedClock
from tests.controllers.vpa.recommender.test_recommender_loop import START, Cluster, cluster

__all__ = ["cluster"]  # the fixture, re-exported for pytest

BOTH_EVENT_LOOPS = True
"""The async tests run under asyncio's loop and under uvloop (``conftest.py``)."""

CONTAINERS = ("app", "log", "sidecar")

# -- the pass alone: issue order under any event order, writer count and answer order -----------

VpaRow = tuple[str, str, int, int]
"""namespace, VPA name, containers (1-3), minute of its last checkpoint (0-2)."""


def _state(rows: list[VpaRow]) -> ClusterState:
    """The model fed ``rows`` in their order: each VPA, then its one pod (a sample per
    container), then its "checkpoint written" time."""
    state = ClusterState(config=RecommenderConfig())
    for namespace, name, containers, _ in rows:
        labels = {"app": name}
        state.add_or_update_vpa(
            typed_vpa(name=name, namespace=namespace, target=target_ref(name=name)),
            selector=label_selector_from_set(labels),
        )
        state.add_or_update_pod(
            namespace=namespace,
            name=f"{name}-0",
            labels=labels,
            phase="Running",
            containers={c: {"cpu": 100, "memory": 10**8} for c in CONTAINERS[:containers]},
            now=START,
        )
        for container in CONTAINERS[:containers]:
            state.add_sample(
                namespace=namespace,
                pod=f"{name}-0",
                container=container,
                resource="cpu",
                usage=200,
                request=0,
                measure_start=START,
            )
    for namespace, name, _, minute in rows:
        state.mark_checkpoint_written(
            namespace=namespace, name=name, now=START + timedelta(minutes=minute)
        )
    return state


def _expected(rows: list[VpaRow]) -> list[tuple[str, str, str]]:
    """Upstream's order: oldest checkpoint first, then namespace/name; containers by name."""
    return [
        (namespace, name, container)
        for _, namespace, name, containers in sorted(
            (minute, namespace, name, containers) for namespace, name, containers, minute in rows
        )
        for container in sorted(CONTAINERS[:containers])
    ]


def _issued(pass_: CheckpointPass, writers: int, answer_picks: list[int]) -> list[Intent]:
    """Drive ``writers`` workers of ``pass_`` as the executor's concurrent writers would, each
    write answered (done) in the order ``answer_picks`` chooses among those in flight (an
    index modulo their number; the oldest when the picks run out); the intents in the order
    they were issued."""
    issued: list[Intent] = []
    in_flight: list[tuple[Decision[None], Intent]] = []
    for _ in range(writers):
        worker = pass_.work()
        try:
            intent = next(worker)
        except StopIteration:
            continue
        issued.append(intent)
        in_flight.append((worker, intent))
    picks = iter(answer_picks)
    done = Applied(WriteResult(WriteOutcome.DONE))
    while in_flight:
        worker, _ = in_flight.pop(next(picks, 0) % len(in_flight))
        try:
            intent = worker.send(done)
        except StopIteration:
            continue
        issued.append(intent)
        in_flight.append((worker, intent))
    return issued


def _write_of(intent: Intent) -> tuple[str, str, str]:
    assert isinstance(intent, PatchOrCreate)
    body = spec_of(intent.body)
    return (intent.target.namespace or "", body["vpaObjectName"], body["containerName"])


_rows = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from([f"v{index}" for index in range(6)]),
        st.integers(1, 3),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda row: (row[0], row[1]),
)


@settings(deadline=None)
@given(
    rows=_rows,
    seed=st.randoms(use_true_random=False),
    writers=st.integers(1, 8),
    answer_picks=st.lists(st.integers(0, 7), max_size=30),
)
def test_writes_are_issued_in_upstream_order_whatever_the_event_and_answer_order(
    rows: list[VpaRow], seed: random.Random, writers: int, answer_picks: list[int]
) -> None:
    shuffled = list(rows)
    seed.shuffle(shuffled)  # the order the events reached the recommender's caches
    pass_ = CheckpointPass.start(
        _state(shuffled), now=START + timedelta(minutes=5), clock=_FixedClock(), deadline=1.0
    )
    issued = _issued(pass_, writers, answer_picks)
    assert [_write_of(intent) for intent in issued] == _expected(rows)
    result = pass_.result()
    assert (result.written, result.failed) == (len(issued), 0)


# -- through the loop's executor: the plan journal against the real API server ------------------

VPAS = ("a", "b", "c")
WRITES = [f"verticalpodautoscalercheckpoints shop/{v}-{c}" for v in VPAS for c in ("app", "log")]
"""Upstream's order: a, b and c tie (written by the same pass), so by name; containers by
name."""


@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "a", "b"), ("b", "c", "a")])
async def test_the_journal_follows_upstream_order_whatever_the_answer_order(
    cluster: Cluster, order: tuple[str, str, str]
) -> None:
    cluster.deployment("web")
    cluster.pod("web-1", labels={"app": "web"}, containers={"app": {}, "log": {}})
    cluster.usage("web-1", {c: {"cpu": "100m", "memory": "100Mi"} for c in ("app", "log")})
    for name in order:  # the VPAs' events reach the recommender in this order
        cluster.vpa(name, spec={"resourcePolicy": {"containerPolicies": []}})
    registry = CollectorRegistry()
    journal = PlanJournal(elapsed=lambda: 0.0)
    observe_plans(registry, journal)
    loop = await cluster.recommender(registry=registry)
    await cluster.run(loop)  # creates the six checkpoints
    assert len(cluster.checkpoints()) == 6
    # The next pass: every checkpoint PATCH is held by the server, each by a rule of its own
    # (the n-th PATCH to arrive takes the n-th rule); the newest one held is answered first.
    arrived: list[str] = []

    def arrival(record: RequestRecord) -> None:
        if record.verb == "patch" and record.resource == VPA_CHECKPOINTS.plural:
            arrived.append(record.name)

    cluster.api.context.observers.append(arrival)
    holds = [
        cluster.api.faults.hold(verb="patch", resource=VPA_CHECKPOINTS.plural, count=1)
        for _ in WRITES
    ]
    await cluster.advance(60)
    run = asyncio.create_task(cluster.run(loop))
    released = 0
    try:
        while released < len(WRITES):
            await _above(arrived.__len__, released, "a held checkpoint PATCH")
            for _ in range(10):  # the writes that can be in flight together have arrived
                await asyncio.sleep(0.01)
            newest = max(i for i in range(len(arrived)) if not holds[i].is_set())
            answered = loop.executor.applied
            holds[newest].set()
            released += 1
            await _above(lambda: loop.executor.applied, answered, "the answer")
    finally:
        for hold in holds:
            hold.set()
    await run
    written = [e.object for e in journal.entries if e.intent == PatchOrCreate.__name__]
    assert written == WRITES + WRITES  # the creating pass, then the held one
    assert sorted(arrived) == sorted(name.split("/")[1] for name in WRITES)


async def _above(count: Callable[[], int], than: int, what: str) -> None:
    """Until ``count()`` is above ``than`` (polled; the bound only ends a test that hangs)."""
    for _ in range(1000):
        if count() > than:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} never came")
