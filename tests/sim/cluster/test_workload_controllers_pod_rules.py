"""The shared pod rules: which pod a scale-down deletes first, int-or-percent values, template
hashes, pods made from templates."""

from __future__ import annotations

import functools
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

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
SINCE = "2026-01-01T00:00:00Z"


def ranked_status(
    *, phase: str = "Running", ready: str | None = SINCE, restarts: int = 0
) -> dict[str, Any]:
    """The status the deletion order reads: phase, Ready since ``ready`` (``None``: not ready),
    the restarts of container ``app``."""
    return {
        "phase": phase,
        "conditions": [
            builders.nodes.ready_condition(last_transition_time=ready)
            if ready
            else builders.nodes.ready_condition("False")
        ],
        "containerStatuses": [{"name": "app", "restartCount": restarts}],
    }


ranked_pod = functools.partial(
    builders.pods.pod,
    namespace=None,
    creation_timestamp=SINCE,
    annotations={},
    containers=None,
    node_name="n1",
    status=ranked_status(),
    api_version=None,
)
"""A pod as the deletion order reads it: on ``n1``, created and Ready at ``SINCE``, Running, no
restart, no pod-deletion-cost (each row changes one of them)."""


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (
            ranked_pod(name="a", node_name=None),
            ranked_pod(name="b"),
            "an unscheduled pod goes before a scheduled one",
        ),
        (
            ranked_pod(name="a", status=ranked_status(phase="Pending")),
            ranked_pod(name="b"),
            "Pending before Running",
        ),
        (
            ranked_pod(name="a", status=ranked_status(phase="Unknown")),
            ranked_pod(name="b"),
            "Unknown before Running",
        ),
        (
            ranked_pod(name="a", status=ranked_status(ready=None)),
            ranked_pod(name="b"),
            "not ready before ready",
        ),
        (
            ranked_pod(name="a", annotations={DELETION_COST: "-5"}),
            ranked_pod(name="b", annotations={DELETION_COST: "10"}),
            "lower pod-deletion-cost first",
        ),
        (
            ranked_pod(name="a", status=ranked_status(ready="2026-01-01T01:00:00Z")),
            ranked_pod(name="b", status=ranked_status(ready="2026-01-01T00:00:00Z")),
            "ready for less time first",
        ),
        (
            ranked_pod(name="a", status=ranked_status(restarts=3)),
            ranked_pod(name="b", status=ranked_status(restarts=1)),
            "more restarts first",
        ),
        (
            ranked_pod(name="a", creation_timestamp="2026-01-02T00:00:00Z"),
            ranked_pod(name="b", creation_timestamp="2026-01-01T00:00:00Z"),
            "newer first",
        ),
    ],
)
def test_deletion_order_follows_active_pods_with_ranks(
    first: dict[str, Any], second: dict[str, Any], why: str
) -> None:
    assert [p["metadata"]["name"] for p in deletion_order([second, first])] == ["a", "b"], why


def test_pods_doubled_up_on_a_node_go_first() -> None:
    crowded = [
        ranked_pod(name="a", node_name="n1"),
        ranked_pod(name="b", node_name="n1"),
        ranked_pod(name="c", node_name="n2"),
    ]
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
        is_available(ranked_pod(name="a"), min_ready_seconds=min_ready, now=parse_time(now))
        is expected
    )
