"""The coordination ports asked directly: one table per port, each row answered by the one-brain
and by the ``separate`` implementation (``kubescale/coordination/one_brain.py``, ``separate.py``).

The expected answers are the rules the systems applied before the ports existed (their tests:
``tests/controllers/descheduler/test_one_brain.py``, ``test_recent_moves.py``,
``test_resource_ownership.py``, the autoscaler's and updater's one-brain scenarios): one brain
counts every system's disruptions, ``separate`` gives upstream's answers.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.base.clock import VirtualClock
from kubescale.base.coordination import Coordination
from kubescale.controllers.descheduler.framework.eviction import PodEvictor
from kubescale.coordination.brain import Brain, brain_of
from kubescale.coordination.descheduler_budget import ACTOR as DESCHEDULER
from kubescale.coordination.descheduler_budget import InFlight, Refusal
from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind, DisruptionLedger
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.one_brain import (
    LedgerBudgets,
    LedgerGate,
    LedgerMoves,
    RecentEvictionsVeto,
    RequestsAheadOfPods,
    VpaYieldsToHpa,
)
from kubescale.coordination.ports import (
    DeschedulerBudgets,
    DisruptionGate,
    PlacementVeto,
    RecentMoves,
    RequestsAhead,
    RequestsAheadPolicy,
    ResourceOwnership,
)
from kubescale.coordination.recent_moves import DescheduledMove
from kubescale.coordination.requests_ahead import AheadAnswer
from kubescale.coordination.separate import (
    NoMoves,
    NoVeto,
    OwnBudgets,
    OwnEvictionsOnly,
    SpecRequests,
    VpaOwnsAll,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.containers import ResourceRequirements
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.node import Node, Taint
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from kubescale.objects.views import ObjectRef
from tests import builders

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
UPDATER = "vpa-updater"

Obj = dict[str, Any]


running_pod_of_web = functools.partial(
    builders.pods.typed_pod,
    namespace="default",
    owner_references=[builders.meta.owner_reference(uid="rs")],
    containers=None,
    node_name="n1",
    status={"phase": "Running", "conditions": [builders.nodes.ready_condition()]},
    api_version=None,
)
"""A Running, Ready pod of ReplicaSet ``rs`` (uid ``rs``) on ``n1`` (each test names it and
gives it the uid ``uid-<name>``)."""


ready_node = functools.partial(
    builders.nodes.typed_node,
    taints=[],
    conditions=[builders.nodes.ready_condition()],
    api_version=None,
)
"""A Ready node (no taint unless given)."""


def _disruption(
    pod: Pod,
    *,
    actor: str,
    kind: DisruptionKind = DisruptionKind.EVICTION,
    ago: timedelta = timedelta(seconds=10),
) -> Disruption:
    meta = pod["metadata"]
    return Disruption(
        kind=kind,
        uid=meta["uid"],
        namespace=meta["namespace"],
        name=meta["name"],
        recorded_at=NOW - ago,
        confirmed=True,
        actor=actor,
        node=pod["spec"]["nodeName"],
        owner_kind="ReplicaSet",
        owner_name="web",
    )


# -- DisruptionGate (the autoscaler's drain) -------------------------------------------------


def _gate(one_brain: bool, ledger: DisruptionLedger) -> DisruptionGate:
    return LedgerGate(ledger) if one_brain else OwnEvictionsOnly()


@pytest.mark.parametrize(
    ("one_brain", "going", "untouched", "in_flight"),
    [
        # one brain: the updater's eviction of a is in flight, so the drain does not evict a
        # again and the PDB allowance counts it; the resize of b is no eviction
        (True, True, False, ["a"]),
        # separate: upstream's autoscaler sees only the PDBs' status
        (False, False, False, []),
    ],
)
def test_disruption_gate(
    one_brain: bool, going: bool, untouched: bool, in_flight: list[str]
) -> None:
    a, b, c = (running_pod_of_web(name=name, uid=f"uid-{name}") for name in "abc")
    ledger = DisruptionLedger(shared=one_brain)
    ledger.record(_disruption(a, actor=UPDATER))
    ledger.record(_disruption(b, actor=UPDATER, kind=DisruptionKind.RESIZE))
    gate = _gate(one_brain, ledger)
    assert gate.already_going(a, now=NOW) is going
    assert gate.already_going(c, now=NOW) is untouched
    assert [e.name for e in gate.evictions_in_flight(now=NOW)] == in_flight


# -- DeschedulerBudgets (the descheduler's cycle) --------------------------------------------


@dataclass
class _View:
    """A cycle's view of the cluster (the budget's ``ClusterView``); every pod fits on every
    other node unless named in ``fits_nowhere``."""

    pods: Sequence[Pod]
    all_nodes: Sequence[Node]
    pdbs: Sequence[PodDisruptionBudget] = ()
    fits_nowhere: frozenset[str] = frozenset()
    node_by_name: dict[str, Node] = field(init=False)

    def __post_init__(self) -> None:
        self.node_by_name = {n["metadata"]["name"]: n for n in self.all_nodes}

    def pods_on(self, node: str) -> Sequence[Pod]:
        return [p for p in self.pods if p["spec"]["nodeName"] == node]

    def fits_any(self, pod: Pod, candidates: Iterable[Node], *, other_nodes_only: bool) -> bool:
        others = [n for n in candidates if n["metadata"]["name"] != pod["spec"]["nodeName"]]
        return bool(others) and pod["metadata"]["name"] not in self.fits_nowhere


DRAINING: Taint = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}


def _budgets(one_brain: bool, ledger: DisruptionLedger) -> DeschedulerBudgets:
    return LedgerBudgets(ledger) if one_brain else OwnBudgets()


@pytest.mark.parametrize(
    ("one_brain", "counts_missing", "in_flight", "workload", "refusals", "asked_desired"),
    [
        # one brain: the updater's eviction of a (on n1, in default) counts for the cluster,
        # n1 and the namespace: InFlight(1, 1, 1); web (desired 3) has a, b, c healthy (a is
        # evicted but still Running and Ready) and a's eviction in flight:
        # disrupted = max(3 - 3, 0) + 1 = 1; big fits nowhere else -> "pod fits on no other
        # node"; e on n2 (draining) -> "node is being removed by the cluster autoscaler"
        (
            True,
            True,
            InFlight(total=1, node=1, namespace=1),
            1,
            {"big": Refusal.NO_BETTER_NODE, "e": Refusal.NODE_REMOVED, "b": None},
            True,
        ),
        # separate: upstream's counters start at zero, nothing refused, sizes unknown, and the
        # workloads' desired replicas are never read
        (False, False, InFlight(), None, {"big": None, "e": None, "b": None}, False),
    ],
)
def test_descheduler_budgets(
    *,
    one_brain: bool,
    counts_missing: bool,
    in_flight: InFlight,
    workload: int | None,
    refusals: dict[str, Refusal | None],
    asked_desired: bool,
) -> None:
    a, b, c = (running_pod_of_web(name=name, uid=f"uid-{name}") for name in "abc")
    big, e = (
        running_pod_of_web(name="big", uid="uid-big", namespace="other"),
        running_pod_of_web(name="e", uid="uid-e", node_name="n2", namespace="other"),
    )
    big["metadata"]["ownerReferences"] = e["metadata"]["ownerReferences"] = []
    view = _View(
        pods=[a, b, c, big, e],
        all_nodes=[
            ready_node(name="n1"),
            ready_node(name="n2", taints=[DRAINING]),
            ready_node(name="n3"),
        ],
        fits_nowhere=frozenset({"big"}),
    )
    ledger = DisruptionLedger(shared=one_brain)
    ledger.record(_disruption(a, actor=UPDATER))
    asked: list[bool] = []

    def desired() -> dict[tuple[str, str, str], int]:
        asked.append(True)
        return {("default", "ReplicaSet", "web"): 3}

    budgets = _budgets(one_brain, ledger)
    assert budgets.counts_missing_pods is counts_missing
    budget = budgets.budget(view=view, now=NOW, desired=desired)
    assert budget.in_flight(node="n1", namespace="default", exclude=frozenset()) == in_flight
    assert budget.workload_disrupted(b) == workload
    assert {name: budget.refuse(p) for name, p in (("big", big), ("e", e), ("b", b))} == refusals
    assert bool(asked) is asked_desired


def test_the_descheduler_budget_leaves_out_its_own_cycle() -> None:
    """One brain: this cycle's own evictions (``exclude``) are counted by the cycle itself."""
    a = running_pod_of_web(name="a", uid="uid-a")
    ledger = DisruptionLedger(shared=True)
    ledger.record(_disruption(a, actor=DESCHEDULER))
    view = _View(pods=[a], all_nodes=[ready_node(name="n1"), ready_node(name="n3")])
    budget = LedgerBudgets(ledger).budget(view=view, now=NOW, desired=dict)
    assert budget.in_flight(node="n1", namespace="default", exclude=frozenset()) == InFlight(
        total=1, node=1, namespace=1
    )
    assert budget.in_flight(node="n1", namespace="default", exclude={"uid-a"}) == InFlight()


# -- RecentMoves (the autoscaler's scale-down) -----------------------------------------------


def _moves(one_brain: bool, ledger: DisruptionLedger) -> RecentMoves:
    return LedgerMoves(ledger) if one_brain else NoMoves()


@pytest.mark.parametrize(
    ("one_brain", "within", "expected"),
    [
        # the descheduler moved a off n1 2 minutes ago; the updater's eviction of b is no move
        (True, timedelta(minutes=10), [("web", "n1", NOW - timedelta(minutes=2))]),
        # older than the window (--scale-down-unneeded-time): forgotten
        (True, timedelta(minutes=1), []),
        # separate: upstream's autoscaler knows nothing of the descheduler
        (False, timedelta(minutes=10), []),
    ],
)
def test_recent_moves(
    one_brain: bool, within: timedelta, expected: list[tuple[str, str, datetime]]
) -> None:
    ledger = DisruptionLedger(shared=one_brain)
    ledger.record(
        _disruption(
            running_pod_of_web(name="a", uid="uid-a"), actor=DESCHEDULER, ago=timedelta(minutes=2)
        )
    )
    ledger.record(
        _disruption(
            running_pod_of_web(name="b", uid="uid-b"), actor=UPDATER, ago=timedelta(minutes=1)
        )
    )
    moves: list[DescheduledMove] = _moves(one_brain, ledger).descheduled_moves(
        now=NOW, within=within
    )
    assert [(m.owner_name, m.from_node, m.evicted_at) for m in moves] == expected


# -- ResourceOwnership (the webhook and the updater) -----------------------------------------

WEB = ObjectRef(api_version="apps/v1", kind="Deployment", namespace="default", name="web")


web_scaler = functools.partial(
    builders.hpas.hpa, name="hpa-web", target=builders.hpas.scale_target_ref(name="web")
)
"""An HPA of Deployment ``web`` (its metrics given by each row)."""


CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}
MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization"}}}


def _ownership(one_brain: bool) -> ResourceOwnership:
    return VpaYieldsToHpa() if one_brain else VpaOwnsAll()


@pytest.mark.parametrize(
    ("one_brain", "requested", "leaves", "hpas", "owned"),
    [
        # one brain: the HPA on cpu owns cpu; the VPA leaves it alone without the flag
        (True, False, True, [web_scaler(metrics=[CPU])], {"cpu"}),
        (True, True, True, [web_scaler(metrics=[CPU, MEMORY])], {"cpu", "memory"}),
        # an HPA of another workload owns nothing of web's
        (
            True,
            False,
            True,
            [
                builders.hpas.hpa(
                    name="hpa-api", target=builders.hpas.scale_target_ref(name="api"), metrics=[CPU]
                )
            ],
            set(),
        ),
        # separate: the VPA does not know about the HPA; only --avoid-hpa-conflict makes the
        # webhook look (upstream's flag)
        (False, False, False, [web_scaler(metrics=[CPU])], set()),
        (False, True, True, [web_scaler(metrics=[CPU])], set()),
    ],
)
def test_resource_ownership(
    one_brain: bool, requested: bool, leaves: bool, hpas: list[Obj], owned: set[str]
) -> None:
    ownership = _ownership(one_brain)
    assert ownership.vpa_leaves_hpa_resources(requested=requested) is leaves
    assert ownership.hpa_owned(cast(list[HorizontalPodAutoscaler], hpas), WEB) == owned


# -- RequestsAheadPolicy (the autoscaler's binpacking, the updater's pending pods) ----------


class _Webhook:
    """The VPA's provider, as the wiring plugs it in: 250m for every pod."""

    def requests_for(self, pod: Pod) -> Pod:
        return self.answer_for(pod).pod

    def answer_for(self, pod: Pod) -> AheadAnswer:
        return AheadAnswer(
            pod={**pod, "spec": {"containers": [{"name": "app", "resources": _250M}]}},
            pod_only=True,
        )

    def still_current(self, answer: AheadAnswer) -> bool:
        return answer.pod_only


_250M: ResourceRequirements = {"requests": {"cpu": "250m"}}
_PENDING = builders.pods.typed_pod(name="p", containers=[builders.pods.container(name="app")])


def _policy(one_brain: bool) -> RequestsAheadPolicy:
    return RequestsAheadOfPods() if one_brain else SpecRequests()


@pytest.mark.parametrize(
    ("one_brain", "built", "answer", "replaces_pending"),
    [
        # one brain: the provider is built (once) and answers with the webhook's requests
        (
            True,
            1,
            {**_PENDING, "spec": {"containers": [{"name": "app", "resources": _250M}]}},
            True,
        ),
        # separate: the pods' own requests; the provider (its informers) is never built
        (False, 0, None, False),
    ],
)
def test_requests_ahead(
    one_brain: bool, built: int, answer: Pod | None, replaces_pending: bool
) -> None:
    builds: list[RequestsAhead] = []

    def build() -> RequestsAhead:
        builds.append(_Webhook())
        return builds[-1]

    policy = _policy(one_brain)
    provider = policy.provider(build)
    assert len(builds) == built
    assert (provider.requests_for(_PENDING) if provider else None) == answer
    assert policy.provider(None) is None
    assert policy.updater_replaces_pending is replaces_pending


# -- PlacementVeto: the scheduler extender's refusals from the descheduler's evictions ---------


@pytest.mark.parametrize(
    ("one_brain", "extender", "asked_after", "refused"),
    [
        # one brain: the web ReplicaSet's pod was evicted from n1 1 min before NOW; the memory
        # keeps it 10 min (--eviction-memory), 1 < 10: another web pod is kept off n1
        (True, True, timedelta(0), {"n1": "recently descheduled ReplicaSet/web from n1"}),
        # 11 min after the eviction, 11 > 10: forgotten
        (True, True, timedelta(minutes=10), {}),
        # no extender in the process: nothing keeps the descheduler's evictions
        (True, False, timedelta(0), {}),
        # separate: upstream's kube-scheduler knows nothing of the descheduler (it may put the
        # replacement straight back on n1, descheduler issues #994, #655)
        (False, True, timedelta(0), {}),
    ],
)
def test_placement_veto(
    one_brain: bool, extender: bool, asked_after: timedelta, refused: dict[str, str]
) -> None:
    brain = Brain.build(Coordination.ONE_BRAIN if one_brain else Coordination.SEPARATE)
    if extender:
        brain.board.memory = EvictionMemory(duration=timedelta(minutes=10))
    brain.board.record(running_pod_of_web(name="a", uid="uid-a"), "n1", NOW - timedelta(minutes=1))
    veto: PlacementVeto = brain.placement_veto
    answer = veto.refused_nodes(
        running_pod_of_web(name="b", uid="uid-b", node_name="n2"), NOW + asked_after
    )
    assert {node: why.describe() for node, why in answer.items()} == refused


# -- the brain: one per process, its implementations picked once -----------------------------


@pytest.mark.parametrize(
    ("coordination", "implementations"),
    [
        (
            Coordination.ONE_BRAIN,
            (
                LedgerGate,
                LedgerBudgets,
                LedgerMoves,
                VpaYieldsToHpa,
                RequestsAheadOfPods,
                RecentEvictionsVeto,
            ),
        ),
        (
            Coordination.SEPARATE,
            (OwnEvictionsOnly, OwnBudgets, NoMoves, VpaOwnsAll, SpecRequests, NoVeto),
        ),
    ],
)
def test_the_brain_picks_the_implementations(
    coordination: Coordination, implementations: tuple[type, ...]
) -> None:
    brain = Brain.build(coordination)
    ports = (
        brain.gate,
        brain.descheduler_budgets,
        brain.recent_moves,
        brain.ownership,
        brain.requests_ahead,
        brain.placement_veto,
    )
    assert [type(p) for p in ports] == list(implementations)
    assert brain.ledger.shared is (coordination is Coordination.ONE_BRAIN)


def test_one_brain_per_process() -> None:
    """Every component of a process gets the same brain from the shared cache (the ledger and
    the board the systems share); another process's cache has its own."""
    clock = VirtualClock(NOW)
    client: Any = object()  # never asked: the caches are not started here
    cache = SharedCache(
        client=client, clock=clock, rng=random.Random(1), coordination=Coordination.SEPARATE
    )
    other = SharedCache(client=client, clock=clock, rng=random.Random(1))
    assert brain_of(cache) is brain_of(cache)
    assert brain_of(cache).coordination is Coordination.SEPARATE
    assert brain_of(other) is not brain_of(cache)
    assert brain_of(other).coordination is Coordination.ONE_BRAIN


# -- property: one brain is never more permissive than upstream's descheduler ----------------


def _allowed(evictor: PodEvictor, pod: Pod) -> bool:
    """Whether ``evictor`` hands ``pod``'s eviction to the driver (yields its request)."""
    try:
        next(evictor.evict(pod, strategy="s", profile="p"))
    except StopIteration:
        return False
    return True


_LIMIT = st.one_of(st.none(), st.integers(min_value=0, max_value=3))


@given(
    placed=st.lists(
        st.tuples(st.sampled_from(["n1", "n2", "n3"]), st.sampled_from(["a", "b"])),
        min_size=1,
        max_size=8,
    ),
    going=st.lists(
        st.tuples(st.integers(min_value=0, max_value=7), st.sampled_from([UPDATER, DESCHEDULER])),
        max_size=5,
    ),
    limits=st.tuples(_LIMIT, _LIMIT, _LIMIT),
    counted=st.integers(min_value=0, max_value=2),
    size=st.integers(min_value=1, max_value=8),
)
@settings(max_examples=200, deadline=None)
def test_one_brain_never_allows_what_upstream_refuses(
    placed: list[tuple[str, str]],
    going: list[tuple[int, str]],
    limits: tuple[int | None, int | None, int | None],
    counted: int,
    size: int,
) -> None:
    """The descheduler with the one-brain budget refuses every eviction upstream's refuses (it
    only adds counts and refusals): whatever pods are in flight, by whichever system, whatever
    this cycle counted already and the limits."""
    pods = [
        running_pod_of_web(name=f"p{i}", uid=f"uid-p{i}", node_name=node, namespace=ns)
        for i, (node, ns) in enumerate(placed)
    ]
    view = _View(
        pods=pods, all_nodes=[ready_node(name="n1"), ready_node(name="n2"), ready_node(name="n3")]
    )
    ledger = DisruptionLedger(shared=True)
    for index, actor in going:
        if index < len(pods):
            ledger.record(_disruption(pods[index], actor=actor))
    per_node, per_namespace, total = limits
    for pod in pods:
        evictors = []
        for budget in (
            OwnBudgets().budget(view=view, now=NOW, desired=dict),
            LedgerBudgets(ledger).budget(
                view=view,
                now=NOW,
                desired=lambda: {(ns, "ReplicaSet", "web"): size for ns in ("a", "b")},
            ),
        ):
            evictor = PodEvictor(
                max_per_node=per_node,
                max_per_namespace=per_namespace,
                max_total=total,
                budget=budget,
            )
            evictor.total = counted
            evictor.per_node[pod["spec"]["nodeName"]] = counted
            evictors.append(evictor)
        upstream, one_brain = (_allowed(e, pod) for e in evictors)
        assert one_brain <= upstream
