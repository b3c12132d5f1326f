"""``--coordination one-brain`` in the descheduler's cycle (:mod:`kubescale.coordination.
descheduler_budget`): tables of its rules, each row run with one brain and
separately (upstream: no ledger, no fit check, no look at the autoscaler's marks).

The cluster of every row: node n1 carries a ``NoSchedule`` taint the pods do not tolerate, so
RemovePodsViolatingNodeTaints wants to evict each pod on n1 (upstream's rule), and other nodes
that may or may not hold them. Pods ask 1 CPU unless a row says otherwise.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kubescale.controllers.descheduler.descheduling_cycle import descheduling_cycle, run_cycle
from kubescale.controllers.descheduler.framework.eviction import EvictionRequest, EvictionResult
from kubescale.coordination.descheduler_budget import (
    ACTOR,
    DELETION_CANDIDATE_TAINT,
    TO_BE_DELETED_TAINT,
    desired_replicas,
    pdb_allowance,
)
from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind, DisruptionLedger
from kubescale.coordination.one_brain import LedgerBudgets
from kubescale.coordination.separate import OwnBudgets
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from tests import builders

from .builders import NOW, Obj, cycle_node, cycle_pod, policy, view

MAINTENANCE = {"key": "maintenance", "effect": "NoSchedule"}
TO_BE_DELETED = {"key": TO_BE_DELETED_TAINT, "value": "1772366400", "effect": "NoSchedule"}
CANDIDATE = {"key": DELETION_CANDIDATE_TAINT, "value": "1772366400", "effect": "PreferNoSchedule"}
UPDATER = "vpa-updater"


def taints_policy(**top: Any) -> Any:
    return policy(("deschedule", "RemovePodsViolatingNodeTaints", None), **top)


def cycle(
    *,
    nodes: list[Node],
    pods: list[Pod],
    one_brain: bool,
    in_flight: tuple[str, ...] = (),
    pdbs: tuple[PodDisruptionBudget, ...] = (),
    desired: dict[tuple[str, str, str], int] | None = None,
    **top: Any,
) -> tuple[list[str], dict[str, str]]:
    """(evicted pod names, refused pod name → result) of one cycle; ``in_flight`` names pods
    the VPA updater is evicting (on the ledger, not yet shown by the informer)."""
    the_policy = taints_policy(**top)
    ledger = DisruptionLedger(shared=one_brain)
    by_name = {p["metadata"]["name"]: p for p in pods}
    for name in in_flight:
        meta = by_name[name]["metadata"]
        ledger.record(
            Disruption(
                kind=DisruptionKind.EVICTION,
                uid=meta["uid"],
                namespace=meta["namespace"],
                name=name,
                recorded_at=NOW - timedelta(seconds=10),
                confirmed=True,
                actor=UPDATER,
            )
        )
    cycle_view = view(nodes, pods, the_policy=the_policy, pdbs=list(pdbs))
    budgets = LedgerBudgets(ledger) if one_brain else OwnBudgets()
    budget = budgets.budget(view=cycle_view, now=NOW, desired=lambda: desired or {})

    def answer(request: EvictionRequest) -> bool:
        ledger.record(
            Disruption(
                kind=DisruptionKind.EVICTION,
                uid=request.pod["metadata"]["uid"],
                namespace=request.namespace,
                name=request.name,
                recorded_at=NOW,
                confirmed=True,
                actor=ACTOR,
            )
        )
        return True

    report = run_cycle(
        descheduling_cycle(policy=the_policy, view=cycle_view, budget=budget), answer
    )
    refused = {
        r.pod.split("/", 1)[1]: r.result.value
        for r in report.evictions
        if r.result is not EvictionResult.EVICTED
    }
    return [r.pod.split("/", 1)[1] for r in report.evicted], refused


NO_FIT = EvictionResult.NO_BETTER_NODE.value
REMOVED = EvictionResult.NODE_REMOVED.value
BUDGET = EvictionResult.BUDGET_IN_FLIGHT.value
TOTAL = EvictionResult.TOTAL_LIMIT.value
NAMESPACE = EvictionResult.NAMESPACE_LIMIT.value

ROWS = [
    pytest.param(
        # n2 has 4 CPU free: 1 CPU fits → evicted either way.
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2")],
            "pods": [cycle_pod("a", cpu="1")],
        },
        (["a"], {}),
        (["a"], {}),
        id="fits-elsewhere",
    ),
    pytest.param(
        # n2 allocatable 500m < 1 CPU: nowhere to go → one brain leaves it; upstream evicts it
        # (nodeFit off by default) and the replacement is Pending.
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="500m")],
            "pods": [cycle_pod("a", cpu="1")],
        },
        ([], {"a": NO_FIT}),
        (["a"], {}),
        id="nowhere-to-go",
    ),
    pytest.param(
        # the only node with room (n2) is one the autoscaler found unneeded (soft taint): no
        # better place — the pod would land where consolidation is about to empty.
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", taints=[CANDIDATE])],
            "pods": [cycle_pod("a", cpu="1")],
        },
        ([], {"a": NO_FIT}),
        (["a"], {}),
        id="only-room-on-a-deletion-candidate",
    ),
    pytest.param(
        # n1 is being drained by the autoscaler (ToBeDeleted is a NoSchedule taint, which the
        # taints plugin evicts for too): the drain evicts its pods, not the descheduler.
        {
            "nodes": [cycle_node("n1", taints=[TO_BE_DELETED]), cycle_node("n2")],
            "pods": [cycle_pod("a", cpu="1")],
        },
        ([], {"a": REMOVED}),
        (["a"], {}),
        id="node-being-removed",
    ),
    pytest.param(
        # maxNoOfPodsToEvictTotal 2; the updater's eviction of u (on n2) is in flight: 1 + 1 = 2
        # → a evicted, b refused (2 + 1 > 2). Upstream's counter starts at 0: a and b.
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [
                cycle_pod("a", cpu="1"),
                cycle_pod("b", cpu="1"),
                cycle_pod("u", "n2", cpu="1", namespace="x"),
            ],
            "in_flight": ("u",),
            "maxNoOfPodsToEvictTotal": 2,
        },
        (["a"], {"b": TOTAL}),
        (["a", "b"], {}),
        id="total-counts-the-updater",
    ),
    pytest.param(
        # maxNoOfPodsToEvictPerNamespace 1; the updater is evicting u in the same namespace:
        # 1 in flight + 1 > 1 → a refused. Upstream: a evicted, b refused (own count 1).
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [
                cycle_pod("a", cpu="1"),
                cycle_pod("b", cpu="1"),
                cycle_pod("u", "n2", cpu="1"),
            ],
            "in_flight": ("u",),
            "maxNoOfPodsToEvictPerNamespace": 1,
        },
        ([], {"a": NAMESPACE, "b": NAMESPACE}),
        (["a"], {"b": NAMESPACE}),
        id="namespace-counts-the-updater",
    ),
    pytest.param(
        # PDB of app=web allows 1; the updater's eviction of web pod u is in flight: 1 - 1 = 0
        # → a refused. Upstream asks the API server, whose status may not count u yet.
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [
                cycle_pod("a", cpu="1", labels={"app": "web"}),
                cycle_pod("u", "n2", cpu="1", labels={"app": "web"}),
            ],
            "in_flight": ("u",),
            "pdbs": (
                builders.pdbs.pdb(
                    name="web", match_labels={"app": "web"}, disruptions_allowed=1, api_version=None
                ),
            ),
        },
        ([], {"a": BUDGET}),
        (["a"], {}),
        id="pdb-spent-in-flight",
    ),
    pytest.param(
        # PDB allows 2, nothing in flight: a (2 - 0) then b (2 - 1, a's eviction now on the
        # ledger) go; a third would not (2 - 2).
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [cycle_pod(n, cpu="1", labels={"app": "web"}) for n in ("a", "b", "c")],
            "pdbs": (
                builders.pdbs.pdb(
                    name="web", match_labels={"app": "web"}, disruptions_allowed=2, api_version=None
                ),
            ),
        },
        (["a", "b"], {"c": BUDGET}),
        (["a", "b", "c"], {}),
        id="pdb-spent-by-own-evictions",
    ),
]


WEB = ("default", "ReplicaSet", "web")
ROWS += [
    pytest.param(
        # maxNoOfPodsToEvictPerNamespace 2; ReplicaSet web wants 4 and has 3 pods (one
        # missing, its replacement not created yet): a → 1 missing + 0 in flight < 2 → goes;
        # b → 1 + 1 (a, on the ledger) = 2, not < 2 → refused. Upstream counts only this
        # cycle's evictions: a (0 < 2) and b (1 < 2).
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [
                cycle_pod("a", cpu="1"),
                cycle_pod("b", cpu="1"),
                cycle_pod("c", "n2", cpu="1"),
            ],
            "desired": {WEB: 4},
            "maxNoOfPodsToEvictPerNamespace": 2,
        },
        (["a"], {"b": NAMESPACE}),
        (["a", "b"], {}),
        id="namespace-counts-missing-pods",
    ),
    pytest.param(
        # the same with c's replacement created but not Ready: healthy a, b (c is not)
        # → missing 4 - 2 = 2, not < 2 → a refused, and b.
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [
                cycle_pod("a", cpu="1"),
                cycle_pod("b", cpu="1"),
                cycle_pod(
                    "c",
                    "n2",
                    cpu="1",
                    status={"conditions": [{"type": "Ready", "status": "False"}]},
                ),
            ],
            "desired": {WEB: 4},
            "maxNoOfPodsToEvictPerNamespace": 2,
        },
        ([], {"a": NAMESPACE, "b": NAMESPACE}),
        (["a", "b"], {}),
        id="not-ready-counts-missing",
    ),
    pytest.param(
        # web's size unknown (no desired replicas: a Job, or its controller not in the cache):
        # only the namespace's in-flight count, as before — a and b (0, 1 < 2).
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [
                cycle_pod("a", cpu="1"),
                cycle_pod("b", cpu="1"),
                cycle_pod("c", "n2", cpu="1"),
            ],
            "desired": {},
            "maxNoOfPodsToEvictPerNamespace": 2,
        },
        (["a", "b"], {}),
        (["a", "b"], {}),
        id="size-unknown",
    ),
    pytest.param(
        # no namespace limit: missing pods limit nothing (upstream's "no limit").
        {
            "nodes": [cycle_node("n1", taints=[MAINTENANCE]), cycle_node("n2", cpu="8")],
            "pods": [cycle_pod("a", cpu="1"), cycle_pod("b", cpu="1")],
            "desired": {WEB: 6},
        },
        (["a", "b"], {}),
        (["a", "b"], {}),
        id="no-namespace-limit",
    ),
]


@pytest.mark.parametrize(("world", "one_brain", "separate"), ROWS)
def test_one_brain_rules(
    world: dict[str, Any],
    one_brain: tuple[list[str], dict[str, str]],
    separate: tuple[list[str], dict[str, str]],
) -> None:
    assert cycle(**world, one_brain=True) == one_brain
    assert cycle(**world, one_brain=False) == separate


@pytest.mark.parametrize(
    ("allowed", "in_flight", "expected"),
    [(1, 0, 1), (1, 1, 0), (3, 1, 2), (0, 0, 0), (1, 2, 0)],  # allowed - in flight, floor 0
)
def test_pdb_allowance(allowed: int, in_flight: int, expected: int) -> None:
    assert pdb_allowance(disruptions_allowed=allowed, in_flight=in_flight) == expected


@pytest.mark.parametrize(
    ("kind", "controller", "expected"),
    [
        ("ReplicaSet", {"spec": {"replicas": 4}}, 4),
        ("StatefulSet", {"spec": {"replicas": 3}}, 3),
        ("ReplicationController", {"spec": {"replicas": 0}}, 0),
        # a DaemonSet wants one pod per eligible node: status.desiredNumberScheduled
        ("DaemonSet", {"status": {"desiredNumberScheduled": 5}}, 5),
        # a Job runs to completion: a gone pod may be done, not missing → unknown
        ("Job", {"spec": {"parallelism": 2}}, None),
        # another kind: its /scale's spec.replicas
        ("Rollout", {"spec": {"replicas": 7}}, 7),
        ("ReplicaSet", None, None),  # not in the cache
        ("ReplicaSet", {"spec": {}}, None),
    ],
)
def test_desired_replicas(kind: str, controller: Obj | None, expected: int | None) -> None:
    assert desired_replicas(kind, controller) == expected
