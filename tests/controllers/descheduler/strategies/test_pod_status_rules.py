"""RemovePodsHavingTooManyRestarts, PodLifeTime and RemoveFailedPods (reference §1a)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kubescale.scheduling.policy.fields import PolicyError
from tests.controllers.descheduler.builders import (
    NOW,
    cycle_node,
    cycle_pod,
    evicted,
    owner,
    policy,
    run,
    stamp,
)

NODES = [cycle_node("n1"), cycle_node("n2")]


def container_status(
    restarts: int = 0,
    *,
    waiting: str | None = None,
    terminated: tuple[str, int] | None = None,
    name: str = "app",
) -> dict[str, Any]:
    state: dict[str, Any] = {"running": {}}
    if waiting:
        state = {"waiting": {"reason": waiting}}
    if terminated:
        state = {"terminated": {"reason": terminated[0], "exitCode": terminated[1]}}
    return {"name": name, "restartCount": restarts, "state": state}


def restarts(**args: Any) -> tuple[str, str, dict[str, Any]]:
    return ("deschedule", "RemovePodsHavingTooManyRestarts", args)


def test_too_many_restarts_threshold_init_containers_and_order() -> None:
    pods = [
        # 3 + 2 = 5 restarts
        cycle_pod(
            "five",
            "n1",
            status={"containerStatuses": [container_status(3), container_status(2, name="b")]},
        ),
        # 9 restarts
        cycle_pod("nine", "n1", status={"containerStatuses": [container_status(9)]}),
        # 1 restart + 6 in an init container: 1 without, 7 with includingInitContainers
        cycle_pod(
            "init",
            "n1",
            status={
                "containerStatuses": [container_status(1)],
                "initContainerStatuses": [container_status(6, name="init")],
            },
        ),
    ]
    # threshold 5: five (5 >= 5) and nine; most restarts first: nine, five
    assert evicted(run(policy(restarts(podRestartThreshold=5)), NODES, pods)) == ["nine", "five"]
    args = {"podRestartThreshold": 5, "includingInitContainers": True}
    assert evicted(run(policy(restarts(**args)), NODES, pods)) == ["nine", "init", "five"]


def test_too_many_restarts_states() -> None:
    pods = [
        cycle_pod(
            "crashing",
            "n1",
            status={"containerStatuses": [container_status(4, waiting="CrashLoopBackOff")]},
        ),
        cycle_pod("running", "n1", status={"containerStatuses": [container_status(6)]}),
        cycle_pod(
            "pending",
            "n1",
            phase="Pending",
            status={"containerStatuses": [container_status(8, waiting="ContainerCreating")]},
        ),
    ]
    args = {"podRestartThreshold": 3, "states": ["CrashLoopBackOff"]}
    assert evicted(run(policy(restarts(**args)), NODES, pods)) == ["crashing"]
    args = {"podRestartThreshold": 3, "states": ["Running"]}  # phase Running
    assert evicted(run(policy(restarts(**args)), NODES, pods)) == ["running", "crashing"]


def test_too_many_restarts_validation() -> None:
    with pytest.raises(PolicyError, match="podRestartThreshold: must be greater than 0"):
        policy(restarts(podRestartThreshold=0))
    with pytest.raises(PolicyError, match=r"states\[0\]: 'Pending' is not one of"):
        policy(restarts(podRestartThreshold=1, states=["Pending"]))


def lifetime(**args: Any) -> tuple[str, str, dict[str, Any]]:
    return ("deschedule", "PodLifeTime", args)


def test_pod_lifetime_age_is_strictly_greater_and_oldest_first() -> None:
    pods = [
        cycle_pod("exactly", "n1", created=NOW - timedelta(seconds=600)),  # 600 > 600? no
        cycle_pod("older", "n2", created=NOW - timedelta(seconds=900)),
        cycle_pod("old", "n1", created=NOW - timedelta(seconds=601)),
        cycle_pod("future", "n1", created=NOW + timedelta(seconds=60)),
    ]
    args = {"maxPodLifeTimeSeconds": 600}
    assert evicted(run(policy(lifetime(**args)), NODES, pods)) == ["older", "old"]


def test_pod_lifetime_filters_are_anded_values_ored() -> None:
    old = NOW - timedelta(hours=3)
    pods = [
        cycle_pod(
            "pulling",
            "n1",
            created=old,
            phase="Pending",
            status={"containerStatuses": [container_status(waiting="ImagePullBackOff")]},
        ),
        cycle_pod(
            "oom",
            "n1",
            created=old,
            status={"containerStatuses": [container_status(terminated=("OOMKilled", 137))]},
        ),
        cycle_pod(
            "young-pulling",
            "n1",
            created=NOW - timedelta(minutes=1),
            phase="Pending",
            status={"containerStatuses": [container_status(waiting="ImagePullBackOff")]},
        ),
        cycle_pod("running", "n1", created=old),
        cycle_pod("reason", "n1", created=old, status={"reason": "NodeLost"}),
    ]
    # older than an hour AND (ImagePullBackOff OR OOMKilled OR NodeLost); equal ages keep the
    # node's listing order (creation time, then name)
    args = {"maxPodLifeTimeSeconds": 3600, "states": ["ImagePullBackOff", "OOMKilled", "NodeLost"]}
    assert evicted(run(policy(lifetime(**args)), NODES, pods)) == ["oom", "pulling", "reason"]
    # exit codes alone
    assert evicted(run(policy(lifetime(exitCodes=[137])), NODES, pods)) == ["oom"]


def test_pod_lifetime_conditions_and_owner_kinds() -> None:
    changed = stamp(NOW - timedelta(minutes=30))
    unready = {
        "type": "Ready",
        "status": "False",
        "reason": "ContainersNotReady",
        "lastTransitionTime": changed,
    }
    pods = [
        cycle_pod("unready", "n1", status={"conditions": [unready]}),
        cycle_pod(
            "unready-job", "n1", status={"conditions": [unready]}, owners=[owner("Job", "batch")]
        ),
        cycle_pod("ready", "n1", status={"conditions": [{**unready, "status": "True"}]}),
    ]
    condition = {"type": "Ready", "status": "False", "minTimeSinceLastTransitionSeconds": 1200}
    # 30 minutes = 1800 s >= 1200
    assert evicted(run(policy(lifetime(conditions=[condition])), NODES, pods)) == [
        "unready",
        "unready-job",
    ]
    too_soon = {**condition, "minTimeSinceLastTransitionSeconds": 3600}
    assert evicted(run(policy(lifetime(conditions=[too_soon])), NODES, pods)) == []
    args = {"conditions": [condition], "ownerKinds": {"exclude": ["Job"]}}
    assert evicted(run(policy(lifetime(**args)), NODES, pods)) == ["unready"]
    args = {"conditions": [condition], "ownerKinds": {"include": ["Job"]}}
    assert evicted(run(policy(lifetime(**args)), NODES, pods)) == ["unready-job"]


def test_pod_lifetime_validation() -> None:
    with pytest.raises(PolicyError, match="at least one of maxPodLifeTimeSeconds"):
        policy(lifetime())
    with pytest.raises(PolicyError, match=r"states\[0\]: 'Sleeping' is not an allowed state"):
        policy(lifetime(states=["Sleeping"]))
    with pytest.raises(PolicyError, match="ownerKinds: only one of include and exclude"):
        policy(lifetime(maxPodLifeTimeSeconds=1, ownerKinds={"include": ["A"], "exclude": ["B"]}))


def failed(**args: Any) -> tuple[str, str, dict[str, Any] | None]:
    return ("deschedule", "RemoveFailedPods", args or None)


def test_remove_failed_pods_default_min_lifetime_is_an_hour() -> None:
    pods = [
        cycle_pod("recent", "n1", phase="Failed", created=NOW - timedelta(seconds=3599)),
        cycle_pod(
            "hour", "n1", phase="Failed", created=NOW - timedelta(seconds=3600)
        ),  # 3600 >= 3600
        cycle_pod("running", "n1", created=NOW - timedelta(days=1)),
    ]
    assert evicted(run(policy(failed()), NODES, pods)) == ["hour"]
    # node listing order: created first, listed first
    assert evicted(run(policy(failed(minPodLifetimeSeconds=0)), NODES, pods)) == ["hour", "recent"]


def test_remove_failed_pods_reasons_exit_codes_owner_kinds() -> None:
    # created an hour apart, oldest first: the node lists them in this order
    pods = [
        cycle_pod(
            "oom",
            "n1",
            phase="Failed",
            created=NOW - timedelta(hours=5),
            status={"containerStatuses": [container_status(terminated=("OOMKilled", 137))]},
        ),
        cycle_pod(
            "evicted",
            "n1",
            phase="Failed",
            created=NOW - timedelta(hours=4),
            status={"reason": "Evicted"},
        ),
        cycle_pod(
            "job",
            "n1",
            phase="Failed",
            owners=[owner("Job", "nightly")],
            created=NOW - timedelta(hours=3),
            status={"containerStatuses": [container_status(terminated=("Error", 1))]},
        ),
        cycle_pod(
            "init",
            "n1",
            phase="Failed",
            created=NOW - timedelta(hours=2),
            status={"initContainerStatuses": [container_status(terminated=("Error", 2), name="i")]},
        ),
    ]
    base = {"minPodLifetimeSeconds": 0}
    assert evicted(run(policy(failed(**base, reasons=["OOMKilled", "Evicted"])), NODES, pods)) == [
        "oom",
        "evicted",
    ]
    assert evicted(run(policy(failed(**base, exitCodes=[1, 2])), NODES, pods)) == ["job"]
    with_init = {**base, "exitCodes": [1, 2], "includingInitContainers": True}
    assert evicted(run(policy(failed(**with_init)), NODES, pods)) == ["job", "init"]
    assert evicted(run(policy(failed(**base, excludeOwnerKinds=["Job"])), NODES, pods)) == [
        "oom",
        "evicted",
        "init",
    ]


def test_failed_bare_pods_need_the_protection_disabled() -> None:
    pods = [cycle_pod("bare", "n1", phase="Failed", owners=[])]
    assert evicted(run(policy(failed(minPodLifetimeSeconds=0)), NODES, pods)) == []
    evictor = {"podProtections": {"defaultDisabled": ["FailedBarePods"]}}
    the_policy = policy(failed(minPodLifetimeSeconds=0), evictor=evictor)
    assert evicted(run(the_policy, NODES, pods)) == ["bare"]
