"""Step 3's pure decision (kubescale/controllers/hpa/replica_decision.py), by table.

Every row is worked out from upstream's rules (reference §2): the legacy normalization keeps the
highest recommendation of the last 5 minutes (``--horizontal-pod-autoscaler-downscale-
stabilization``), then clamps to ``[min, min(max, max(2 x current, 4))]``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kubescale.controllers.hpa.hpa_spec import parse_hpa
from kubescale.controllers.hpa.metric_proposals import MetricOutcome, MetricsResult
from kubescale.controllers.hpa.normalization import initial_history
from kubescale.controllers.hpa.replica_decision import (
    ZERO_REASON,
    decide_at_zero,
    decide_replicas,
    failed_metrics,
)
from kubescale.controllers.hpa.scale_to_zero import ZeroDecision

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
WINDOW = timedelta(minutes=5)
SPEC = parse_hpa(
    {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"minReplicas": 1, "maxReplicas": 10},
    }
)
METRIC = "cpu resource utilization (percentage of request)"


def usable(replicas: int) -> MetricsResult:
    outcome = MetricOutcome(replicas=replicas, name=METRIC, status={"type": "Resource"})
    return MetricsResult(
        replicas=replicas,
        metric_name=METRIC,
        statuses=[outcome.status],
        outcomes=[outcome],
        first_failure=None,
        error="",
    )


@pytest.mark.parametrize(
    "row",
    [
        # 5 proposed; window holds the initial {3}: max(3, 5) = 5 = proposal → ReadyForNewScale;
        # limit max(2x3, 4) = 6 ≥ 5 → DesiredWithinRange
        (3, 5, None, 5, f"{METRIC} above target", "ReadyForNewScale", "DesiredWithinRange"),
        # a forecast of 8 beats 5 and 3: 8 stabilized (max(3, 8)), clamped to 6 → ScaleUpLimit
        (3, 5, 8, 6, f"predicted {METRIC} above target", "ReadyForNewScale", "ScaleUpLimit"),
        # a forecast below the reactive 5 is ignored
        (3, 5, 4, 5, f"{METRIC} above target", "ReadyForNewScale", "DesiredWithinRange"),
        # 2 proposed at 6: the initial {6} of now is in the window → 6 (ScaleDownStabilized)
        (6, 2, None, 6, "All metrics below target", "ScaleDownStabilized", "DesiredWithinRange"),
        # 40 proposed at 8: limit max(16, 4) = 16, max 10 → 10, TooManyReplicas
        (8, 40, None, 10, f"{METRIC} above target", "ReadyForNewScale", "TooManyReplicas"),
    ],
)
def test_decide_replicas_table(row: tuple[int, int, int | None, int, str, str, str]) -> None:
    current, reactive, predicted, replicas, reason, able, limit = row
    decision = decide_replicas(
        result=usable(reactive),
        spec=SPEC,
        current=current,
        history=initial_history(current, NOW),
        zero=None,
        predicted=predicted,
        downscale_window=WINDOW,
        now=NOW,
    )
    assert decision.replicas == replicas
    assert decision.reason == reason
    assert [(c.type, c.status, c.reason) for c in decision.conditions] == [
        ("ScalingActive", True, "ValidMetricFound"),
        ("AbleToScale", True, able),
        ("ScalingLimited", limit not in ("DesiredWithinRange",), limit),
    ]
    assert decision.error_label == "none"
    # the history remembers the reactive proposal, never the forecast
    assert decision.history is not None
    assert decision.history.recommendations[-1].replicas == reactive


def test_zero_decision_overrides_the_count() -> None:
    # activation says 0 (cooldown elapsed): the HPA math's answer (1, floor 0) is replaced
    decision = decide_replicas(
        result=usable(1),
        spec=SPEC,
        current=1,
        history=initial_history(1, NOW),
        zero=ZeroDecision(replicas=0, floor=0, last_active=None),
        predicted=None,
        downscale_window=WINDOW,
        now=NOW,
    )
    assert (decision.replicas, decision.reason) == (0, ZERO_REASON)


def test_decide_at_zero() -> None:
    up = decide_at_zero(2, [MetricOutcome(replicas=2, status={"type": "External"})])
    assert (up.replicas, up.reason) == (2, "activation metric above activation threshold")
    assert [(c.reason, c.status) for c in up.conditions] == [("ValidMetricFound", True)]
    stay = decide_at_zero(0, [MetricOutcome(reason="FailedGetExternalMetric", error="x")])
    assert (stay.replicas, stay.statuses) == (0, [{"type": ""}])
    assert [(c.reason, c.status) for c in stay.conditions] == [("ScaledToZero", False)]


@pytest.mark.parametrize(
    ("reason", "label"),
    [("FailedGetResourceMetric", "internal"), ("InvalidMetricSourceType", "spec")],
)
def test_failed_metrics(reason: str, label: str) -> None:
    failure = MetricOutcome(reason=reason, error="no metrics returned")
    result = MetricsResult(
        replicas=-1,
        metric_name="",
        statuses=[],
        outcomes=[failure],
        first_failure=failure,
        error="invalid metrics (1 invalid out of 1)",
    )
    decision = failed_metrics(result)
    assert decision.replicas is None
    assert decision.error_label == label
    assert decision.failure == "invalid metrics (1 invalid out of 1)"
    assert [(c.type, c.status, c.reason, c.message) for c in decision.conditions] == [
        (
            "ScalingActive",
            False,
            reason,
            "the HPA was unable to compute the replica count: no metrics returned",
        )
    ]
