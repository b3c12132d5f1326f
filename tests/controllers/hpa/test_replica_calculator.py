"""The replica calculator against upstream's rules (reference §1), arithmetic per row.

Pods request 1000m CPU unless said otherwise; the tolerance is 0.1 both ways; the CPU
initialization period is 2 m and the initial readiness delay 10 s (upstream's test constants).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.hpa.replica_calculator import (
    ReplicaCalcError,
    Tolerances,
    calculate_requests,
    external_per_pod_replicas,
    external_replicas,
    group_pods,
    object_per_pod_replicas,
    object_replicas,
    plain_metric_replicas,
    resource_replicas,
)
from kubescale.objects.pod import Pod

from .pod_builders import NOW, measured_pod, metrics

TOL = Tolerances(scale_down=0.1, scale_up=0.1)
CPU_INIT = timedelta(minutes=2)
DELAY = timedelta(seconds=10)


def cpu(
    pods: list[Pod],
    usage: dict[str, int],
    *,
    target: int,
    current: int | None = None,
    container: str = "",
    tolerances: Tolerances = TOL,
) -> tuple[int, int, int]:
    result = resource_replicas(
        current=len(pods) if current is None else current,
        target_utilization=target,
        resource="cpu",
        container=container,
        tolerances=tolerances,
        pods=pods,
        metrics=metrics(usage),
        cpu_initialization_period=CPU_INIT,
        initial_readiness_delay=DELAY,
        now=NOW,
    )
    return result.replicas, result.utilization, result.raw_average


def three(*names: str) -> list[Pod]:
    return [measured_pod(n) for n in names]


@pytest.mark.parametrize(
    ("pods", "usage", "target", "current", "expected"),
    [
        # 1500m of 3000m = 50%; 50/30 = 1.667 > 1.1; ceil(1.667 × 3 ready) = ceil(5.0) = 5
        (three("a", "b", "c"), {"a": 300, "b": 500, "c": 700}, 30, None, (5, 50, 500)),
        # 1400/5000 = 28%; 28/50 = 0.56; ceil(0.56 × 5) = ceil(2.8) = 3
        (
            three("a", "b", "c", "d", "e"),
            {"a": 100, "b": 300, "c": 500, "d": 250, "e": 250},
            50,
            None,
            (3, 28, 280),
        ),
        # 3060/3000 → int(306000/3000) = 102%; 1.02 within [0.9, 1.1] → current 3
        (three("a", "b", "c"), {"a": 1010, "b": 1030, "c": 1020}, 100, None, (3, 102, 1020)),
        # exactly 110%: 110/100 = 1.1 <= 1 + 0.1 (inclusive) → current
        (three("a", "b"), {"a": 1100, "b": 1100}, 100, None, (2, 110, 1100)),
        # exactly 90%: 0.9 >= 1 - 0.1 (inclusive) → current
        (three("a", "b"), {"a": 900, "b": 900}, 100, None, (2, 90, 900)),
        # 111%: 1.11 > 1.1 → ceil(1.11 × 2) = ceil(2.22) = 3
        (three("a", "b"), {"a": 1110, "b": 1110}, 100, None, (3, 111, 1110)),
        # truncation: 1001m+1000m of 2000m = int(200100/2000) = 100% (not 100.05)
        (three("a", "b"), {"a": 1001, "b": 1000}, 50, None, (4, 100, 1000)),
        # ready count, not current: current 5 but 2 ready pods at 100% of 50 → 2.0;
        # ceil(2.0 × 2 ready) = 4
        (three("a", "b"), {"a": 1000, "b": 1000}, 50, 5, (4, 100, 1000)),
    ],
)
def test_resource_utilization(
    pods: list[Pod],
    usage: dict[str, int],
    target: int,
    current: int | None,
    expected: tuple[int, int, int],
) -> None:
    assert cpu(pods, usage, target=target, current=current) == expected


def test_missing_pods_scale_down_count_at_full_request() -> None:
    # 3 of 4 pods report 400m: 1200/3000 = 40%, 40/50 = 0.8 (scale down). The missing pod
    # counts as max(100, 50)% = 1000m: 2200/4000 = 55% → 1.1, within tolerance → current 4.
    pods = three("a", "b", "c", "d")
    assert cpu(pods, {"a": 400, "b": 400, "c": 400}, target=50) == (4, 40, 400)
    # 100m each, target 100: 300/3000 = 10% → 0.1; with the missing pod at 100%:
    # 1300/4000 = int(32.5) = 32% → 0.32; ceil(0.32 × 4 metrics) = ceil(1.28) = 2
    assert cpu(pods, {"a": 100, "b": 100, "c": 100}, target=100) == (2, 10, 100)


def test_missing_pod_fallback_is_the_target_above_100_percent() -> None:
    # target 200%: 3 pods at 500m → 1500/3000 = 50% → 0.25; the missing pod counts as
    # 1000 × 200/100 = 2000m: 3500/4000 = int(87.5) = 87% → 0.435; ceil(0.435 × 4) = 2
    pods = three("a", "b", "c", "d")
    assert cpu(pods, {"a": 500, "b": 500, "c": 500}, target=200) == (2, 50, 500)


def test_missing_pods_scale_up_count_at_zero() -> None:
    # 2700/3000 = 90% → 90/50 = 1.8; the missing pod at 0: 2700/4000 = int(67.5) = 67% → 1.34;
    # ceil(1.34 × 4) = ceil(5.36) = 6
    pods = three("a", "b", "c", "d")
    assert cpu(pods, {"a": 900, "b": 900, "c": 900}, target=50) == (6, 90, 900)


def test_unready_pods_count_at_zero_only_on_scale_up() -> None:
    pods = [measured_pod("a"), measured_pod("b"), measured_pod("p", phase="Pending", ready="False")]
    # scale-up: 2000/2000 = 100% → 2.0; Pending pod at 0 with its 1000m request:
    # 2000/3000 = int(66.67) = 66% → 1.32; ceil(1.32 × 3) = ceil(3.96) = 4
    assert cpu(pods, {"a": 1000, "b": 1000}, target=50) == (4, 100, 1000)
    # scale-down: 200/2000 = 10% → 0.2; unready left out; ceil(0.2 × 2 ready) = 1
    assert cpu(pods, {"a": 100, "b": 100}, target=50) == (1, 10, 100)


def test_direction_change_guard() -> None:
    # missing-pod fill flips the direction: 2 pods at 850m → 85% of 80 → 1.0625 (within
    # tolerance, no missing → would hold); use target 70: 85/70 = 1.214 up; missing pods at 0:
    # 1700/4000 = 42% → 0.6 < 1: direction flipped → current 4
    pods = three("a", "b", "c", "d")
    assert cpu(pods, {"a": 850, "b": 850}, target=70) == (4, 85, 850)


def test_count_direction_guard_during_surge() -> None:
    # spec.replicas 2, but 4 pods (2 surge pods without metrics). 1000/2000 = 50% of 100 →
    # 0.5; the surge pods at 100%: 3000/4000 = 75% → 0.75 (still down), yet
    # ceil(0.75 × 4) = 3 > current 2 → kubernetes#84142's guard keeps 2
    pods = three("a", "b", "c", "d")
    assert cpu(pods, {"a": 500, "b": 500}, target=100, current=2) == (2, 50, 500)


def test_deleting_and_failed_pods_are_ignored() -> None:
    pods = [
        measured_pod("a"),
        measured_pod("b"),
        measured_pod("gone", deleting=True),
        measured_pod("dead", phase="Failed"),
    ]
    # only a and b count: 1200/2000 = 60% of 30 → 2.0; ceil(2 × 2 ready) = 4
    usage = {"a": 600, "b": 600, "gone": 5000, "dead": 5000}
    assert cpu(pods, usage, target=30) == (4, 60, 600)


def test_cpu_readiness_rules() -> None:
    young = NOW - timedelta(minutes=1)  # inside the 2 m CPU initialization period
    groups = group_pods(
        [
            # ready 50 s ago; metric window 30 s ended now → a full window since: ready
            measured_pod("warm", started=young, ready_since=NOW - timedelta(seconds=50)),
            # ready 10 s ago: now < (now-10s) + 30s → no full window yet: unready
            measured_pod("fresh", started=young, ready_since=NOW - timedelta(seconds=10)),
            # inside the period and not ready: unready
            measured_pod("booting", started=young, ready="False"),
            # after the period, not ready, last change 5 s after start (< 10 s delay): never
            # ready → unready
            measured_pod(
                "never",
                ready="False",
                started=NOW - timedelta(minutes=10),
                ready_since=NOW - timedelta(minutes=10) + timedelta(seconds=5),
            ),
            # after the period, not ready, but was ready after the delay: counts as ready
            measured_pod("flapped", ready="False", ready_since=NOW - timedelta(minutes=1)),
            # no Ready condition: unready; no startTime: unready
            measured_pod("nocond", ready=None),
            measured_pod("nostart", started=None),
        ],
        metrics(
            dict.fromkeys(
                ("warm", "fresh", "booting", "never", "flapped", "nocond", "nostart"), 100
            )
        ),
        resource="cpu",
        cpu_initialization_period=CPU_INIT,
        initial_readiness_delay=DELAY,
        now=NOW,
    )
    assert groups.ready_count == 2  # warm, flapped
    assert groups.unready == {"fresh", "booting", "never", "nocond", "nostart"}
    assert groups.missing == frozenset()


def test_readiness_applies_to_cpu_only() -> None:
    # memory: an unready (Ready False) running pod with a metric counts as ready
    groups = group_pods(
        [measured_pod("a", ready="False", started=NOW - timedelta(seconds=5))],
        metrics({"a": 1}),
        resource="memory",
        cpu_initialization_period=CPU_INIT,
        initial_readiness_delay=DELAY,
        now=NOW,
    )
    assert groups.ready_count == 1


def test_requests_include_sidecars_and_named_container() -> None:
    pods = [
        measured_pod("a", containers={"app": {"cpu": "500m"}}, sidecars={"proxy": {"cpu": "100m"}})
    ]
    # restartable init container (sidecar) counts: 500 + 100
    assert calculate_requests(pods, container="", resource="cpu") == {"a": 600}
    assert calculate_requests(pods, container="app", resource="cpu") == {"a": 500}
    with pytest.raises(ReplicaCalcError, match="container web not found in Pod a"):
        calculate_requests(pods, container="web", resource="cpu")
    no_request = [measured_pod("b", containers={"app": {"memory": "1Gi"}})]
    with pytest.raises(ReplicaCalcError, match="missing request for cpu in container app of Pod b"):
        calculate_requests(no_request, container="", resource="cpu")


def test_request_milli_rounds_up() -> None:
    # 0.1m → MilliValue() rounds up to 1
    pods = [measured_pod("a", containers={"app": {"cpu": "100u"}})]
    assert calculate_requests(pods, container="", resource="cpu") == {"a": 1}


def test_errors() -> None:
    with pytest.raises(ReplicaCalcError, match="no pods returned by selector"):
        cpu([], {"a": 1}, target=50, current=1)
    with pytest.raises(ReplicaCalcError, match=r"did not receive metrics for targeted pods"):
        cpu([measured_pod("p", phase="Pending")], {"p": 1}, target=50)
    with pytest.raises(ReplicaCalcError, match="no metrics returned matched known pods"):
        # the only metric is of a pod the selector did not return (a is missing)
        cpu([measured_pod("a")], {"x": 1}, target=50)


def test_superfluous_metrics_are_skipped() -> None:
    # metric of a pod the selector did not return: not in requests → skipped in the ratio
    assert cpu([measured_pod("a")], {"a": 500, "other": 9000}, target=50) == (1, 50, 500)


def plain(pods: list[Pod], usage: dict[str, int], *, target: int, current: int) -> tuple[int, int]:
    return plain_metric_replicas(
        current=current,
        target_usage=target,
        resource="",
        tolerances=TOL,
        pods=pods,
        metrics=metrics(usage),
        cpu_initialization_period=CPU_INIT,
        initial_readiness_delay=DELAY,
        now=NOW,
    )


def test_pods_metric() -> None:
    pods = three("a", "b", "c")
    # average (10000+20000+30000)/3 = 20000 milli; 20000/10000 = 2.0; ceil(2 × 3) = 6
    assert plain(pods, {"a": 10000, "b": 20000, "c": 30000}, target=10000, current=3) == (6, 20000)
    # integer average: (1+2)/2 = 1 milli (floor); 1/1 = 1.0 → within → current
    assert plain(three("a", "b"), {"a": 1, "b": 2}, target=1, current=2) == (2, 1)


def test_pods_metric_missing_pod_scale_down_counts_at_target() -> None:
    pods = three("a", "b", "c", "d")
    # avg 2000 of target 10000 → 0.2; missing d counts as 10000: (6000+10000)/4 = 4000 → 0.4;
    # ceil(0.4 × 4) = 2
    assert plain(pods, {"a": 2000, "b": 2000, "c": 2000}, target=10000, current=4) == (2, 2000)


def test_object_and_external_value() -> None:
    pods = [measured_pod("a"), measured_pod("b"), measured_pod("c", ready="False")]
    # 20/15 = 1.333; Running+Ready pods = 2; ceil(1.333 × 2) = ceil(2.667) = 3
    assert object_replicas(current=3, usage=20000, target=15000, tolerances=TOL, pods=pods) == 3
    # from zero: ceil(20/15) = 2, no pods needed, no tolerance (TestScaleUpFromZeroCMObject)
    assert object_replicas(current=0, usage=20000, target=15000, tolerances=TOL, pods=[]) == 2
    # from zero with ratio exactly 1: ceil(1) = 1 (tolerance ignored)
    assert object_replicas(current=0, usage=1000, target=1000, tolerances=TOL, pods=[]) == 1
    # to zero: usage 0 → ceil(0 × 2) = 0
    assert object_replicas(current=3, usage=0, target=1000, tolerances=TOL, pods=pods) == 0
    # external: series summed 8600m + 1400m = 10000m; 10000/5000 = 2.0; 2 ready → 4
    assert external_replicas(
        current=3, values=(8600, 1400), target=5000, tolerances=TOL, pods=pods
    ) == (4, 10000)
    with pytest.raises(ReplicaCalcError, match="unable to calculate ready pods"):
        object_replicas(current=3, usage=20000, target=1000, tolerances=TOL, pods=[])


def test_per_pod_object_and_external_use_status_replicas() -> None:
    # 6000 over 3 status replicas vs 1000 per pod: ratio 6000/(1000×3) = 2.0 →
    # ceil(6000/1000) = 6; usage reported ceil(6000/3) = 2000
    assert object_per_pod_replicas(status_replicas=3, usage=6000, target=1000, tolerances=TOL) == (
        6,
        2000,
    )
    # 3100/(1000×3) = 1.033 within → 3; usage ceil(3100/3) = ceil(1033.3) = 1034
    assert external_per_pod_replicas(
        status_replicas=3, values=(3000, 100), target=1000, tolerances=TOL
    ) == (3, 1034)


def test_per_hpa_tolerances() -> None:
    pods = three("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
    usage = dict.fromkeys("abcdefghij", 1050)
    # 105% of 100: 1.05 > 1 + 0.02 → ceil(1.05 × 10) = ceil(10.5) = 11 (KEP-4951 example)
    assert (
        cpu(pods, usage, target=100, tolerances=Tolerances(scale_down=0.1, scale_up=0.02))[0] == 11
    )
    # 92%: 0.92 >= 1 - 0.1 → hold 10
    usage = dict.fromkeys("abcdefghij", 920)
    assert (
        cpu(pods, usage, target=100, tolerances=Tolerances(scale_down=0.1, scale_up=0.02))[0] == 10
    )


@settings(max_examples=400, deadline=None)
@given(
    current=st.integers(1, 12),
    reported=st.lists(st.integers(0, 3000), min_size=1, max_size=8),
    missing=st.integers(1, 4),
    pending=st.integers(0, 3),
    target=st.sampled_from([30, 50, 80, 100, 150]),
)
def test_missing_or_unready_pods_never_reverse_the_direction(
    current: int, reported: list[int], missing: int, pending: int, target: int
) -> None:
    """With pods lacking metrics (a rollout's surge pods, pods starting), the proposal never
    moves against the measured direction: ratio < 1 never scales up, ratio > 1 never down."""
    names = [f"r{i}" for i in range(len(reported))]
    pods = [measured_pod(n) for n in names]
    pods += [measured_pod(f"m{i}") for i in range(missing)]
    pods += [measured_pod(f"p{i}", phase="Pending", ready="False") for i in range(pending)]
    replicas, utilization, _ = cpu(
        pods, dict(zip(names, reported, strict=True)), target=target, current=current
    )
    ratio = utilization / target
    if ratio < 1:
        assert replicas <= current
    if ratio > 1:
        assert replicas >= current
