"""The one disruption arbiter (:mod:`kubescale.coordination.disruption_arbiter`): tables of its
rule and a hypothesis property over interleaved loops of every evicting system.

The property's world: workloads (each in its own namespace) of ``n`` pods spread over nodes; a
PodDisruptionBudget ``maxUnavailable`` per workload or none, which the API server enforces on
the true state; the systems' own limits drawn at random — the VPA updater's
``max(int(n × tolerance), 1)`` (0 below ``--min-replicas``), the descheduler's per-namespace and
total limits, the cluster autoscaler's drain (bounded by the PDB only, as upstream); an informer
that shows evictions and the controllers' replacements only when it syncs (at most every 4 steps
of 10 s, well within the ledger's 5 minutes). Steps are interleaved at random: a loop of one of
the three systems, an informer sync, the controllers recreating evicted pods, replacements
becoming ready. The updater and the autoscaler ask the arbiter per pod; the descheduler runs its
own code — its cycle's :class:`PodEvictor` with, in one brain, the :class:`LedgerBudget` over
the informer's view and the ReplicaSets' desired replicas — so the property covers the real
descheduler with or without a PDB.

Invariant (``one-brain``): after every step, for every workload, the pods truly down or going
are at most the largest limit any one system alone has for it (each limit capped by the PDB).

Run against a broken arbiter that counts only the asking system's own in-flight disruptions
(``separate``'s ledger, or ``disrupted()`` without ``in_flight``) the property fails at once
(hypothesis shrinks to 1 workload of 2 pods, updater limit 1, descheduler namespace limit 1:
both evict before the informer syncs, 2 down against 1). Against a descheduler whose
per-namespace limit does not count the workload's missing pods (``PodEvictor.
_workload_limit_hit`` always false — the code before this rule) it fails too, shrunk to the
same workload: the updater evicts 1 of 2, the informer syncs (1 missing, nothing in flight),
the descheduler's counters start at zero and it evicts the other — 2 down against 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.descheduler.framework.eviction import EvictionResult, PodEvictor
from kubescale.coordination.descheduler_budget import (
    UPSTREAM_BUDGET,
    EvictionBudget,
    LedgerBudget,
)
from kubescale.coordination.disruption_arbiter import (
    DisruptionArbiter,
    WorkloadView,
    cluster_allowance,
    disrupted,
    workload_allowance,
)
from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind, DisruptionLedger
from kubescale.objects.meta import ObjectMeta
from kubescale.objects.pod import Pod as PodObject
from kubescale.scheduling.cycle_view import CycleView

START = datetime(2026, 1, 5, tzinfo=UTC)
STEP = timedelta(seconds=10)
UPDATER, DESCHEDULER, AUTOSCALER = "vpa-updater", "descheduler", "cluster-autoscaler"


@pytest.mark.parametrize(
    ("desired", "healthy", "in_flight", "limit", "expected"),
    [
        # Nothing down, nothing in flight, limit 3 → 3 more.
        (6, 6, 0, 3, 3),
        # 2 evictions in flight (the informer still shows the pods) → 3 - 2 = 1.
        (6, 6, 2, 3, 1),
        # 1 pod missing (its replacement not ready) + 1 in flight = 2 → 1.
        (6, 5, 1, 3, 1),
        # Already 4 down (6 - 2) against a limit of 3 → 0, never negative.
        (6, 2, 0, 3, 0),
        # More healthy than desired (a surge): nothing counts as missing → 3 - 1 = 2.
        (6, 8, 1, 3, 2),
        # A limit of 0 (below --min-replicas) → 0.
        (1, 1, 0, 0, 0),
    ],
)
def test_workload_allowance(
    desired: int, healthy: int, in_flight: int, limit: int, expected: int
) -> None:
    view = WorkloadView(desired=desired, healthy=healthy, in_flight=in_flight)
    assert workload_allowance(view=view, max_disrupted=limit) == expected


@pytest.mark.parametrize(
    ("in_flight", "limit", "expected"),
    [(0, None, None), (0, 5, 5), (3, 5, 2), (7, 5, 0)],  # limit - in flight, floor 0
)
def test_cluster_allowance(in_flight: int, limit: int | None, expected: int | None) -> None:
    assert cluster_allowance(in_flight=in_flight, limit=limit) == expected


# -- the world -------------------------------------------------------------------------------


@dataclass
class Pod:
    uid: str
    workload: int
    node: int
    ready: bool = True
    deleting: bool = False

    def as_seen(self) -> PodObject:
        """The pod as an informer shows it: a pod of ReplicaSet ``w<workload>`` in namespace
        ``ns<workload>``, Running, Ready as it is."""
        metadata: ObjectMeta = {
            "uid": self.uid,
            "name": self.uid,
            "namespace": f"ns{self.workload}",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"w{self.workload}",
                 "uid": f"rs-{self.workload}", "controller": True}
            ],
        }  # fmt: skip
        if self.deleting:
            metadata["deletionTimestamp"] = "2026-01-05T00:00:00Z"
        return {
            "metadata": metadata,
            "spec": {"nodeName": f"n{self.node}", "containers": [{"name": "app"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if self.ready else "False"}],
            },
        }


@dataclass(frozen=True, kw_only=True)
class Limits:
    size: int
    pdb: int | None
    """maxUnavailable of the workload's PDB."""
    updater: int
    descheduler_namespace: int | None


@dataclass
class World:
    limits: list[Limits]
    descheduler_total: int | None
    ledger: DisruptionLedger
    nodes: int
    now: datetime = START
    pods: dict[str, Pod] = field(default_factory=dict)
    seen: dict[str, Pod] = field(default_factory=dict)
    """What the informer shows: copies as of the last sync."""
    serial: int = 0
    acted: list[set[str]] = field(default_factory=list)
    descheduled_this_cycle: int = 0

    def __post_init__(self) -> None:
        self.acted = [set() for _ in self.limits]
        for workload, limits in enumerate(self.limits):
            for _ in range(limits.size):
                self._new_pod(workload, ready=True)
        self.sync()

    def _new_pod(self, workload: int, *, ready: bool) -> None:
        self.serial += 1
        uid = f"w{workload}-{self.serial}"
        self.pods[uid] = Pod(uid, workload, node=self.serial % self.nodes, ready=ready)

    def sync(self) -> None:
        self.seen = {uid: Pod(**vars(pod)) for uid, pod in self.pods.items()}
        for pod in self.seen.values():
            self.ledger.pending(pod.as_seen(), now=self.now)  # the informer's handlers

    def truly_down(self, workload: int) -> int:
        healthy = sum(
            1 for p in self.pods.values() if p.workload == workload and p.ready and not p.deleting
        )
        return self.limits[workload].size - healthy

    def limit(self, actor: str, workload: int) -> int:
        limits = self.limits[workload]
        own = {
            UPDATER: limits.updater,
            DESCHEDULER: limits.descheduler_namespace
            if limits.descheduler_namespace is not None
            else limits.size,
            AUTOSCALER: limits.size,  # a drain is bounded by the PDB only
        }[actor]
        return own if limits.pdb is None else min(own, limits.pdb)

    def evict(self, actor: str, pod: Pod) -> bool:
        """The Eviction API: refused (429) when the PDB's budget is spent in truth."""
        real = self.pods[pod.uid]
        if real.deleting:
            return True
        pdb = self.limits[pod.workload].pdb
        if pdb is not None and self.truly_down(pod.workload) >= pdb:
            return False
        real.deleting = True
        self.ledger.record(
            Disruption(
                kind=DisruptionKind.EVICTION,
                uid=pod.uid,
                namespace=f"ns{pod.workload}",
                name=pod.uid,
                recorded_at=self.now,
                confirmed=True,
                actor=actor,
            )
        )
        self.acted[pod.workload].add(actor)
        return True

    def deschedule(self, wanted: list[int]) -> None:
        """One descheduling cycle through the descheduler's own code: its
        :class:`PodEvictor` (``maxNoOfPodsToEvictPerNamespace`` per workload's namespace,
        ``maxNoOfPodsToEvictTotal``) with, in one brain, the :class:`LedgerBudget` over the
        informer's view and each ReplicaSet's desired replicas — no model of its rule."""
        seen = [p.as_seen() for p in self.seen.values()]
        view = CycleView(
            now=self.now,
            nodes=[
                {
                    "metadata": {"name": f"n{i}"},
                    "status": {"allocatable": {"cpu": "64", "pods": "110"}},
                }
                for i in range(self.nodes)
            ],
            pods=seen,
        )
        evicted_uids: set[str] = set()
        budget: EvictionBudget = UPSTREAM_BUDGET
        if self.ledger.shared:
            budget = LedgerBudget(
                view=view,
                arbiter=DisruptionArbiter(self.ledger),
                now=self.now,
                desired={
                    (f"ns{w}", "ReplicaSet", f"w{w}"): limits.size
                    for w, limits in enumerate(self.limits)
                },
            )
        for workload, limits in enumerate(self.limits):
            evictor = PodEvictor(
                max_per_namespace=limits.descheduler_namespace,
                max_total=self.descheduler_total,
                budget=budget,
            )
            evictor.total = self.descheduled_this_cycle  # one cycle's total over namespaces
            evictor.evicted_uids = evicted_uids
            # the descheduler's choice from the other end than the updater's (its reasons
            # differ: a node, not a recommendation)
            ready = [
                p
                for p in reversed(list(self.seen.values()))
                if p.workload == workload and p.ready and not p.deleting
            ]
            candidates = ready[: wanted[workload % len(wanted)]]
            for pod in candidates:
                if self.ledger.pending(pod.as_seen(), now=self.now, actor=DESCHEDULER):
                    continue  # already going
                cycle = evictor.evict(pod.as_seen(), strategy="model", profile="default")
                try:
                    next(cycle)
                    cycle.send(self.evict(DESCHEDULER, pod))
                except StopIteration as stop:
                    result = stop.value
                    if result is EvictionResult.TOTAL_LIMIT:
                        return
            self.descheduled_this_cycle = evictor.total

    def loop(self, actor: str, wanted: list[int], node: int) -> None:
        """One loop of ``actor``: the updater wants ``wanted`` pods of each workload, the
        autoscaler drains ``node`` — each asking the arbiter per pod; the descheduler runs
        its own code (:meth:`deschedule`)."""
        if actor == DESCHEDULER:
            self.descheduled_this_cycle = 0
            self.deschedule(wanted)
            return
        arbiter = DisruptionArbiter(self.ledger)
        cluster_granted = 0
        for workload in range(len(self.limits)):
            seen = [p for p in self.seen.values() if p.workload == workload]
            healthy = [p.as_seen() for p in seen if p.ready and not p.deleting]
            candidates = [p for p in seen if p.ready and not p.deleting]
            if actor == AUTOSCALER:
                candidates = [p for p in candidates if p.node == node]
            else:
                candidates = candidates[: wanted[workload % len(wanted)]]
            for pod in candidates:
                if arbiter.ledger.pending(pod.as_seen(), now=self.now, actor=actor) is not None:
                    continue  # already going
                view = arbiter.view(
                    desired=self.limits[workload].size, healthy=healthy, actor=actor, now=self.now
                )
                if workload_allowance(view=view, max_disrupted=self.limit(actor, workload)) < 1:
                    break
                if self.evict(actor, pod):
                    cluster_granted += 1

    def recreate(self) -> None:
        """Controllers: evicted pods go, replacements are created (not ready yet)."""
        for uid, pod in list(self.pods.items()):
            if pod.deleting:
                del self.pods[uid]
                self._new_pod(pod.workload, ready=False)

    def become_ready(self) -> None:
        for pod in self.pods.values():
            pod.ready = True


STEPS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([UPDATER, DESCHEDULER, AUTOSCALER]),
                  st.lists(st.integers(0, 4), min_size=1, max_size=3), st.integers(0, 2)),
        st.sampled_from(["sync", "recreate", "ready"]),
    ),
    min_size=1,
    max_size=25,
)  # fmt: skip


@st.composite
def _limits(draw: st.DrawFn) -> Limits:
    size = draw(st.integers(1, 6))
    tolerance = draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]))
    min_replicas = draw(st.integers(1, 3))
    # upstream: max(int(n × tolerance), 1), nothing below --min-replicas
    updater = 0 if size < min_replicas else max(int(size * tolerance), 1)
    return Limits(
        size=size,
        pdb=draw(st.none() | st.integers(0, size)),
        updater=updater,
        descheduler_namespace=draw(st.none() | st.integers(0, 3)),
    )


def _run(
    *, limits: list[Limits], total: int | None, steps: list[Any], shared: bool
) -> list[tuple[int, int, int]]:
    """``(step, workload, excess)`` for every time a workload was down beyond its bound."""
    world = World(
        limits=limits,
        descheduler_total=total,
        ledger=DisruptionLedger(shared=shared),
        nodes=3,
    )
    breaches: list[tuple[int, int, int]] = []
    since_sync = 0
    for index, step in enumerate(steps):
        world.now += STEP
        if isinstance(step, tuple):
            actor, wanted, node = step
            world.loop(actor, wanted, node)
        elif step == "sync":
            world.sync()
        elif step == "recreate":
            world.recreate()
        else:
            world.become_ready()
        since_sync += 1
        if step == "sync" or since_sync >= 4:  # the watch catches up within 40 s
            world.sync()
            since_sync = 0
        for workload in range(len(limits)):
            acted = world.acted[workload]
            if not acted:
                continue
            bound = max(world.limit(actor, workload) for actor in acted)
            excess = world.truly_down(workload) - bound
            if excess > 0:
                breaches.append((index, workload, excess))
    return breaches


@settings(max_examples=150, deadline=None)
@given(
    limits=st.lists(_limits(), min_size=1, max_size=3),
    total=st.none() | st.integers(0, 6),
    steps=STEPS,
)
def test_interleaved_loops_never_go_below_what_one_system_alone_allows(
    limits: list[Limits], total: int | None, steps: list[Any]
) -> None:
    assert _run(limits=limits, total=total, steps=steps, shared=True) == []


def test_separate_budgets_add_up() -> None:
    """``--coordination separate`` (upstream): the updater (3 of 6) and the descheduler (2 in
    the namespace) evict in the same minute, before the informer shows either: 5 of 6 down
    against the larger limit 3. One brain: 3."""
    limits = [Limits(size=6, pdb=None, updater=3, descheduler_namespace=2)]
    steps: list[Any] = [(UPDATER, [6], 0), (DESCHEDULER, [6], 0)]
    assert _run(limits=limits, total=None, steps=steps, shared=False) == [(1, 0, 2)]
    assert _run(limits=limits, total=None, steps=steps, shared=True) == []


def test_the_descheduler_total_counts_every_system() -> None:
    """Total limit 2; the updater has 2 evictions in flight in another namespace: one brain,
    the descheduler evicts nothing; separate, it evicts its 2."""

    def descheduled(shared: bool) -> int:
        world = World(
            limits=[
                Limits(size=4, pdb=None, updater=2, descheduler_namespace=None),
                Limits(size=4, pdb=None, updater=0, descheduler_namespace=None),
            ],
            descheduler_total=2,
            ledger=DisruptionLedger(shared=shared),
            nodes=1,
        )
        world.loop(UPDATER, [2, 0], 0)
        world.loop(DESCHEDULER, [0, 4], 0)
        return sum(1 for p in world.pods.values() if p.workload == 1 and p.deleting)

    assert descheduled(shared=True) == 0
    assert descheduled(shared=False) == 2


def test_disrupted_counts_missing_and_in_flight() -> None:
    # 6 desired, 4 healthy (2 missing), 1 of them in flight: 3 down or going.
    assert disrupted(WorkloadView(desired=6, healthy=4, in_flight=1)) == 3
