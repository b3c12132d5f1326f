"""The cluster state registry (reference §1 step 10-15, §2.6): health, upcoming nodes,
scale-up timeouts with backoff, unregistered nodes, incorrect sizes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    NodeGroup,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
    InstanceCreationFailed,
    ScaleUpTimedOut,
)
from kubescale.controllers.autoscaler.model.node_facts import node_readiness
from kubescale.objects.node import Node
from tests.controllers.autoscaler.builders import NOW, ca_node, group, snapshot


def registry() -> ClusterStateRegistry:
    return ClusterStateRegistry(
        health=HealthConfig(ok_total_unready_count=3, max_total_unready_percentage=45.0),
        backoff=ExponentialBackoff(
            initial=timedelta(minutes=5),
            maximum=timedelta(minutes=30),
            reset_timeout=timedelta(hours=3),
        ),
    )


def update(
    csr: ClusterStateRegistry,
    nodes: Sequence[Node],
    *groups: NodeGroup,
    at: timedelta = timedelta(0),
) -> list[Any]:
    return list(
        csr.update(nodes=nodes, snapshot=snapshot(*groups), readiness=node_readiness, now=NOW + at)
    )


OLD = NOW - timedelta(hours=1)  # created long before: unready means Unready, not NotStarted


@pytest.mark.parametrize(
    ("total", "unready", "healthy"),
    [
        (10, 3, True),  # 3 ≤ ok count 3
        (10, 4, True),  # 4 > 3 but 4 ≤ 45% × 10 = 4.5
        (10, 5, False),  # 5 > 3 and 5 > 4.5
        (4, 4, False),  # 4 > 3 and 4 > 1.8
        (2, 2, True),  # 2 ≤ 3, whatever the share
        (100, 45, True),  # 45 ≤ 45.0
        (100, 46, False),  # 46 > 45.0
    ],
)
def test_cluster_health(total: int, unready: int, healthy: bool) -> None:
    csr = registry()
    nodes = [ca_node(f"n{i}", ready=i >= unready, created=OLD) for i in range(total)]
    update(csr, nodes)
    assert csr.is_cluster_healthy() is healthy


def test_young_unready_nodes_are_not_started_not_unready() -> None:
    csr = registry()
    # created 10 minutes ago, < max-node-startup-time 15m: NotStarted, not counted as unready
    nodes = [ca_node(f"n{i}", ready=False, created=NOW - timedelta(minutes=10)) for i in range(5)]
    update(csr, nodes)
    assert len(csr.total.not_started) == 5
    assert csr.total.unready == []
    assert csr.is_cluster_healthy()


def test_startup_taint_makes_a_node_not_ready() -> None:
    tainted = ca_node(
        "n0",
        taints=[
            {"key": "startup-taint.cluster-autoscaler.kubernetes.io/cni", "effect": "NoSchedule"}
        ],
    )
    assert node_readiness(tainted).ready is False
    custom = ca_node("n1", taints=[{"key": "example.com/warming", "effect": "NoSchedule"}])
    assert node_readiness(custom).ready is True
    assert node_readiness(custom, ("example.com/warming",)).ready is False


# Upstream's GetUpcomingNodes (clusterstate.go): for every node group,
#   upcoming = target − (ready + unready + suspended + longUnregistered), kept when > 0;
# registered NotStarted nodes and fresh unregistered instances are part of it. Neither a
# scale-up request nor a backoff enters the rule: a process that did not raise the target (a new
# leader, a restart) sees the same count.
PENDING = Instance(id="pending-machine-default_a-p", state=InstanceState.CREATING)
BOOTING = NOW - timedelta(minutes=2)  # < max-node-startup-time 15m: NotStarted


@pytest.mark.parametrize(
    ("target", "ready", "unready", "not_started", "pending", "requested", "backoff", "expected"),
    [
        (5, 2, 0, 0, 0, False, False, 3),  # 5 − 2 = 3, with no request known (new leader)
        (5, 2, 0, 0, 0, True, False, 3),  # the same with the request remembered
        (5, 2, 0, 0, 0, False, True, 3),  # backed off: still coming (upstream does not look)
        (5, 2, 1, 0, 0, False, False, 2),  # 5 − (2 ready + 1 unready) = 2
        (5, 2, 0, 2, 0, False, False, 3),  # NotStarted nodes are upcoming: 5 − 2 = 3
        (5, 2, 0, 0, 3, False, False, 3),  # fresh unregistered instances too: 5 − 2 = 3
        (2, 2, 0, 0, 0, False, False, None),  # 2 − 2 = 0: not listed
        (1, 2, 0, 0, 0, False, False, None),  # 1 − 2 < 0: not listed
    ],
)
def test_upcoming_nodes_come_from_target_size_against_registered_nodes(
    *,
    target: int,
    ready: int,
    unready: int,
    not_started: int,
    pending: int,
    requested: bool,
    backoff: bool,
    expected: int | None,
) -> None:
    csr = registry()
    nodes = (
        [ca_node(f"a-r{i}") for i in range(ready)]
        + [ca_node(f"a-u{i}", ready=False, created=OLD) for i in range(unready)]
        + [ca_node(f"a-n{i}", ready=False, created=BOOTING) for i in range(not_started)]
    )
    extra = tuple(replace(PENDING, id=f"{PENDING.id}{i}") for i in range(pending))
    g = group("a", nodes=nodes, target=target, extra_instances=extra)
    if requested:
        csr.register_scale_up(g, target - ready, NOW)
    if backoff:
        csr.register_failed_scale_up(
            g, InstanceErrorInfo(error_class=ErrorClass.OTHER, code="x", message="x"), NOW
        )
    update(csr, nodes, g)
    counts, registered = csr.upcoming_nodes()
    if expected is None:
        assert (counts, registered) == ({}, {})
    else:
        assert counts == {"a": expected}
        assert registered == {"a": [f"a-n{i}" for i in range(not_started)]}
    # "is scaling up" (timeouts, instance errors) still needs this process's own request
    assert csr.is_scaling_up("a") is (requested and expected is not None)


def test_long_unregistered_instances_are_not_upcoming() -> None:
    csr = registry()
    existing = [ca_node("a-0")]
    g = group("a", nodes=existing, target=3, extra_instances=(PENDING,))
    update(csr, existing, g)  # the pending machine is first seen now
    assert csr.upcoming_nodes()[0] == {"a": 2}  # 3 − 1 ready
    # 15m (max-node-provision-time) later it is long unregistered: 3 − (1 + 1) = 1
    update(csr, existing, g, at=timedelta(minutes=15, seconds=1))
    assert csr.upcoming_nodes()[0] == {"a": 1}


def test_scale_up_times_out_after_max_node_provision_time() -> None:
    csr = registry()
    pending = tuple(
        Instance(id=f"pending-machine-default_a-{i}", state=InstanceState.CREATING)
        for i in range(3)
    )
    g = group("a", target=3, extra_instances=pending)
    csr.register_scale_up(g, 3, NOW)
    # at +15m the request is due (expected_add = NOW+15m is not before now): nothing yet
    assert update(csr, [], g, at=timedelta(minutes=15)) == []
    assert "a" in csr.scale_up_requests
    effects = update(csr, [], g, at=timedelta(minutes=15, seconds=10))
    assert len(effects) == 1
    timed_out = effects[0]
    assert isinstance(timed_out, ScaleUpTimedOut)
    assert timed_out.increase == 3
    assert timed_out.waited == timedelta(minutes=15, seconds=10)
    assert "a" not in csr.scale_up_requests
    backed_off = csr.backoff.status("a", NOW + timedelta(minutes=15, seconds=10))
    assert backed_off is not None
    assert backed_off.error.message == "Scale-up timed out for node group a after 15m10s"
    assert csr.scale_up_safety("a", NOW + timedelta(minutes=16)).safe is False


def test_fulfilled_requests_are_removed_without_effect() -> None:
    csr = registry()
    nodes = [ca_node("a-0"), ca_node("a-1")]
    g = group("a", nodes=nodes)
    csr.register_scale_up(g, 2, NOW)
    assert update(csr, nodes, g, at=timedelta(minutes=3)) == []
    assert csr.scale_up_requests == {}


def test_unregistered_instances_turn_long_unregistered() -> None:
    csr = registry()
    instance = Instance(id="sim://a-1", state=InstanceState.RUNNING)
    registered = ca_node("a-0")
    g = group("a", nodes=[registered], extra_instances=[instance])
    update(csr, [registered], g)
    assert csr.per_group["a"].unregistered == ["sim://a-1"]
    # first-seen time is kept: 15m later it is not yet long (since + 15m is not before now)
    update(csr, [registered], g, at=timedelta(minutes=15))
    assert csr.per_group["a"].long_unregistered == []
    update(csr, [registered], g, at=timedelta(minutes=16))
    assert csr.per_group["a"].long_unregistered == ["sim://a-1"]
    # acceptable range: min = target 2 − long unregistered 1 = 1
    assert csr.ranges["a"].min_nodes == 1
    assert [u.instance_id for u in csr.long_unregistered()] == ["sim://a-1"]


def test_incorrect_size_keeps_its_first_observation() -> None:
    csr = registry()
    nodes = [ca_node("a-0")]
    # target 3 but one instance known and registered: 1 < 3 − 0 unregistered
    g = group("a", nodes=nodes, target=3)
    update(csr, nodes, g)
    first = csr.incorrect_sizes["a"]
    assert (first.expected, first.current, first.first_observed) == (3, 1, NOW)
    update(csr, nodes, g, at=timedelta(minutes=5))
    assert csr.incorrect_sizes["a"].first_observed == NOW
    # a different mismatch restarts the clock
    two = [ca_node("a-0"), ca_node("a-1")]
    update(csr, two, group("a", nodes=two, target=3), at=timedelta(minutes=6))
    assert csr.incorrect_sizes["a"].first_observed == NOW + timedelta(minutes=6)


@pytest.mark.parametrize(
    ("target", "ready", "unready", "healthy"),
    [
        # min nodes = target 10; unjustified = 10 − 2 = 8 > 3 and > 45% × 10 nodes → unhealthy
        (10, 2, 8, False),
        # unjustified = 10 − 7 = 3 ≤ 3 → healthy
        (10, 7, 3, True),
        # target 4, 0 ready 4 unready: unjustified 4 > 3 and 4 > 1.8 → unhealthy
        (4, 0, 4, False),
        # target 3, 0 ready: unjustified 3 ≤ 3 → healthy
        (3, 0, 3, True),
    ],
)
def test_node_group_health(target: int, ready: int, unready: int, healthy: bool) -> None:
    csr = registry()
    nodes = [ca_node(f"a-{i}", ready=i < ready, created=OLD) for i in range(ready + unready)]
    update(csr, nodes, group("a", nodes=nodes, target=target))
    assert csr.is_node_group_healthy("a") is healthy


def test_a_group_without_nodes_is_healthy_at_zero_or_while_scaling_from_zero() -> None:
    csr = registry()
    g = group("a", target=0)
    update(csr, [], g)
    assert csr.is_node_group_healthy("a")
    up = group(
        "a",
        target=2,
        extra_instances=[Instance(id="pending-machine-x", state=InstanceState.CREATING)],
    )
    csr.register_scale_up(up, 2, NOW)
    update(csr, [], up)
    # min nodes = 2 − 2 (request) = 0 and target > 0 → healthy
    assert csr.is_node_group_healthy("a")


def test_new_creation_errors_of_a_scaling_group_back_it_off() -> None:
    csr = registry()
    error = InstanceErrorInfo(
        error_class=ErrorClass.OTHER,
        code="ProvisioningFailed",
        message="Machine provisioning failed",
    )
    failed = Instance(id="failed-machine-default_a-1", state=InstanceState.CREATING, error=error)
    pending = Instance(id="pending-machine-default_a-2", state=InstanceState.CREATING)
    g = group("a", target=2, extra_instances=[failed, pending])
    csr.register_scale_up(g, 2, NOW)
    effects = update(csr, [], g, at=timedelta(seconds=30))
    assert effects == [InstanceCreationFailed(group=g, count=1, error=error)]
    # the request shrinks by the failed instance: 2 − 1 = 1
    assert csr.scale_up_requests["a"].increase == 1
    assert csr.backoff.status("a", NOW + timedelta(seconds=30)) is not None
    # the same failed instance is not counted twice
    assert update(csr, [], g, at=timedelta(seconds=40)) == []
