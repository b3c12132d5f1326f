"""``kubescale report``'s VPA updater plan: the updater's own decision on the report's reading,
collected without an executor. Expected plans worked out from upstream's updater rules
(``update_priority_calculator.go`` AddPod, ``pods_eviction_restriction.go`` CanEvict) with its
default flags: ``--min-replicas`` 2, ``--eviction-tolerance`` 0.5, ``--pod-update-threshold``
0.1, lifetime threshold 12 h.

The workload: Deployment ``web`` → ReplicaSet ``web-1`` (``replicas`` pods, 2 by default), each
pod asking ``requests``; its VPA recommends cpu lower 200m / target 250m / upper 500m.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubescale.report.cluster_reading import ClusterReading
from kubescale.report.report_assembly import assemble_report
from kubescale.report.updater_plan import updater_plan
from tests import builders

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
BAND = builders.vpas.container_recommendation(
    "app", target={"cpu": "250m"}, lower_bound={"cpu": "200m"}, upper_bound={"cpu": "500m"}
)


def _reading(
    *, requests: str, replicas: int = 2, age: timedelta = timedelta(hours=1), mode: str = "Auto"
) -> ClusterReading:
    started = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = {"app": "web"}
    template = builders.workloads.pod_template(
        labels=labels, containers=[builders.pods.container(requests={"cpu": requests})]
    )
    deployment = builders.workloads.deployment(
        name="web", replicas=replicas, match_labels=labels, template=template
    )
    replica_set = builders.workloads.replica_set(
        name="web-1",
        replicas=replicas,
        match_labels=labels,
        template=template,
        owner_references=[builders.meta.owner_reference(kind="Deployment", name="web")],
    )
    pods = [
        builders.pods.typed_pod(
            name=f"web-1-{i}",
            labels=labels,
            owner_references=[builders.meta.owner_reference(kind="ReplicaSet", name="web-1")],
            containers=[builders.pods.container(requests={"cpu": requests})],
            node_name="node-a",
            status={"phase": "Running", "startTime": started},
        )
        for i in range(replicas)
    ]
    vpa = builders.vpas.typed_vpa(
        name="web-vpa",
        target=builders.vpas.target_ref(),
        update_mode=mode,
        recommendations=[BAND],
    )
    return ClusterReading(workloads=[deployment], replica_sets=[replica_set], pods=pods, vpas=[vpa])


BELOW = "app cpu request 100m below the lower bound 200m (target 250m)"


@pytest.mark.parametrize(
    ("reading", "expected"),
    [
        # 100m < lowerBound 200m: outside the range, evicted at any age. Budget of 2 replicas:
        # tolerance int(2 × 0.5) = 1, so one may go (running 2 − evicted 0 > 2 − 1), then
        # running 2 − evicted 1 > 1 fails: one eviction.
        (_reading(requests="100m"), [("evict", "web-1-0", BELOW)]),
        # 4 replicas below: tolerance int(4 × 0.5) = 2 → 4 − 0 > 2, 4 − 1 > 2, 4 − 2 > 2 no:
        # two evictions, in name order (equal priority).
        (
            _reading(requests="100m", replicas=4),
            [("evict", "web-1-0", BELOW), ("evict", "web-1-1", BELOW)],
        ),
        # 300m within [200m, 500m], 1 h old < 12 h: nothing
        (_reading(requests="300m"), []),
        # 300m within the band, 13 h old: ResourceDiff |300 − 250| / 300 = 0.17 ≥ 0.1: evicted
        (
            _reading(requests="300m", age=timedelta(hours=13)),
            [
                (
                    "evict",
                    "web-1-0",
                    "requests 0.17 from the target (--pod-update-threshold 0.1) after running "
                    "13h0m0s (--in-recommendation-bounds-eviction-lifetime-threshold 12h0m0s)",
                )
            ],
        ),
        # 260m, 13 h old: |260 − 250| / 260 = 0.038 < 0.1: nothing
        (_reading(requests="260m", age=timedelta(hours=13)), []),
        # mode Off, or Initial: the updater never acts
        (_reading(requests="100m", mode="Off"), []),
        (_reading(requests="100m", mode="Initial"), []),
        # 1 live replica < --min-replicas 2: the group is skipped
        (_reading(requests="100m", replicas=1), []),
    ],
)
def test_the_plan_the_updater_would_make(
    reading: ClusterReading, expected: list[tuple[str, str, str]]
) -> None:
    plan = updater_plan(reading, now=NOW)
    assert [(row["action"], row["pod"], row["reason"]) for row in plan] == expected
    assert all(row["vpa"] == "web-vpa" and row["namespace"] == "default" for row in plan)


def test_the_report_carries_the_plan_in_its_json_shape() -> None:
    report = assemble_report(
        _reading(requests="100m"), now=NOW, namespace=None, all_workloads=False
    )
    (row,) = report["updater_plan"]
    assert row == {
        "action": "evict",
        "namespace": "default",
        "pod": "web-1-0",
        "vpa": "web-vpa",
        "reason": BELOW,
        "describe": "vpa-updater: evict pods default/web-1-0",
    }
    assert {key: type(value) for key, value in row.items()} == dict.fromkeys(row, str)
