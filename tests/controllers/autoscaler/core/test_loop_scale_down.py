"""The ``DeletionCandidateOfClusterAutoscaler`` soft taints as a plan (:func:`soft_taint_plan`,
upstream's ``UpdateSoftDeletionTaints``), decided without an API server: taint each unneeded
node that lacks it, untaint each tainted node no longer unneeded, in node order, at most
``--max-bulk-soft-taint-count`` (10) writes per loop."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kubescale.controllers.autoscaler.core.loop_scale_down import (
    MAX_BULK_SOFT_TAINT_COUNT,
    soft_taint_plan,
)
from kubescale.objects.node import Node
from kubescale.plans.intents import describe
from tests.builders.nodes import typed_node

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STAMP = int(NOW.timestamp())
KEY = "DeletionCandidateOfClusterAutoscaler"


def candidate(name: str, *, tainted: bool) -> Node:
    taints = [{"key": KEY, "value": str(STAMP - 60), "effect": "PreferNoSchedule"}]
    return typed_node(name=name, taints=taints if tainted else None)


def taint(name: str) -> str:
    return f"cluster-autoscaler: taint nodes {name} {KEY}={STAMP}:PreferNoSchedule"


def untaint(name: str) -> str:
    return f"cluster-autoscaler: untaint nodes {name} {KEY}"


@pytest.mark.parametrize(
    ("tainted", "unneeded", "expected"),
    [
        # nothing to change: unneeded and tainted already, needed and untainted
        ({"a"}, {"a"}, []),
        # b became unneeded, a no longer is: one write each, in node order
        ({"a"}, {"b"}, [untaint("a"), taint("b")]),
        # 12 unneeded untainted nodes (n00 … n11) and a needed tainted one (a): a first by
        # name, then 10 − 1 = 9 taints (n00 … n08); n09 … n11 wait for the next loop
        (
            {"a"},
            {f"n{i:02d}" for i in range(12)},
            [untaint("a")] + [taint(f"n{i:02d}") for i in range(9)],
        ),
    ],
)
def test_the_soft_taint_plan(tainted: set[str], unneeded: set[str], expected: list[str]) -> None:
    names = sorted({"a", "b", *unneeded})
    nodes = [candidate(name, tainted=name in tainted) for name in names]
    plan = soft_taint_plan(nodes, unneeded, NOW)
    assert [describe(intent) for intent in plan] == expected
    assert len(plan) <= MAX_BULK_SOFT_TAINT_COUNT == 10
