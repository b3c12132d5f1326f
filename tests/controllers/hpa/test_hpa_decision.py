"""One HPA's reconcile as a decision (kubescale/controllers/hpa/hpa_decision.py), with no API
server: a snapshot in, the plan's ``describe(intent)`` lines out.

The HPA ``shop/web`` scales Deployment ``web`` on the Pods metric ``requests`` with an
``AverageValue`` target of 100 (100,000 milli), 1-20 replicas, 10 running pods. Upstream's
rules (reference §2; ``replica_calculator.go`` ``GetMetricReplicas`` / ``calcPlainMetricReplicas``,
``horizontal.go`` ``reconcileAutoscaler``):

* ratio = average usage / target; within the tolerance (0.1: ``1 - 0.1 <= ratio <= 1 + 0.1``,
  both ends inclusive) the count stays, else ``ceil(ratio x ready pods)``;
* without ``behavior`` the legacy normalization keeps the highest recommendation of the last
  ``--horizontal-pod-autoscaler-downscale-stabilization`` (5 min), then clamps to
  ``[min, min(max, max(2 x current, 4))]`` = ``[1, min(20, 20)]`` at 10 replicas;
* the order of a reconcile: ``FailedGet*Metric`` events while computing, then the ``Scale``,
  its event, then the status (written even when the scale update failed, with that failure's
  condition); ``FailedComputeMetricsReplicas`` after the status.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.hpa.hpa_config import HpaSettings
from kubescale.controllers.hpa.hpa_decision import (
    HpaMemory,
    HpaOutcome,
    HpaSnapshot,
    MetricRead,
    ScaleRead,
    ScaleReadFailed,
    decide,
)
from kubescale.controllers.hpa.hpa_spec import parse_hpa
from kubescale.controllers.hpa.metric_proposals import Fetched, FetchError
from kubescale.controllers.hpa.normalization import Recommendation, ScalingHistory
from kubescale.controllers.hpa.pod_selection import SelectorOutcome
from kubescale.controllers.hpa.replica_calculator import PodMetric
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult, write_outcome
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import DEPLOYMENTS
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.pod import Pod
from kubescale.objects.views import status_of
from kubescale.plans.executor import Applied, Decision, collect_plan
from kubescale.plans.intents import Intent, Scale, WriteStatus, describe
from tests.builders.hpas import hpa, resource_metric, scale_target_ref
from tests.builders.pods import pod

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
STAMP = "2026-01-01T12:00:00Z"
SETTINGS = HpaSettings()  # tolerance 0.1, downscale stabilization 5 min
ACTOR = "horizontal-pod-autoscaler"
PODS = 10
REQUESTS = {
    "type": "Pods",
    "pods": {
        "metric": {"name": "requests"},
        "target": {"type": "AverageValue", "averageValue": "100"},
    },
}
SCALE = f"{ACTOR}: scale deployments shop/web"
EVENT = f"{ACTOR}: event HorizontalPodAutoscaler shop/web"
STATUS = f"{ACTOR}: write-status horizontalpodautoscalers shop/web"


def the_hpa(**fields: Any) -> HorizontalPodAutoscaler:
    """HPA shop/web over Deployment web, 1..20 replicas, with ``fields`` (the builder's JSON,
    an HPA)."""
    defaults: dict[str, Any] = {
        "name": "web",
        "namespace": "shop",
        "target": scale_target_ref(name="web"),
        "min_replicas": 1,
        "max_replicas": 20,
    }
    return cast(HorizontalPodAutoscaler, hpa(**{**defaults, **fields}))


def snapshot(
    fetched: Fetched, *, metric: dict[str, Any] = REQUESTS, behavior: dict[str, Any] | None = None
) -> HpaSnapshot:
    """10 replicas, 10 running pods, the one metric read as ``fetched``."""
    obj = the_hpa(metrics=[metric], behavior=behavior)
    spec = parse_hpa(obj)
    pods = [
        cast(Pod, pod(name=f"web-{i}", namespace="shop", status={"phase": "Running"}))
        for i in range(PODS)
    ]
    return HpaSnapshot(
        hpa=obj,
        spec=spec,
        scale=ScaleRead(
            replicas=PODS, status_replicas=PODS, resource=DEPLOYMENTS, selector="app=web"
        ),
        pods=SelectorOutcome(pods=pods),
        metrics=(MetricRead(metric=spec.metrics[0], fetched=fetched),),
    )


def per_pod(milli: int) -> dict[str, PodMetric]:
    """Every pod at ``milli`` (a 30 s window ending 30 s ago)."""
    return {
        f"web-{i}": PodMetric(
            value=milli, timestamp=NOW - timedelta(seconds=30), window=timedelta(seconds=30)
        )
        for i in range(PODS)
    }


def condition(type: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {
        "type": type,
        "status": status,
        "lastTransitionTime": STAMP,
        "reason": reason,
        "message": message,
    }


GOT_SCALE = condition(
    "AbleToScale",
    "True",
    "SucceededGetScale",
    "the HPA controller was able to get the target's current scale",
)
READY = condition(
    "AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size"
)
STABILIZED = condition(
    "AbleToScale",
    "True",
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent "
    "recommendation",
)
VALID = condition(
    "ScalingActive",
    "True",
    "ValidMetricFound",
    "the HPA was able to successfully calculate a replica count from pods metric requests",
)
WITHIN = condition(
    "ScalingLimited",
    "False",
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
)


def requests_status(average: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "Pods",
            "pods": {"metric": {"name": "requests"}, "current": {"averageValue": average}},
        }
    ]


def status_line(status: dict[str, Any]) -> str:
    """``describe``'s status text: compact JSON, sorted keys."""
    return f"{STATUS} {json.dumps(status, sort_keys=True, separators=(',', ':'))}"


def event_line(type: str, reason: str, message: str) -> str:
    return f"{EVENT} {type} {reason} {json.dumps(message)}"


def plan_lines(snap: HpaSnapshot, memory: HpaMemory | None = None) -> tuple[list[str], HpaOutcome]:
    plan, outcome = collect_plan(decide(snap, memory or HpaMemory(), NOW, settings=SETTINGS))
    return [describe(intent) for intent in plan], outcome


def history(replicas: int, seconds_ago: int) -> HpaMemory:
    return HpaMemory(
        history=ScalingHistory(
            recommendations=(Recommendation(replicas, NOW - timedelta(seconds=seconds_ago)),)
        )
    )


CPU_DOWN = (
    "unable to fetch metrics from resource metrics API: the server is currently unable to "
    "handle the request (get pods.metrics.k8s.io)"
)
CPU_INNER = f"failed to get cpu utilization: unable to get metrics for resource cpu: {CPU_DOWN}"

ROWS: list[tuple[str, HpaSnapshot, HpaMemory | None, list[str]]] = [
    (
        # 110,000 / 100,000 = 1.1 and 1 + 0.1 = 1.1: on the band's edge, inclusive → stays at 10;
        # recommendation 10 = current → ReadyForNewScale; no Scale, the status only
        "ratio 1.1: within the tolerance",
        snapshot(per_pod(110_000)),
        None,
        [
            status_line(
                {
                    "conditions": [READY, VALID, WITHIN],
                    "currentMetrics": requests_status("110"),
                    "currentReplicas": 10,
                    "desiredReplicas": 10,
                }
            )
        ],
    ),
    (
        # 111,000 / 100,000 = 1.11 > 1.1 → ceil(1.11 x 10) = ceil(11.1) = 12; legacy limit
        # max(2 x 10, 4) = 20 ≥ 12 → DesiredWithinRange
        "ratio 1.11: outside the tolerance",
        snapshot(per_pod(111_000)),
        None,
        [
            f"{SCALE} replicas=12",
            event_line(
                "Normal",
                "SuccessfulRescale",
                "New size: 12; reason: pods metric requests above target",
            ),
            status_line(
                {
                    "conditions": [
                        condition(
                            "AbleToScale",
                            "True",
                            "SucceededRescale",
                            "the HPA controller was able to update the target scale to 12",
                        ),
                        VALID,
                        WITHIN,
                    ],
                    "currentMetrics": requests_status("111"),
                    "currentReplicas": 10,
                    "desiredReplicas": 12,
                    "lastScaleTime": STAMP,
                }
            ),
        ],
    ),
    (
        # the resource metrics API did not answer: the metric's FailedGetResourceMetric event;
        # its only metric failed → -1, no scaling: ScalingActive=False with that reason, the
        # status (a failed metric leaves an empty MetricStatus), then FailedComputeMetricsReplicas
        # with the aggregate error
        "resource metric read failed",
        snapshot(FetchError(CPU_DOWN), metric=resource_metric("cpu", utilization=50)),
        None,
        [
            event_line("Warning", "FailedGetResourceMetric", CPU_INNER),
            status_line(
                {
                    "conditions": [
                        GOT_SCALE,
                        condition(
                            "ScalingActive",
                            "False",
                            "FailedGetResourceMetric",
                            f"the HPA was unable to compute the replica count: {CPU_INNER}",
                        ),
                    ],
                    "currentMetrics": [{"type": ""}],
                    "currentReplicas": 10,
                    "desiredReplicas": 0,
                }
            ),
            event_line(
                "Warning",
                "FailedComputeMetricsReplicas",
                "invalid metrics (1 invalid out of 1), first error is: "
                f"failed to get cpu resource metric value: {CPU_INNER}",
            ),
        ],
    ),
    (
        # 50,000 / 100,000 = 0.5 → ceil(0.5 x 10) = 5; a recommendation of 10 made 60 s ago is
        # within the 5 min window: max(10, 5) = 10 → held at 10 (ScaleDownStabilized)
        "stabilization window holds a scale down",
        snapshot(per_pod(50_000)),
        history(10, seconds_ago=60),
        [
            status_line(
                {
                    "conditions": [STABILIZED, VALID, WITHIN],
                    "currentMetrics": requests_status("50"),
                    "currentReplicas": 10,
                    "desiredReplicas": 10,
                }
            )
        ],
    ),
    (
        # the same 10 recommended 301 s ago is outside the window: 5, within [1, 20]
        "stabilization window passed",
        snapshot(per_pod(50_000)),
        history(10, seconds_ago=301),
        [
            f"{SCALE} replicas=5",
            event_line(
                "Normal", "SuccessfulRescale", "New size: 5; reason: All metrics below target"
            ),
            status_line(
                {
                    "conditions": [
                        condition(
                            "AbleToScale",
                            "True",
                            "SucceededRescale",
                            "the HPA controller was able to update the target scale to 5",
                        ),
                        VALID,
                        WITHIN,
                    ],
                    "currentMetrics": requests_status("50"),
                    "currentReplicas": 10,
                    "desiredReplicas": 5,
                    "lastScaleTime": STAMP,
                }
            ),
        ],
    ),
    (
        # the scale subresource could not be read: FailedGetScale (event and condition), the
        # status, nothing else
        "scale read failed",
        HpaSnapshot(
            hpa=the_hpa(metrics=[REQUESTS]),
            spec=parse_hpa(the_hpa(metrics=[REQUESTS])),
            scale=ScaleReadFailed(message='deployments.apps "web" not found'),
        ),
        None,
        [
            event_line("Warning", "FailedGetScale", 'deployments.apps "web" not found'),
            status_line(
                {
                    "conditions": [
                        condition(
                            "AbleToScale",
                            "False",
                            "FailedGetScale",
                            "the HPA controller was unable to get the target's current scale: "
                            'deployments.apps "web" not found',
                        )
                    ],
                    "currentReplicas": 0,
                    "desiredReplicas": 0,
                }
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("snap", "memory", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_plan(snap: HpaSnapshot, memory: HpaMemory | None, expected: list[str]) -> None:
    lines, _ = plan_lines(snap, memory)
    assert lines == expected


def test_the_scale_down_held_is_remembered() -> None:
    """The window's recommendations are the decision's memory: the held 5 is recorded beside
    the 10 (upstream appends while no slot is older than the window)."""
    _, outcome = plan_lines(snapshot(per_pod(50_000)), history(10, seconds_ago=60))
    assert outcome.memory.history is not None
    assert outcome.memory.history.recommendations == (
        Recommendation(10, NOW - timedelta(seconds=60)),
        Recommendation(5, NOW),
    )
    assert (outcome.action, outcome.desired) == ("none", 10)


FORBIDDEN = KubeApiError(
    code=403,
    reason="Forbidden",
    message='deployments.apps "web" is forbidden: User "kubescale" cannot patch resource '
    '"deployments/scale"',
)
TIMEOUT = KubeApiError(
    code=504,
    reason="Timeout",
    message="the server was unable to return a response in the time allotted",
)


def rest_of(decision: Decision[HpaOutcome], answer: Applied) -> tuple[list[str], HpaOutcome]:
    """The decision's further intents once ``answer`` is sent, each later one answered done."""
    lines: list[str] = []
    try:
        intent = decision.send(answer)
        while True:
            lines.append(describe(intent))
            intent = decision.send(Applied(WriteResult(WriteOutcome.DONE)))
    except StopIteration as stop:
        outcome: HpaOutcome = stop.value
        return lines, outcome


def failed_rescale_lines(error: KubeApiError) -> list[str]:
    text = error.message
    return [
        event_line(
            "Warning",
            "FailedRescale",
            f"New size: 12; reason: pods metric requests above target; error: {text}",
        ),
        # setCurrentReplicasAndMetricsInStatus: currentReplicas and the metrics, no desired count
        # nor lastScaleTime
        status_line(
            {
                "conditions": [
                    condition(
                        "AbleToScale",
                        "False",
                        "FailedUpdateScale",
                        f"the HPA controller was unable to update the target scale: {text}",
                    ),
                    VALID,
                    WITHIN,
                ],
                "currentMetrics": requests_status("111"),
                "currentReplicas": 10,
                "desiredReplicas": 0,
            }
        ),
    ]


@pytest.mark.parametrize(
    ("error", "scale_up_events"),
    [
        (FORBIDDEN, 0),  # refused: nothing happened, no scale event
        (TIMEOUT, 1),  # 5xx: the outcome is unknown and counts as done (+2 stored)
    ],
    ids=["403 refused", "504 unknown"],
)
def test_a_failed_scale_update_still_writes_the_status(
    error: KubeApiError, scale_up_events: int
) -> None:
    """The decision receives the Scale's outcome before it yields the status write."""
    decision = decide(snapshot(per_pod(111_000), behavior={}), HpaMemory(), NOW, settings=SETTINGS)
    assert describe(next(decision)) == f"{SCALE} replicas=12"
    rest, outcome = rest_of(decision, Applied(WriteResult(write_outcome(error), error)))
    assert rest == failed_rescale_lines(error)
    assert (outcome.action, outcome.error_label, outcome.desired) == ("none", "internal", None)
    assert outcome.memory.history is not None
    assert [e.change for e in outcome.memory.history.scale_up_events] == [2] * scale_up_events


def test_a_failed_status_write_is_an_event() -> None:
    """``updateStatusIfNeeded`` failing: ``FailedUpdateStatus`` with the error, label internal."""
    decision = decide(snapshot(per_pod(110_000)), HpaMemory(), NOW, settings=SETTINGS)
    assert describe(next(decision)).startswith(STATUS)
    conflict = KubeApiError(code=409, reason="Conflict", message="the object has been modified")
    event = decision.send(Applied(WriteResult(write_outcome(conflict), conflict)))
    assert describe(event) == event_line(
        "Warning", "FailedUpdateStatus", "the object has been modified"
    )
    with pytest.raises(StopIteration) as stop:
        decision.send(Applied(WriteResult(WriteOutcome.DONE)))
    assert stop.value.value.error_label == "internal"


@settings(max_examples=150, deadline=None)
@given(
    usage=st.integers(min_value=0, max_value=5_000_000),
    seconds_ago=st.integers(min_value=0, max_value=900),
    remembered=st.integers(min_value=1, max_value=20),
    refused=st.booleans(),
)
def test_every_plan_keeps_upstreams_order(
    usage: int, seconds_ago: int, remembered: int, refused: bool
) -> None:
    """For any usage and remembered recommendation, the plan is upstream's sequence: at most one
    ``Scale``, to a count within ``[minReplicas, maxReplicas]`` = [1, 20]; exactly one status
    write, after the ``Scale`` and its event; the desired count written is the ``Scale``'s when
    it was done, the current one when nothing scaled; a refused ``Scale`` writes no desired
    count (``setCurrentReplicasAndMetricsInStatus``)."""
    decision = decide(
        snapshot(per_pod(usage)), history(remembered, seconds_ago), NOW, settings=SETTINGS
    )
    intents: list[Intent] = []
    try:
        intent = next(decision)
        while True:
            intents.append(intent)
            if refused and isinstance(intent, Scale):
                answer = WriteResult(write_outcome(FORBIDDEN), FORBIDDEN)
            else:
                answer = WriteResult(WriteOutcome.DONE)
            intent = decision.send(Applied(answer))
    except StopIteration:
        pass
    kinds = [type(i).__name__ for i in intents]
    scales = [i for i in intents if isinstance(i, Scale)]
    [status] = [i for i in intents if isinstance(i, WriteStatus)]
    assert len(scales) <= 1
    written = status_of(status.body)
    if scales:
        assert 1 <= scales[0].replicas <= 20
        assert kinds[:3] == ["Scale", "Event", "WriteStatus"]
        expected = 0 if refused else scales[0].replicas
        assert written["desiredReplicas"] == expected
    else:
        assert kinds == ["WriteStatus"]
        assert written["desiredReplicas"] == written["currentReplicas"] == PODS
