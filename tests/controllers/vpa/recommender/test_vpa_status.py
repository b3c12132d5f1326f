"""The status the recommender writes, and when (upstream ``model/vpa.go`` conditions and
``UpdateVpaStatusIfNeeded``'s semantic comparison). Pure: no API server."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import pytest

from kubescale.controllers.vpa.model.cluster_state import VpaRecommendation
from kubescale.controllers.vpa.recommender.vpa_status import (
    NO_PODS_MATCHED_MESSAGE,
    condition_active,
    desired_status,
    had_recommendation,
    status_changed,
)
from kubescale.objects.vpa import RecommendedContainerResources, VerticalPodAutoscalerStatus
from tests import builders
from tests.builders.meta import stored_as

VPA = functools.partial(
    builders.vpas.typed_vpa, name="web", namespace="ns", generation=3, api_version=None
)

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
NOW_TEXT = "2026-01-05T12:00:00Z"
EARLIER = "2026-01-01T00:00:00Z"
ENTRY: RecommendedContainerResources = {
    "containerName": "app",
    "target": {"cpu": "250m", "memory": "256Mi"},
    "lowerBound": {"cpu": "100m", "memory": "128Mi"},
    "upperBound": {"cpu": "1", "memory": "1Gi"},
    "uncappedTarget": {"cpu": "250m", "memory": "256Mi"},
}


def rec(entries: list[RecommendedContainerResources], pods: int) -> VpaRecommendation:
    return VpaRecommendation(container_recommendations=entries, pod_count=pods)


def condition(
    kind: str, status: str, since: str, reason: str = "", message: str = ""
) -> dict[str, Any]:
    result = {"type": kind, "status": status, "lastTransitionTime": since}
    if reason:
        result["reason"] = reason
    if message:
        result["message"] = message
    return result


NO_PODS = ("NoPodsMatched", NO_PODS_MATCHED_MESSAGE)


@pytest.mark.parametrize(
    ("old", "recommendation", "unsupported", "conditions"),
    [
        # A new VPA with pods and a recommendation.
        (None, rec([ENTRY], 2), None, [condition("RecommendationProvided", "True", NOW_TEXT)]),
        # No pods: both conditions carry NoPodsMatched's reason and message.
        (
            None,
            rec([], 0),
            None,
            [
                condition("NoPodsMatched", "True", NOW_TEXT, *NO_PODS),
                condition("RecommendationProvided", "False", NOW_TEXT, *NO_PODS),
            ],
        ),
        # Pods but no recommendation yet (no samples): False without a reason.
        (None, rec([], 1), None, [condition("RecommendationProvided", "False", NOW_TEXT)]),
        # A status that did not change keeps its transition time; one that did gets now.
        (
            [
                condition("RecommendationProvided", "True", EARLIER),
                condition("NoPodsMatched", "True", EARLIER, *NO_PODS),
            ],
            rec([ENTRY], 1),
            None,
            [condition("RecommendationProvided", "True", EARLIER)],
        ),
        (
            [condition("RecommendationProvided", "False", EARLIER, *NO_PODS)],
            rec([ENTRY], 1),
            None,
            [condition("RecommendationProvided", "True", NOW_TEXT)],
        ),
        # Unsupported target: set with the message, no reason; other conditions kept; sorted.
        (
            [
                condition("LowConfidence", "True", EARLIER),
                condition("ConfigDeprecated", "True", EARLIER),
            ],
            rec([], 0),
            "Cannot read targetRef",
            [
                condition("ConfigUnsupported", "True", NOW_TEXT, message="Cannot read targetRef"),
                condition("LowConfidence", "True", EARLIER),
                condition("NoPodsMatched", "True", NOW_TEXT, *NO_PODS),
                condition("RecommendationProvided", "False", NOW_TEXT, *NO_PODS),
            ],
        ),
        # ... and deleted once the target is usable.
        (
            [condition("ConfigUnsupported", "True", EARLIER, message="x")],
            rec([ENTRY], 1),
            None,
            [condition("RecommendationProvided", "True", NOW_TEXT)],
        ),
    ],
)
def test_conditions(
    old: list[dict[str, Any]] | None,
    recommendation: VpaRecommendation,
    unsupported: str | None,
    conditions: list[dict[str, Any]],
) -> None:
    status = desired_status(
        VPA(status=None if old is None else {"conditions": old}),
        recommendation,
        unsupported=unsupported,
        now=NOW,
    )
    assert status["conditions"] == conditions
    assert status["observedGeneration"] == 3
    expected_recommendation = (
        {"containerRecommendations": recommendation.container_recommendations}
        if recommendation.container_recommendations
        else {}
    )
    assert status["recommendation"] == expected_recommendation


def status(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "conditions": [condition("RecommendationProvided", "True", EARLIER)],
        "recommendation": {"containerRecommendations": [ENTRY]},
        "observedGeneration": 3,
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (status(), status(), False),
        (None, status(), True),
        # Quantities compare by value, not text.
        (
            status(
                recommendation={
                    "containerRecommendations": [
                        {**ENTRY, "upperBound": {"cpu": "1000m", "memory": "1024Mi"}}
                    ]
                }
            ),
            status(),
            False,
        ),
        (
            status(
                recommendation={
                    "containerRecommendations": [
                        {**ENTRY, "target": {"cpu": "251m", "memory": "256Mi"}}
                    ]
                }
            ),
            status(),
            True,
        ),
        # Times compare by instant.
        (
            status(
                conditions=[
                    condition("RecommendationProvided", "True", "2026-01-01T01:00:00+01:00")
                ]
            ),
            status(),
            False,
        ),
        # A missing recommendation differs from an empty one; an empty list does not.
        (status(recommendation=None), status(recommendation={}), True),
        (status(recommendation={"containerRecommendations": []}), status(recommendation={}), False),
        # A missing resource list equals an empty one.
        (
            status(recommendation={"containerRecommendations": [{**ENTRY, "uncappedTarget": {}}]}),
            status(
                recommendation={
                    "containerRecommendations": [
                        {k: v for k, v in ENTRY.items() if k != "uncappedTarget"}
                    ]
                }
            ),
            False,
        ),
        # Condition order is part of the value (upstream sorts before writing).
        (
            status(conditions=[condition("B", "True", EARLIER), condition("A", "True", EARLIER)]),
            status(conditions=[condition("A", "True", EARLIER), condition("B", "True", EARLIER)]),
            True,
        ),
        (status(observedGeneration=2), status(), True),
        (
            status(conditions=[condition("RecommendationProvided", "True", EARLIER, message="m")]),
            status(),
            True,
        ),
    ],
)
def test_semantic_comparison(
    old: dict[str, Any] | None, new: dict[str, Any], changed: bool
) -> None:
    if old is not None and old.get("recommendation", "keep") is None:
        old = {k: v for k, v in old.items() if k != "recommendation"}
    # the statuses as read back from the server
    typed_old = None if old is None else stored_as(old, VerticalPodAutoscalerStatus)
    assert status_changed(typed_old, stored_as(new, VerticalPodAutoscalerStatus)) is changed


def test_the_initial_recommendation_counts_only_when_provided() -> None:
    provided = VPA(status={"conditions": [condition("RecommendationProvided", "True", EARLIER)]})
    provided["status"]["recommendation"] = {"containerRecommendations": [ENTRY]}
    assert had_recommendation(provided)
    assert condition_active(provided, "RecommendationProvided")
    stale = VPA(status={"conditions": [condition("RecommendationProvided", "False", EARLIER)]})
    stale["status"]["recommendation"] = {"containerRecommendations": [ENTRY]}
    assert not had_recommendation(stale)
    assert not had_recommendation(VPA())
