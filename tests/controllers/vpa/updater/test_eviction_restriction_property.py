"""Property: whatever the groups, tolerance, minReplicas, disruptions still in flight from earlier
loops and order of tries, one loop never evicts more running pods than ``isPodDisruptable``
budgets and never touches a group below minReplicas.

A group is sized by ``max(spec.replicas, live pods)`` (kubescale's rule, safer than upstream's
declared count: :func:`configured_replicas`); a pod whose eviction an earlier loop made (or may
have made) and the informer does not show yet counts as evicted and is not tried again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    EvictionRestriction,
)
from kubescale.coordination.disruption_ledger import DisruptionKind
from kubescale.objects.pod import Pod
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.scale import ReplicaCountedController
from kubescale.objects.vpa import PodUpdatePolicy
from tests.controllers.vpa.updater.test_eviction_restriction import (
    NOW,
    NS,
    controlled_by,
    live_pod,
)

group_strategy = st.tuples(
    st.integers(min_value=1, max_value=8),  # configured replicas
    st.integers(min_value=0, max_value=8),  # running pods
    st.integers(min_value=0, max_value=3),  # pending pods
    st.integers(min_value=0, max_value=3),  # running pods whose eviction is in flight
)


def running_budget(*, configured: int, running: int, tolerance: float, in_flight: int) -> int:
    """Evictions of running pods allowed in one loop, solved from the budget inequality
    ``running − (in_flight + evicted) > configured − int(configured × tolerance)``, or the one
    pod of the "at least one" rule when nothing is in flight."""
    allowance = int(configured * tolerance)
    if allowance == 0 and configured == running and in_flight == 0:
        return min(1, running)
    should_be_alive = configured - allowance
    return max(0, min(running - in_flight, running - in_flight - should_be_alive))


@settings(max_examples=200, deadline=None)
@given(
    groups=st.lists(group_strategy, min_size=1, max_size=4),
    tolerance=st.floats(min_value=0.0, max_value=1.0),
    min_replicas=st.integers(min_value=0, max_value=6),
    per_vpa_min=st.one_of(st.none(), st.integers(min_value=0, max_value=6)),
    tries=st.lists(st.integers(min_value=0, max_value=200), max_size=40),
)
def test_one_loop_never_exceeds_budget(
    groups: list[tuple[int, int, int, int]],
    tolerance: float,
    min_replicas: int,
    per_vpa_min: int | None,
    tries: list[int],
) -> None:
    pods: list[Pod] = []
    controllers: dict[ControllerKey, ReplicaCountedController] = {}
    in_flight: dict[str, DisruptionKind] = {}
    for index, (configured, running, pending, flying) in enumerate(groups):
        owner = f"rs{index}"
        group: ReplicaSet = {"spec": {"replicas": configured}}
        controllers[ControllerKey(namespace=NS, kind="ReplicaSet", name=owner)] = group
        pods += [
            live_pod(name=f"{owner}-r{i}", owner_references=controlled_by(name=owner))
            for i in range(running)
        ]
        pods += [
            live_pod(
                name=f"{owner}-p{i}",
                owner_references=controlled_by(name=owner),
                status={"phase": "Pending", "conditions": []},
            )
            for i in range(pending)
        ]
        in_flight.update(
            (f"{NS}/{owner}-r{i}", DisruptionKind.EVICTION) for i in range(min(flying, running))
        )
    policy: PodUpdatePolicy = {} if per_vpa_min is None else {"minReplicas": per_vpa_min}
    restriction = EvictionRestriction.build(
        pods=pods,
        controllers=controllers,
        vpa={"spec": {"updatePolicy": policy}},
        min_replicas=min_replicas,
        eviction_tolerance=tolerance,
        in_flight=in_flight,
    )
    evicted: set[str] = set()
    order = [pods[t % len(pods)] for t in tries] if pods else []
    # Random tries first, then every pod once: the end state is the loop's full budget.
    for pod in [*order, *pods]:
        if restriction.can_evict(pod, now=NOW):
            restriction.record_eviction(pod)
            name = pod["metadata"]["name"]
            assert name not in evicted
            evicted.add(name)

    required = min_replicas if per_vpa_min is None else per_vpa_min
    for index, (declared, running, pending, drawn_in_flight) in enumerate(groups):
        owner = f"rs{index}"
        flying = min(drawn_in_flight, running)
        running_gone = sum(1 for n in evicted if n.startswith(f"{owner}-r"))
        pending_gone = sum(1 for n in evicted if n.startswith(f"{owner}-p"))
        assert not any(f"{owner}-r{i}" in evicted for i in range(flying))  # never twice
        if running + pending < required:
            assert running_gone == pending_gone == 0
            continue
        configured = max(declared, running + pending)
        budget = running_budget(
            configured=configured, running=running, tolerance=tolerance, in_flight=flying
        )
        assert running_gone == budget
        assert pending_gone == pending
        # Each eviction of this loop left at least configured − tolerance alive, except the
        # "at least one" pod (tolerance 0, nothing in flight). Pods in flight came earlier.
        allowance = int(configured * tolerance)
        at_least_one = allowance == 0 and flying == 0 and running_gone == 1
        if running_gone > 0 and not at_least_one:
            assert running - flying - running_gone >= configured - allowance
