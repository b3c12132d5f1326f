"""The shared pod rules: which pod a scale-down deletes first, int-or-percent values, template
hashes, pods made from templates."""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.sim.apiserver.storage import parse_time
from kubescale.sim.cluster.usage_models import POD_INDEX_ANNOTATION, WORKLOAD_LABEL
from kubescale.sim.cluster.workload_pods import (
    deletion_order,
    equal_ignoring_label,
    is_available,
    pod_from_template,
    scaled_value,
    template_hash,
)
from tests import builders


def ranked_pod(
    name: str,
    *,
    node: str = "n1",
    phase: str = "Running",
    ready: str | None = "2026-01-01T00:00:00Z",
    created: str = "2026-01-01T00:00:00Z",
    restarts: int = 0,
    cost: str | None = None,
) -> dict[str, Any]:
    """A pod as the deletion order reads it (the table's columns over
    :func:`builders.pods.pod`): node (``""``: unscheduled), phase, Ready since ``ready``
    (``None``: not ready), creation time, restarts, pod-deletion-cost."""
    return builders.pods.pod(
        name=name,
        namespace=None,
        creation_timestamp=created,
        annotations={"controller.kubernetes.io/pod-deletion-cost": cost} if cost else {},
        containers=None,
        node_name=node or None,
        status={
            "phase": phase,
            "conditions": [
                builders.nodes.ready_condition(last_transition_time=ready)
                if ready
                else builders.nodes.ready_condition("False")
            ],
            "containerStatuses": [{"name": "app", "restartCount": restarts}],
        },
        api_version=None,
    )


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (
            ranked_pod("a", node=""),
            ranked_pod("b"),
            "an unscheduled pod goes before a scheduled one",
        ),
        (ranked_pod("a", phase="Pending"), ranked_pod("b"), "Pending before Running"),
        (ranked_pod("a", phase="Unknown"), ranked_pod("b"), "Unknown before Running"),
        (ranked_pod("a", ready=None), ranked_pod("b"), "not ready before ready"),
        (ranked_pod("a", cost="-5"), ranked_pod("b", cost="10"), "lower pod-deletion-cost first"),
        (
            ranked_pod("a", ready="2026-01-01T01:00:00Z"),
            ranked_pod("b", ready="2026-01-01T00:00:00Z"),
            "ready for less time first",
        ),
        (ranked_pod("a", restarts=3), ranked_pod("b", restarts=1), "more restarts first"),
        (
            ranked_pod("a", created="2026-01-02T00:00:00Z"),
            ranked_pod("b", created="2026-01-01T00:00:00Z"),
            "newer first",
        ),
    ],
)
def test_deletion_order_follows_active_pods_with_ranks(
    first: dict[str, Any], second: dict[str, Any], why: str
) -> None:
    assert [p["metadata"]["name"] for p in deletion_order([second, first])] == ["a", "b"], why


def test_pods_doubled_up_on_a_node_go_first() -> None:
    crowded = [ranked_pod("a", node="n1"), ranked_pod("b", node="n1"), ranked_pod("c", node="n2")]
    assert [p["metadata"]["name"] for p in deletion_order(crowded)][:2] == ["a", "b"]


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (None, 4, True, 1),  # default 25%
        ("25%", 10, True, 3),
        ("25%", 10, False, 2),
        ("10%", 5, True, 1),
        ("10%", 5, False, 0),
        (3, 10, False, 3),
        ("0%", 10, True, 0),
        ("100%", 7, False, 7),
    ],
)
def test_int_or_percent_is_scaled_like_intstr(
    value: int | str | None, total: int, round_up: bool, expected: int
) -> None:
    assert scaled_value(value, total, round_up=round_up) == expected


def test_template_hash_is_stable_safe_and_depends_on_collisions() -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a"}]}}
    reordered = {"spec": {"containers": [{"name": "a"}]}, "metadata": {"labels": {"app": "web"}}}
    first = template_hash(template)
    assert first == template_hash(reordered)
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert 1 <= len(first) <= 10  # the decimal digits of a uint32, one character each
    assert template_hash(template, 1) != first
    assert template_hash({**template, "spec": {"containers": [{"name": "b"}]}}) != first


def test_templates_compare_equal_without_the_hash_label() -> None:
    plain = {"metadata": {"labels": {"app": "web"}}, "spec": {}}
    hashed = {"metadata": {"labels": {"app": "web", "pod-template-hash": "x"}}, "spec": {}}
    assert equal_ignoring_label(plain, hashed, label="pod-template-hash")
    assert not equal_ignoring_label(plain, hashed, label="other")


def test_a_pod_from_a_template_is_owned_and_indexed() -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "namespace": "prod", "uid": "u-1"},
    }
    template: dict[str, Any] = {
        "metadata": {
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "finalizers": ["example.com/keep"],
        },
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }
    made = pod_from_template(template=template, owner=owner, workload="web", index=4)
    assert made == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": "prod",
            "generateName": "web-abc-",
            "labels": {"app": "web", WORKLOAD_LABEL: "web"},
            "annotations": {"a": "b", POD_INDEX_ANNOTATION: "4"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc",
                    "uid": "u-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }
    made["spec"]["containers"][0]["image"] = "changed"
    assert template["spec"]["containers"][0]["image"] == "nginx"  # a copy, not the template


@pytest.mark.parametrize(
    ("min_ready", "now", "expected"),
    [
        (0, "2026-01-01T00:00:00Z", True),
        (30, "2026-01-01T00:00:29Z", False),
        (30, "2026-01-01T00:00:30Z", True),
    ],
)
def test_availability_waits_min_ready_seconds(min_ready: int, now: str, expected: bool) -> None:
    assert (
        is_available(ranked_pod("a"), min_ready_seconds=min_ready, now=parse_time(now)) is expected
    )
