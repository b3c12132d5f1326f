"""Eviction budget tables: upstream's ``isPodDisruptable`` over replicas × tolerance, min replicas,
pending pods, Jobs, DaemonSets and the in-place decision (``CanInPlaceUpdate``); kubescale's
group size (``max(declared, live)``, a custom kind's ``/scale``) and the disruptions of earlier
loops still in flight."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    EvictionRestriction,
    InPlaceDecision,
    configured_replicas,
)
from kubescale.coordination.disruption_ledger import DisruptionKind
from kubescale.objects.pod import Pod
from kubescale.objects.scale import ReplicaCountedController
from tests import builders

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NS = "default"


def controlled_by(kind: str = "ReplicaSet", name: str = "web") -> list[dict[str, Any]]:
    """A pod's ``ownerReferences``: controlled by ``kind/name``."""
    return [{"kind": kind, "name": name, "controller": True}]


RESTART_ON_MEMORY = [{"resourceName": "memory", "restartPolicy": "RestartContainer"}]

live_pod = functools.partial(
    builders.pods.typed_pod,
    namespace=NS,
    owner_references=controlled_by(),
    containers=[builders.pods.container()],
    status={"phase": "Running", "conditions": []},
    api_version=None,
)
"""A Running pod of ReplicaSet ``web`` (each row names it and changes its owner, status or
container)."""


replica_set = functools.partial(builders.workloads.typed_replica_set, spec={}, api_version=None)
vpa = functools.partial(builders.vpas.typed_vpa, spec={"updatePolicy": {}}, api_version=None)


RS = ControllerKey(namespace=NS, kind="ReplicaSet", name="web")


def evict_all(restriction: EvictionRestriction, pods: list[Pod]) -> list[str]:
    """Try every pod once, in order, recording what the budget allowed."""
    evicted = []
    for pod in pods:
        if restriction.can_evict(pod, now=NOW):
            restriction.record_eviction(pod)
            evicted.append(pod["metadata"]["name"])
    return evicted


@pytest.mark.parametrize(
    "case",
    [
        # 3 × 0.5 → tolerance int(1.5) = 1: one eviction.
        (3, 3, 0, 0.5, None, 1),
        # 4 × 0.5 → 2.
        (4, 4, 0, 0.5, None, 2),
        # 10 × 0.8 → 8.
        (10, 10, 0, 0.8, None, 8),
        # 3 × 0.1 → tolerance 0, but all pods running: "at least one" rule.
        (3, 3, 0, 0.1, None, 1),
        # tolerance 0 and one configured pod missing: nothing.
        (3, 2, 0, 0.1, None, 0),
        # 4 × 0.5 with one pod missing: alive 3 > 2 → 1, then 2 > 2 fails.
        (4, 3, 0, 0.5, None, 1),
        # 4 replicas, 1 pending: the pending pod always goes, plus one running pod.
        (4, 3, 1, 0.5, None, 2),
        # single replica with per-VPA minReplicas 1: tolerance 0, at-least-one → evicted.
        (1, 1, 0, 0.5, 1, 1),
        # single replica with the default --min-replicas 2: group skipped.
        (1, 1, 0, 0.5, None, 0),
        # tolerance 1.0 evicts every pod.
        (3, 3, 0, 1.0, None, 3),
        # more live pods than configured (a scale-down under way): upstream sizes the group 4
        # (tolerance 2, 3 evictions: 5 > 2, 4 > 2, 3 > 2); kubescale by max(4, 5 live) = 5:
        # tolerance int(2.5) = 2, shouldBeAlive 3: 5 > 3, 4 > 3 → 2.
        (4, 5, 0, 0.5, None, 2),
    ],
)
def test_budget_table(case: tuple[int, int, int, float, int | None, int]) -> None:
    """``case``: configured, running, pending, tolerance, per-VPA minReplicas, evictions."""
    configured, running, pending, tolerance, min_replicas, expected = case
    pods = [live_pod(name=f"p{i}") for i in range(running)]
    pods += [
        live_pod(name=f"q{i}", status={"phase": "Pending", "conditions": []})
        for i in range(pending)
    ]
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers={RS: replica_set(replicas=configured)},
        vpa=vpa()
        if min_replicas is None
        else vpa(spec={"updatePolicy": {"minReplicas": min_replicas}}),
        eviction_tolerance=tolerance,
    )
    assert len(evict_all(restriction, pods)) == expected


def test_min_replicas_flag_and_vpa_override() -> None:
    pods = [live_pod(name=f"p{i}") for i in range(3)]
    controllers = {RS: replica_set(replicas=3)}
    by_flag = EvictionRestriction.build(
        pods=pods, controllers=controllers, vpa=vpa(), min_replicas=4
    )
    assert by_flag.groups == {}
    assert by_flag.skipped[0].reason == "too few replicas: 3 live, 4 required"
    assert evict_all(by_flag, pods) == []
    overridden = EvictionRestriction.build(
        pods=pods,
        controllers=controllers,
        vpa=vpa(spec={"updatePolicy": {"minReplicas": 3}}),
        min_replicas=4,
    )
    assert evict_all(overridden, pods) == ["p0"]


def test_groups_are_budgeted_separately_and_orphans_never_evicted() -> None:
    web = [live_pod(name=f"w{i}", owner_references=controlled_by(name="web")) for i in range(2)]
    api = [live_pod(name=f"a{i}", owner_references=controlled_by(name="api")) for i in range(2)]
    orphan = live_pod(name="lonely")
    orphan["metadata"]["ownerReferences"] = []
    controllers = {
        RS: replica_set(replicas=2),
        ControllerKey(namespace=NS, kind="ReplicaSet", name="api"): replica_set(replicas=2),
    }
    restriction = EvictionRestriction.build(
        pods=[*web, *api, orphan], controllers=controllers, vpa=vpa()
    )
    assert evict_all(restriction, [*web, *api, orphan]) == ["w0", "a0"]


def test_same_pod_is_not_evicted_twice() -> None:
    pods = [live_pod(name=f"p{i}") for i in range(4)]
    restriction = EvictionRestriction.build(
        pods=pods, controllers={RS: replica_set(replicas=4)}, vpa=vpa()
    )
    assert evict_all(restriction, [pods[0], pods[0], pods[0]]) == ["p0"]


@pytest.mark.parametrize(
    ("kind", "controller", "live", "expected"),
    [
        ("ReplicaSet", {"spec": {"replicas": 3}}, 2, 3),
        ("ReplicationController", {"spec": {"replicas": 5}}, 2, 5),
        ("StatefulSet", {"spec": {"replicas": 2}}, 2, 2),
        ("ReplicaSet", {"spec": {}}, 2, "ReplicaSet default/x has no replicas config"),
        (
            "StatefulSet",
            {"spec": {"replicas": 0}},
            2,
            "StatefulSet default/x has no replicas config",
        ),
        ("ReplicaSet", None, 2, "ReplicaSet default/x does not exist"),
        # A declared count below the live pods (scale-down under way): the live pods, 6.
        ("ReplicaSet", {"spec": {"replicas": 3}}, 6, 6),
        # numberReady lags its 6 live pods: max(4, 6) = 6 (upstream: 4).
        ("DaemonSet", {"status": {"numberReady": 4}}, 6, 6),
        # ... and desiredNumberScheduled says 9 nodes should run one: max(4, 9, 6) = 9.
        ("DaemonSet", {"status": {"numberReady": 4, "desiredNumberScheduled": 9}}, 6, 9),
        ("DaemonSet", {"status": {"numberReady": 5}}, 2, 5),
        ("DaemonSet", {"status": {}}, 6, "DaemonSet default/x has no number ready pods"),
        ("Job", None, 7, 7),
        # Any other kind: its /scale spec.replicas, max with the live pods (upstream: 0, which
        # let every pod go); unknown while the /scale lookup has not answered.
        ("CloneSet", {"spec": {"replicas": 5}}, 3, 5),
        ("CloneSet", {"spec": {"replicas": 2}}, 3, 3),
        ("CloneSet", {"spec": {"replicas": 0}}, 3, "CloneSet default/x has no replicas config"),
        ("Workflow", None, 3, "Workflow default/x has no scale subresource known"),
    ],
)
def test_configured_replicas(
    kind: str, controller: ReplicaCountedController | None, live: int, expected: int | str
) -> None:
    key = ControllerKey(namespace=NS, kind=kind, name="x")
    assert configured_replicas(key=key, controller=controller, live=live) == expected


def test_job_uses_live_pods_as_configured() -> None:
    pods = [
        live_pod(name=f"j{i}", owner_references=controlled_by("Job", "batch")) for i in range(4)
    ]
    restriction = EvictionRestriction.build(pods=pods, controllers={}, vpa=vpa())
    stats = restriction.groups[ControllerKey(namespace=NS, kind="Job", name="batch")]
    assert (stats.configured, stats.eviction_tolerance) == (4, 2)
    assert len(evict_all(restriction, pods)) == 2


def test_daemonset_lagging_number_ready_is_sized_by_its_pods() -> None:
    pods = [
        live_pod(name=f"d{i}", owner_references=controlled_by("DaemonSet", "agent"))
        for i in range(4)
    ]
    key = ControllerKey(namespace=NS, kind="DaemonSet", name="agent")
    # numberReady 2 lags 4 running pods. Upstream: tolerance 1, shouldBeAlive 1 → 3 of 4 go.
    # kubescale: max(2, 4) = 4, tolerance 2, shouldBeAlive 2 → 4 > 2, 3 > 2: 2 go.
    restriction = EvictionRestriction.build(
        pods=pods, controllers={key: {"status": {"numberReady": 2}}}, vpa=vpa()
    )
    assert len(evict_all(restriction, pods)) == 2
    not_ready = EvictionRestriction.build(
        pods=pods, controllers={key: {"status": {"numberReady": 0}}}, vpa=vpa()
    )
    assert evict_all(not_ready, pods) == []
    assert not_ready.skipped[0].reason == "DaemonSet default/agent has no number ready pods"


def test_a_custom_kind_is_budgeted_by_its_scale() -> None:
    pods = [
        live_pod(name=f"c{i}", owner_references=controlled_by("CloneSet", "web")) for i in range(6)
    ]
    key = ControllerKey(namespace=NS, kind="CloneSet", name="web")
    # /scale spec.replicas 6: tolerance 3, shouldBeAlive 3 → 6, 5, 4 > 3: 3 go (upstream's 0
    # configured made shouldBeAlive 0: all 6).
    scaled = EvictionRestriction.build(
        pods=pods, controllers={key: {"spec": {"replicas": 6}}}, vpa=vpa()
    )
    assert len(evict_all(scaled, pods)) == 3
    unknown = EvictionRestriction.build(pods=pods, controllers={}, vpa=vpa())
    assert evict_all(unknown, pods) == []
    assert [s.reason for s in unknown.skipped] == [
        "CloneSet default/web has no scale subresource known"
    ]


@pytest.mark.parametrize(
    ("in_flight", "expected"),
    [
        # 6 configured, 6 running, tolerance 3, shouldBeAlive 3.
        # Nothing in flight: 6, 5, 4 > 3 → 3 go.
        ({}, ["p0", "p1", "p2"]),
        # Two evictions of earlier loops not shown yet: alive 6 − 2 = 4 > 3 → 1 more (p2).
        ({"p0": DisruptionKind.EVICTION, "p1": DisruptionKind.EVICTION}, ["p2"]),
        # A resize in flight counts as inPlaceUpdateInitiated: alive 5 → p1, p2 (5, 4 > 3).
        ({"p0": DisruptionKind.RESIZE}, ["p1", "p2"]),
        # Three in flight: alive 3, not > 3 → none.
        ({f"p{i}": DisruptionKind.EVICTION for i in range(3)}, []),
    ],
)
def test_disruptions_in_flight_count_and_are_not_repeated(
    in_flight: dict[str, DisruptionKind], expected: list[str]
) -> None:
    pods = [live_pod(name=f"p{i}") for i in range(6)]
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers={RS: replica_set(replicas=6)},
        vpa=vpa(),
        in_flight={f"{NS}/{name}": kind for name, kind in in_flight.items()},
    )
    assert evict_all(restriction, pods) == expected
    for name in in_flight:
        pod = next(p for p in pods if p["metadata"]["name"] == name)
        assert restriction.in_place_decision(pod, now=NOW) is InPlaceDecision.DEFERRED


def test_a_disruption_in_flight_spends_the_at_least_one_pod() -> None:
    # 3 × 0.1: tolerance 0, the "at least one" rule — already used by the pod in flight.
    pods = [live_pod(name=f"p{i}") for i in range(3)]
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers={RS: replica_set(replicas=3)},
        vpa=vpa(),
        eviction_tolerance=0.1,
        in_flight={f"{NS}/p0": DisruptionKind.EVICTION},
    )
    assert evict_all(restriction, pods) == []


@pytest.mark.parametrize(
    ("kind", "controller", "expected"),
    [
        # A Job of 6 pods, 3 evicted by an earlier loop and still terminating: upstream sizes
        # it by its 3 live pods (tolerance 1, shouldBeAlive 2: one more goes, then another
        # loop...); kubescale by 3 + 3 = 6: tolerance 3, shouldBeAlive 3, alive 3 → none.
        ("Job", None, []),
        # A DaemonSet whose numberReady (1) lags: the same, sized 6 → none.
        ("DaemonSet", {"status": {"numberReady": 1}}, []),
        # A ReplicaSet's spec.replicas 6 already says so: none either way.
        ("ReplicaSet", {"spec": {"replicas": 6}}, []),
    ],
)
def test_pods_being_deleted_still_size_their_group(
    kind: str, controller: ReplicaCountedController | None, expected: list[str]
) -> None:
    pods = [live_pod(name=f"p{i}", owner_references=controlled_by(kind, "web")) for i in range(3)]
    key = ControllerKey(namespace=NS, kind=kind, name="web")
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers={} if controller is None else {key: controller},
        vpa=vpa(),
        terminating={key: 3},
    )
    assert evict_all(restriction, pods) == expected
    shrunk = EvictionRestriction.build(
        pods=pods, controllers={} if controller is None else {key: controller}, vpa=vpa()
    )
    # Without the pods being deleted: Job and DaemonSet sized 3 (tolerance 1, one goes).
    assert len(evict_all(shrunk, pods)) == (0 if kind == "ReplicaSet" else 1)


def test_nil_replicas_skips_group_with_reason() -> None:
    pods = [live_pod(name=f"p{i}") for i in range(3)]
    restriction = EvictionRestriction.build(pods=pods, controllers={RS: replica_set()}, vpa=vpa())
    assert evict_all(restriction, pods) == []
    assert [s.reason for s in restriction.skipped] == [
        "ReplicaSet default/web has no replicas config"
    ]


def resize_pending(reason: str) -> list[dict[str, Any]]:
    return [{"type": "PodResizePending", "status": "True", "reason": reason}]


def resize_in_progress(reason: str = "", message: str = "") -> list[dict[str, Any]]:
    return [{"type": "PodResizeInProgress", "status": "True", "reason": reason, "message": message}]


@pytest.mark.parametrize(
    ("conditions", "attempt_age", "fall_back", "expected"),
    [
        ([], None, True, InPlaceDecision.APPROVED),
        (resize_pending("Infeasible"), None, True, InPlaceDecision.EVICT),
        (resize_pending("Infeasible"), None, False, InPlaceDecision.DEFERRED),
        (resize_pending("Deferred"), timedelta(minutes=4), True, InPlaceDecision.DEFERRED),
        (resize_pending("Deferred"), timedelta(minutes=6), True, InPlaceDecision.EVICT),
        # No attempt on record: upstream starts the clock now.
        (resize_pending("Deferred"), None, True, InPlaceDecision.DEFERRED),
        (resize_pending("SomethingNew"), None, True, InPlaceDecision.EVICT),
        (resize_in_progress(), timedelta(minutes=59), True, InPlaceDecision.DEFERRED),
        (resize_in_progress(), timedelta(minutes=61), True, InPlaceDecision.EVICT),
        (resize_in_progress("Error", "oom"), None, True, InPlaceDecision.EVICT),
        (resize_in_progress("Other", ""), None, True, InPlaceDecision.EVICT),
        # A condition that is not True is no resize.
        ([{"type": "PodResizePending", "status": "False"}], None, True, InPlaceDecision.APPROVED),
    ],
)
def test_in_place_decision_table(
    conditions: list[dict[str, Any]],
    attempt_age: timedelta | None,
    fall_back: bool,
    expected: InPlaceDecision,
) -> None:
    pods = [
        live_pod(name="p0", status={"phase": "Running", "conditions": conditions}),
        live_pod(name="p1"),
        live_pod(name="p2"),
    ]
    restriction = EvictionRestriction.build(
        pods=pods, controllers={RS: replica_set(replicas=3)}, vpa=vpa()
    )
    attempt = None if attempt_age is None else NOW - attempt_age
    decision = restriction.in_place_decision(
        pods[0], now=NOW, last_in_place_attempt=attempt, fall_back_to_eviction=fall_back
    )
    assert decision is expected


def test_in_place_budget_skip_and_restart_policy() -> None:
    pods = [
        live_pod(name="p0"),
        live_pod(name="p1"),
        live_pod(name="p2", containers=[builders.pods.container(resizePolicy=RESTART_ON_MEMORY)]),
    ]
    controllers = {RS: replica_set(replicas=3)}
    strict = EvictionRestriction.build(pods=pods, controllers=controllers, vpa=vpa())
    assert strict.in_place_decision(pods[0], now=NOW) is InPlaceDecision.APPROVED
    strict.record_in_place_update(pods[0])
    # 3 × 0.5 → one disruption; the next resize waits for the next loop.
    assert strict.in_place_decision(pods[1], now=NOW) is InPlaceDecision.DEFERRED
    assert not strict.can_evict(pods[1], now=NOW)

    skipping = EvictionRestriction.build(
        pods=pods, controllers=controllers, vpa=vpa(), in_place_skip_disruption_budget=True
    )
    skipping.record_in_place_update(pods[0])
    assert skipping.in_place_decision(pods[1], now=NOW) is InPlaceDecision.APPROVED
    # RestartContainer resize policy keeps the budget.
    assert skipping.in_place_decision(pods[2], now=NOW) is InPlaceDecision.DEFERRED


def test_in_place_deferred_for_pending_unknown_and_infeasible_without_budget() -> None:
    infeasible = live_pod(
        name="p0", status={"phase": "Running", "conditions": resize_pending("Infeasible")}
    )
    pods = [
        infeasible,
        live_pod(name="p1"),
        live_pod(name="p2", status={"phase": "Pending", "conditions": []}),
    ]
    restriction = EvictionRestriction.build(
        pods=pods, controllers={RS: replica_set(replicas=3)}, vpa=vpa()
    )
    stranger = live_pod(name="x", owner_references=controlled_by(name="other"))
    assert restriction.in_place_decision(stranger, now=NOW) is InPlaceDecision.DEFERRED
    assert restriction.in_place_decision(pods[2], now=NOW) is InPlaceDecision.DEFERRED
    restriction.record_eviction(pods[1])
    # Infeasible, but the group's budget is spent: wait rather than evict.
    assert restriction.in_place_decision(infeasible, now=NOW) is InPlaceDecision.DEFERRED
    assert not restriction.can_evict(infeasible, now=NOW)


def test_below_min_replicas_group_kept_for_in_place_skip_budget_only() -> None:
    pods = [live_pod(name="p0")]
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers={RS: replica_set(replicas=1)},
        vpa=vpa(),
        in_place_mode=True,
        in_place_skip_disruption_budget=True,
    )
    assert restriction.groups[RS].below_min_replicas
    assert not restriction.can_evict(pods[0], now=NOW)
    assert restriction.in_place_decision(pods[0], now=NOW) is InPlaceDecision.APPROVED


def test_record_eviction_of_unknown_pod_is_an_error() -> None:
    restriction = EvictionRestriction.build(pods=[], controllers={}, vpa=vpa())
    with pytest.raises(ValueError, match="not in any budgeted group"):
        restriction.record_eviction(live_pod(name="ghost"))
