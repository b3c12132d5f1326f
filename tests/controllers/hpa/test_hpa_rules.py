"""Defaulting, status helpers, flags, scale-to-zero and prediction rules."""

from __future__ import annotations

import argparse
import math
from datetime import timedelta
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.hpa.hpa_config import (
    HpaConfigError,
    add_hpa_arguments,
    hpa_settings_from_args,
)
from kubescale.controllers.hpa.hpa_spec import HpaSpecError, parse_hpa
from kubescale.controllers.hpa.hpa_status import go_selector_text, set_condition
from kubescale.controllers.hpa.predictive import DemandHistory, predictive_settings
from kubescale.controllers.hpa.scale_to_zero import (
    ZeroSettings,
    decide_zero,
    is_active,
    zero_settings,
)
from kubescale.objects.hpa import HorizontalPodAutoscaler

from .pod_builders import NOW


def test_v2_defaulting() -> None:
    spec = parse_hpa({"metadata": {"name": "h", "namespace": "n"}, "spec": {"maxReplicas": 3}})
    assert spec.min_replicas == 1
    assert [(m.type, m.resource_name, m.target) for m in spec.metrics] == [
        ("Resource", "cpu", spec.metrics[0].target)
    ]
    assert spec.metrics[0].target is not None
    assert spec.metrics[0].target.average_utilization == 80
    assert spec.behavior is None  # no behavior: the legacy rules, nothing defaulted
    partial = parse_hpa(
        {
            "metadata": {"name": "h"},
            "spec": {
                "maxReplicas": 3,
                "behavior": {"scaleUp": {"selectPolicy": "Min"}, "scaleDown": {"policies": []}},
            },
        }
    )
    assert partial.behavior is not None
    up = partial.behavior.scale_up
    # copyHPAScalingRules: only selectPolicy overridden; the window and 4 pods / 100% per 15 s stay
    assert (up.select_policy, up.stabilization_window_seconds) == ("Min", 0)
    assert [(p.type, p.value, p.period_seconds) for p in up.policies] == [
        ("Pods", 4, 15),
        ("Percent", 100, 15),
    ]
    assert partial.behavior.scale_down.policies == ()
    with pytest.raises(HpaSpecError, match=r"spec.behavior.scaleUp.policies\[0\].value"):
        parse_hpa(
            cast(  # deliberately malformed JSON: a string where the API has an integer
                HorizontalPodAutoscaler,
                {
                    "metadata": {"name": "h"},
                    "spec": {
                        "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": "x"}]}}
                    },
                },
            )
        )


def test_go_selector_text() -> None:
    assert go_selector_text(None) == "<nil>"
    assert go_selector_text(
        {
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "k", "operator": "In", "values": ["x", "y"]}],
        }
    ) == (
        "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:"
        "[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[x y],},},}"
    )


def test_condition_transition_time_moves_only_on_flip() -> None:
    first = set_condition([], type="AbleToScale", status=True, reason="A", message="m", now=NOW)
    later = NOW + timedelta(minutes=1)
    same = set_condition(first, type="AbleToScale", status=True, reason="B", message="n", now=later)
    assert same[0]["lastTransitionTime"] == first[0]["lastTransitionTime"]
    assert same[0]["reason"] == "B"
    flipped = set_condition(
        same, type="AbleToScale", status=False, reason="C", message="o", now=later
    )
    assert flipped[0]["lastTransitionTime"] == "2026-01-05T12:01:00Z"
    appended = set_condition(
        flipped, type="ScalingActive", status=True, reason="D", message="", now=NOW
    )
    assert [c["type"] for c in appended] == ["AbleToScale", "ScalingActive"]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_hpa_arguments(parser)
    return parser.parse_args(list(argv))


def test_flags_defaults_and_errors() -> None:
    settings_ = hpa_settings_from_args(parse())
    assert settings_.sync_period == timedelta(seconds=15)
    assert settings_.tolerance == 0.1
    assert settings_.downscale_stabilization == timedelta(minutes=5)
    assert settings_.cpu_initialization_period == timedelta(minutes=5)
    assert settings_.initial_readiness_delay == timedelta(seconds=30)
    assert settings_.concurrent_syncs == 5
    assert settings_.reconcile_timeout == timedelta(seconds=30)
    assert hpa_settings_from_args(
        parse("--hpa-reconcile-timeout", "1m")
    ).reconcile_timeout == timedelta(minutes=1)
    with pytest.raises(HpaConfigError, match="--hpa-reconcile-timeout must be > 0, got 0"):
        hpa_settings_from_args(parse("--hpa-reconcile-timeout", "0s"))
    assert (settings_.mode, settings_.selection) == ("auto", "annotated")
    assert settings_.feature_gates == {"HPAScaleToZero": False, "HPAConfigurableTolerance": True}
    with pytest.raises(HpaConfigError, match="--horizontal-pod-autoscaler-tolerance must be >= 0"):
        hpa_settings_from_args(parse("--horizontal-pod-autoscaler-tolerance", "-1"))
    with pytest.raises(HpaConfigError, match="--horizontal-pod-autoscaler-sync-period must be > 0"):
        hpa_settings_from_args(parse("--horizontal-pod-autoscaler-sync-period", "0s"))
    with pytest.raises(HpaConfigError, match="--hpa-feature-gates: unrecognized feature gate: X"):
        hpa_settings_from_args(parse("--hpa-feature-gates", "X=true"))
    with pytest.raises(HpaConfigError, match="--concurrent-horizontal-pod-autoscaler-syncs"):
        hpa_settings_from_args(parse("--concurrent-horizontal-pod-autoscaler-syncs", "0"))
    args = parse("--hpa-selection", "all", "--hpa-feature-gates", "HPAScaleToZero=true")
    args.prometheus_address = "http://prom:9090"  # serve's --prometheus-address
    built = hpa_settings_from_args(args)
    assert (built.selection, built.scale_to_zero_gate, built.prometheus_address) == (
        "all",
        True,
        "http://prom:9090",
    )


def annotated(**notes: str) -> HorizontalPodAutoscaler:
    return {"metadata": {"annotations": {f"hpa.kubescale.io/{k}": v for k, v in notes.items()}}}


def test_zero_settings() -> None:
    assert zero_settings(annotated()) is None
    assert zero_settings(annotated(**{"scale-to-zero": "true"})) == ZeroSettings()
    got = zero_settings(
        annotated(
            **{"scale-to-zero": "true", "activation-threshold": "1.5", "cooldown-period": "30"}
        )
    )
    assert got == ZeroSettings(activation_threshold_milli=1500, cooldown=timedelta(seconds=30))
    with pytest.raises(HpaSpecError, match=r"hpa.kubescale.io/cooldown-period\]"):
        zero_settings(annotated(**{"scale-to-zero": "true", "cooldown-period": "-3"}))


COOL = ZeroSettings(cooldown=timedelta(seconds=60))


@pytest.mark.parametrize(
    ("current", "active", "last_active_ago", "expected", "floor"),
    [
        (0, True, None, 2, 2),  # activation: max(minReplicas 2, 1) = 2
        (0, False, None, 0, 2),  # stays at zero
        (0, None, None, 0, 2),  # unknown: nothing crosses zero
        (3, True, 600, None, 2),  # active: the math, floor min
        (3, False, 600, None, 1),  # inactive above one: the math walks down to 1
        (1, False, 61, 0, 1),  # at one, 61 s > 60 s cooldown → 0
        (1, False, 60, None, 1),  # exactly the cooldown: KEDA's strict "<" → not yet
        (1, None, 600, None, 2),  # unknown activity: never to zero
    ],
)
def test_decide_zero(
    current: int, active: bool | None, last_active_ago: int | None, expected: int | None, floor: int
) -> None:
    decision = decide_zero(
        current=current,
        active=active,
        last_active=None if last_active_ago is None else NOW - timedelta(seconds=last_active_ago),
        first_seen=NOW - timedelta(hours=1),
        min_replicas=2,
        settings=COOL,
        now=NOW,
    )
    assert (decision.replicas, decision.floor) == (expected, floor)


def test_first_sight_counts_as_last_active() -> None:
    # kedacore/keda#5008: without a last active time the cooldown counts from first sight
    decision = decide_zero(
        current=1,
        active=False,
        last_active=None,
        first_seen=NOW - timedelta(seconds=10),
        min_replicas=1,
        settings=COOL,
        now=NOW,
    )
    assert decision.replicas is None


@settings(max_examples=300, deadline=None)
@given(
    current=st.integers(0, 50),
    active=st.sampled_from([True, False, None]),
    ago=st.integers(0, 1000),
    min_replicas=st.integers(1, 5),
)
def test_zero_is_only_reached_from_one(
    current: int, active: bool | None, ago: int, min_replicas: int
) -> None:
    """Never N→0 for N > 1, never to zero while active or unknown, activation only from 0."""
    decision = decide_zero(
        current=current,
        active=active,
        last_active=NOW - timedelta(seconds=ago),
        first_seen=NOW - timedelta(hours=2),
        min_replicas=min_replicas,
        settings=COOL,
        now=NOW,
    )
    if decision.replicas == 0 and current > 0:
        assert current == 1
        assert active is False
    if decision.replicas is not None and decision.replicas > 0:
        assert current == 0
        assert active is True
    assert decision.floor >= 1


def test_is_active() -> None:
    assert is_active([0, 5], threshold_milli=0) is True
    assert is_active([0, 0], threshold_milli=0) is False  # strictly greater
    assert is_active([None, 0], threshold_milli=0) is None
    assert is_active([None, 7], threshold_milli=0) is True


def test_predictive_settings() -> None:
    assert predictive_settings(annotated()) is None
    assert predictive_settings(annotated(predictive="true")) is not None
    with pytest.raises(HpaSpecError, match="predictive-lead-seconds"):
        predictive_settings(annotated(predictive="true", **{"predictive-lead-seconds": "5"}))


def test_seasonal_forecast() -> None:
    history = DemandHistory()
    # a day at 2 replicas' worth, with a rise to 10 at 12:05 yesterday
    start = NOW - timedelta(days=1, minutes=60)
    for minute in range(24 * 60 + 60):
        moment = start + timedelta(minutes=minute)
        yesterday_rise = timedelta(days=1) - timedelta(minutes=5)
        rising = NOW - yesterday_rise <= moment < NOW - yesterday_rise + timedelta(minutes=30)
        history.record(moment, 10.0 if rising and moment < NOW - timedelta(hours=1) else 2.0)
    # recent demand (last 3 min) 2.0; yesterday at this time (3 min) 2.0. Five minutes ahead,
    # yesterday 12:03..12:07 was (2 + 2 + 10 + 10 + 10) / 5 = 6.8 → growth 3.4, clamped to 3
    # → 2 × 3 = 6; four ahead: (2+2+2+10+10)/5 = 5.2 → 2.6 → 5.2; no weekly history yet
    assert history.forecast(NOW, lead=timedelta(minutes=5)) == pytest.approx(6.0)
    assert history.proposal(NOW, lead=timedelta(minutes=5)) == 6
    assert history.forecast(NOW, lead=timedelta(minutes=4)) == pytest.approx(5.2)
    # two minutes ahead: yesterday 11:59..12:04 all 2 → growth 1 → 2
    assert history.proposal(NOW, lead=timedelta(minutes=2)) == 2
    assert DemandHistory().proposal(NOW, lead=timedelta(minutes=5)) is None
    assert len(history) <= 8 * 24 * 60
    assert not math.isnan(history.forecast(NOW, lead=timedelta(minutes=1)) or 0.0)
