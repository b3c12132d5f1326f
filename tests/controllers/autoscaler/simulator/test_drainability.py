"""Drainability rules in upstream's order (reference §3.3), utilization (§3.2) and the
disruption cost."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kubescale.controllers.autoscaler.model.pod_facts import (
    MIRROR_POD_ANNOTATION,
    SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
    OwnerRef,
    PriorityResolver,
)
from kubescale.controllers.autoscaler.scaledown.disruption_cost import (
    POD_DELETION_COST_ANNOTATION,
    eviction_cost,
    node_disruption_cost,
)
from kubescale.controllers.autoscaler.simulator.drainability import (
    BlockingReason,
    DrainContext,
    Outcome,
    PdbTracker,
    classify_node_pods,
    drainability,
)
from kubescale.controllers.autoscaler.simulator.utilization import node_utilization
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod, Volume
from kubescale.objects.replica_set import ReplicaSet
from tests.controllers.autoscaler.builders import GI, NOW, ca_pod, stamp

PDB_WEB: PodDisruptionBudget = {
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"selector": {"matchLabels": {"app": "web"}}},
    "status": {"disruptionsAllowed": 1},
}
PDB_SYSTEM: PodDisruptionBudget = {
    "metadata": {"name": "dns", "namespace": "kube-system"},
    "spec": {"selector": {"matchLabels": {"app": "dns"}}},
    "status": {"disruptionsAllowed": 1},
}
PDB_WEB_EXHAUSTED: PodDisruptionBudget = {**PDB_WEB, "status": {"disruptionsAllowed": 0}}
EMPTY_DIR: Volume = {"name": "scratch", "emptyDir": {}}
MEMORY_DIR: Volume = {"name": "cache", "emptyDir": {"medium": "Memory"}}
HOST_PATH: Volume = {"name": "logs", "hostPath": {"path": "/var/log"}}


def controllers(namespace: str, owner: OwnerRef) -> ReplicaSet | None:
    if owner.name == "gone":
        return None
    found: ReplicaSet = {"spec": {"replicas": 1 if owner.name == "single" else 3}}
    return found


def context(**kw: Any) -> DrainContext:
    pdbs = kw.pop("pdbs", [PDB_WEB, PDB_SYSTEM])
    return DrainContext(pdbs=PdbTracker(pdbs), now=NOW, controller=controllers, **kw)


def deleting(seconds_ago: int, grace: int = 30) -> Pod:
    p = ca_pod("old")
    p["metadata"]["deletionTimestamp"] = stamp(NOW - timedelta(seconds=seconds_ago))
    p["metadata"]["deletionGracePeriodSeconds"] = grace
    return p


@pytest.mark.parametrize(
    ("make", "kw", "expected"),
    [
        # 1. mirror pod: skipped, even if nothing else would let it go
        (
            lambda: ca_pod("m", owner=None, annotations={MIRROR_POD_ANNOTATION: "x"}),
            {},
            (Outcome.SKIP, None),
        ),
        # 2. deleted 61 s ago with 30 s grace: 30 + 30 < 61 → long terminating, skipped
        (lambda: deleting(61), {}, (Outcome.SKIP, None)),
        # ... 60 s ago is not beyond grace + 30 s yet: the next rules decide (a normal RS pod)
        (lambda: deleting(60), {}, (Outcome.UNDEFINED, None)),
        # 3. its ReplicaSet is gone
        (
            lambda: ca_pod("p", owner=("ReplicaSet", "gone")),
            {},
            (Outcome.BLOCK, BlockingReason.CONTROLLER_NOT_FOUND),
        ),
        # 3. 1 replica < --min-replica-count 2
        (
            lambda: ca_pod("p", owner=("ReplicaSet", "single")),
            {"min_replica_count": 2},
            (Outcome.BLOCK, BlockingReason.MIN_REPLICAS_REACHED),
        ),
        # 4. DaemonSet pod: fine to drain (listed apart)
        (lambda: ca_pod("d", owner=("DaemonSet", "agent")), {}, (Outcome.DRAIN_OK, None)),
        # 5. safe-to-evict true short-circuits rules 6-12: even with local storage, no owner
        (
            lambda: ca_pod(
                "s", owner=None, annotations={SAFE_TO_EVICT_ANNOTATION: "true"}, volumes=[HOST_PATH]
            ),
            {},
            (Outcome.DRAIN_OK, None),
        ),
        # 6. terminal pod without owner (upstream drain.IsPodTerminal): Succeeded under
        # restartPolicy Never or OnFailure, Failed under any policy
        (
            lambda: ca_pod(
                "f",
                owner=None,
                node_name="n",
                phase="Succeeded",
                extra_spec={"restartPolicy": "Never"},
            ),
            {},
            (Outcome.DRAIN_OK, None),
        ),
        (
            lambda: ca_pod(
                "f",
                owner=None,
                node_name="n",
                phase="Succeeded",
                extra_spec={"restartPolicy": "OnFailure"},
            ),
            {},
            (Outcome.DRAIN_OK, None),
        ),
        (
            lambda: ca_pod(
                "f",
                owner=None,
                node_name="n",
                phase="Failed",
                extra_spec={"restartPolicy": "Always"},
            ),
            {},
            (Outcome.DRAIN_OK, None),
        ),
        # 6. ... Succeeded under Always (will be restarted) is not terminal: rule 8 blocks it
        (
            lambda: ca_pod(
                "f",
                owner=None,
                node_name="n",
                phase="Succeeded",
                extra_spec={"restartPolicy": "Always"},
            ),
            {},
            (Outcome.BLOCK, BlockingReason.NOT_REPLICATED),
        ),
        # 7. on-completion
        (
            lambda: ca_pod("c", annotations={SAFE_TO_EVICT_ANNOTATION: "on-completion"}),
            {},
            (Outcome.WAIT, None),
        ),
        # 8. no controller
        (lambda: ca_pod("bare", owner=None), {}, (Outcome.BLOCK, BlockingReason.NOT_REPLICATED)),
        # 8. a custom controller kind does not count while --skip-nodes-with-custom-controller-pods
        (
            lambda: ca_pod("x", owner=("Rollout", "r")),
            {},
            (Outcome.BLOCK, BlockingReason.NOT_REPLICATED),
        ),
        (
            lambda: ca_pod("x", owner=("Rollout", "r")),
            {"skip_nodes_with_custom_controller_pods": False},
            (Outcome.UNDEFINED, None),
        ),
        # 9. kube-system pod without PDB, 30 min old (< 1h)
        (
            lambda: ca_pod("k", namespace="kube-system", labels={"app": "metrics"}),
            {},
            (Outcome.BLOCK, BlockingReason.UNMOVABLE_KUBE_SYSTEM_POD),
        ),
        # 9. ... with a PDB it may go
        (
            lambda: ca_pod("k", namespace="kube-system", labels={"app": "dns"}),
            {},
            (Outcome.UNDEFINED, None),
        ),
        # 9. ... older than --blocking-system-pod-distruption-timeout it may go too
        (
            lambda: ca_pod(
                "k",
                namespace="kube-system",
                labels={"app": "metrics"},
                created=NOW - timedelta(hours=2),
            ),
            {},
            (Outcome.UNDEFINED, None),
        ),
        # 10. safe-to-evict false
        (
            lambda: ca_pod("n", annotations={SAFE_TO_EVICT_ANNOTATION: "false"}),
            {},
            (Outcome.BLOCK, BlockingReason.NOT_SAFE_TO_EVICT_ANNOTATION),
        ),
        # 11. emptyDir on disk
        (
            lambda: ca_pod("l", volumes=[EMPTY_DIR]),
            {},
            (Outcome.BLOCK, BlockingReason.LOCAL_STORAGE_REQUESTED),
        ),
        # 11. hostPath
        (
            lambda: ca_pod("l", volumes=[HOST_PATH]),
            {},
            (Outcome.BLOCK, BlockingReason.LOCAL_STORAGE_REQUESTED),
        ),
        # 11. emptyDir in memory is not local storage
        (lambda: ca_pod("l", volumes=[MEMORY_DIR]), {}, (Outcome.UNDEFINED, None)),
        # 11. listed in safe-to-evict-local-volumes
        (
            lambda: ca_pod(
                "l",
                volumes=[EMPTY_DIR],
                annotations={SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: "scratch"},
            ),
            {},
            (Outcome.UNDEFINED, None),
        ),
        # 11. the flag off
        (
            lambda: ca_pod("l", volumes=[EMPTY_DIR]),
            {"skip_nodes_with_local_storage": False},
            (Outcome.UNDEFINED, None),
        ),
        # 12. a PDB with 0 disruptions allowed
        (
            lambda: ca_pod("w"),
            {"pdbs": [PDB_WEB_EXHAUSTED]},
            (Outcome.BLOCK, BlockingReason.NOT_ENOUGH_PDB),
        ),
        # nothing applies: the pod must be moved
        (lambda: ca_pod("w"), {}, (Outcome.UNDEFINED, None)),
    ],
)
def test_rules_in_order(
    make: Any, kw: dict[str, Any], expected: tuple[Outcome, BlockingReason | None]
) -> None:
    verdict = drainability(make(), context(**kw))
    assert (verdict.outcome, verdict.reason) == expected


def test_node_pods_are_sorted_and_the_first_blocker_stops() -> None:
    pods = [
        ca_pod("a", node_name="n"),
        ca_pod("ds", node_name="n", owner=("DaemonSet", "agent")),
        ca_pod("mirror", node_name="n", owner=None, annotations={MIRROR_POD_ANNOTATION: "x"}),
        ca_pod("done", node_name="n", phase="Succeeded", extra_spec={"restartPolicy": "Never"}),
    ]
    classified = classify_node_pods(pods, context())
    # upstream's GetPodsToMove lists DrainOk pods (the terminal "done") with the Undefined ones
    assert [p["metadata"]["name"] for p in classified.to_move] == ["a", "done"]
    assert [p["metadata"]["name"] for p in classified.daemon_sets] == ["ds"]
    blocked = classify_node_pods([*pods, ca_pod("bare", owner=None)], context())
    assert blocked.blocked
    assert blocked.reason is BlockingReason.NOT_REPLICATED


@pytest.mark.parametrize(
    ("phase", "policy"),
    [
        # upstream drain.IsPodTerminal → DrainOk, and GetPodsToMove lists DrainOk pods to move
        ("Succeeded", "Never"),
        ("Failed", "Never"),
        ("Succeeded", "OnFailure"),
        ("Failed", "OnFailure"),
        ("Failed", "Always"),
    ],
)
def test_terminal_pods_are_listed_to_move(phase: str, policy: str) -> None:
    finished = ca_pod("job-1", node_name="n", phase=phase, extra_spec={"restartPolicy": policy})
    classified = classify_node_pods([finished], context())
    assert drainability(finished, context()).outcome is Outcome.DRAIN_OK
    assert [p["metadata"]["name"] for p in classified.to_move] == ["job-1"]
    assert not classified.blocked


def test_pdb_tracker_counts_planned_disruptions() -> None:
    tracker = PdbTracker([PDB_WEB])
    assert tracker.can_disrupt([ca_pod("w1")]) is None
    # two pods of one PDB allowing 1: the second is the first too many
    assert tracker.can_disrupt([ca_pod("w1"), ca_pod("w2")])["metadata"]["name"] == "w2"  # type: ignore[index]
    tracker.disrupt([ca_pod("w1")])
    assert tracker.can_disrupt([ca_pod("w2")]) is not None
    assert tracker.can_disrupt([ca_pod("other", labels={"app": "db"})]) is None


def test_pdb_tracker_counts_evictions_in_flight() -> None:
    # --coordination one-brain: the VPA updater has evicted w9 (on the ledger, the PDB's
    # status still says 1 allowed): 1 - 1 = 0 left, the drain of w1 waits.
    tracker = PdbTracker([PDB_WEB], in_flight=[ca_pod("w9")])
    assert tracker.can_disrupt([ca_pod("w1")]) is not None
    # a pod under no PDB in flight spends nothing
    tracker = PdbTracker([PDB_WEB], in_flight=[ca_pod("x", labels={"app": "db"})])
    assert tracker.can_disrupt([ca_pod("w1")]) is None


@pytest.mark.parametrize(
    ("pods", "kw", "expected"),
    [
        # cpu 1/4 = 0.25, memory 4Gi/16Gi = 0.25 → 0.25
        ([("1", "4Gi", False)], {}, (0.25, 0.25)),
        # cpu 3/4, memory 2/16 → max 0.75
        ([("3", "2Gi", False)], {}, (0.75, 0.125)),
        # a DaemonSet pod of 1 cpu / 4Gi counted: (1+1)/4, (4+4)/16
        ([("1", "4Gi", False), ("1", "4Gi", True)], {}, (0.5, 0.5)),
        # ... ignored: out of requests and allocatable: 1/(4−1), 4/(16−4)
        ([("1", "4Gi", False), ("1", "4Gi", True)], {"skip_daemon_sets": True}, (1 / 3, 4 / 12)),
    ],
)
def test_utilization(
    pods: list[tuple[str, str, bool]], kw: dict[str, Any], expected: tuple[float, float]
) -> None:
    made = [
        ca_pod(
            f"p{i}", cpu=cpu, memory=memory, owner=("DaemonSet", "a") if ds else ("ReplicaSet", "r")
        )
        for i, (cpu, memory, ds) in enumerate(pods)
    ]
    used = node_utilization(allocatable={"cpu": 4000, "memory": 16 * GI}, pods=made, now=NOW, **kw)
    assert used is not None
    assert (used.cpu, used.memory) == pytest.approx(expected)
    assert used.value == max(expected)


def test_no_utilization_without_allocatable() -> None:
    assert node_utilization(allocatable={"cpu": 0, "memory": GI}, pods=[], now=NOW) is None


@pytest.mark.parametrize(
    ("priority", "deletion_cost", "expected"),
    [
        (0, None, 1.0),
        # priority 2^25 adds 1
        (2**25, None, 2.0),
        # 1,000,000,000 / 2^25 = 29.8 → 30.8, clamped to 10
        (1_000_000_000, None, 10.0),
        # pod-deletion-cost 2^27 adds 1
        (0, str(2**27), 2.0),
        # very negative priority clamps at −10
        (-(2**31), None, -10.0),
        # unparsable deletion cost: ignored
        (0, "lots", 1.0),
    ],
)
def test_eviction_cost(priority: int, deletion_cost: str | None, expected: float) -> None:
    annotations = {POD_DELETION_COST_ANNOTATION: deletion_cost} if deletion_cost else None
    assert (
        eviction_cost(ca_pod("p", priority=priority, annotations=annotations), PriorityResolver())
        == expected
    )


def test_node_disruption_cost_orders_local_data_first() -> None:
    resolver = PriorityResolver()
    few_with_disk = node_disruption_cost("a", [ca_pod("x", volumes=[EMPTY_DIR])], resolver)
    many_plain = node_disruption_cost("b", [ca_pod(f"p{i}") for i in range(5)], resolver)
    important = node_disruption_cost("c", [ca_pod("v", priority=2**26)], resolver)  # cost 3
    cheap = node_disruption_cost("d", [ca_pod("p"), ca_pod("q")], resolver)  # cost 2
    assert sorted([few_with_disk, many_plain, important, cheap]) == [
        cheap,
        important,
        many_plain,
        few_with_disk,
    ]
