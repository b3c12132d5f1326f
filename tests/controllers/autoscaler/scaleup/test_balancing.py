"""Balancing similar node groups (reference §2.5): similarity rules and the split."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.scaleup.balancing import (
    BASIC_IGNORED_LABELS,
    SimilarityRules,
    balance_scale_up,
    is_similar,
)
from kubescale.controllers.autoscaler.simulator.template_nodes import (
    TemplateNode,
    sanitize_template,
)
from tests.controllers.autoscaler.builders import ca_node, group


def template(name: str, **kw: Any) -> TemplateNode:
    return sanitize_template(node=ca_node(name, **kw), pods=[], group_id=name, source="node")


BASE: dict[str, Any] = {"cpu": "4", "memory": "16Gi", "labels": {"pool": "web"}}


@pytest.mark.parametrize(
    ("other", "rules", "similar"),
    [
        # only the zone differs: ignored label
        ({"labels": {"pool": "web", "topology.kubernetes.io/zone": "b"}}, {}, False),
        # a label present on one side only: not similar (16Gi vs 16Gi, labels differ)
        ({"labels": {"pool": "web", "extra": "x"}}, {}, False),
        # an ignored flag label makes it similar again
        ({"labels": {"pool": "web", "extra": "x"}}, {"ignored": {"extra"}}, True),
        # memory 16Gi vs 16.2Gi: 1.2% < 1.5% capacity ratio, and within 5% allocatable/free
        ({"memory": "16588Mi"}, {}, True),
        # 16Gi vs 16.5Gi: 3% > 1.5% memory capacity ratio
        ({"memory": "16896Mi"}, {}, False),
        # cpu capacity must match exactly
        ({"cpu": "4100m"}, {}, False),
        # balancing labels: only pool compared, anything else may differ
        ({"cpu": "8", "labels": {"pool": "web"}}, {"balancing": ("pool",)}, True),
        ({"labels": {"pool": "db"}}, {"balancing": ("pool",)}, False),
    ],
)
def test_similarity(other: dict[str, Any], rules: dict[str, Any], similar: bool) -> None:
    a = template("a", **{**BASE, "labels": {"pool": "web", "topology.kubernetes.io/zone": "a"}})
    spec = {**BASE, **other}
    if "topology.kubernetes.io/zone" not in spec["labels"]:
        spec["labels"] = {**spec["labels"], "topology.kubernetes.io/zone": "a"}
    b = template("b", **spec)
    if other.get("labels", {}).get("topology.kubernetes.io/zone") == "b":
        similar = True  # zone is ignored (the first row)
    parsed = SimilarityRules(
        ignored_labels=BASIC_IGNORED_LABELS | frozenset(rules.get("ignored", ())),
        balancing_labels=tuple(rules.get("balancing", ())),
    )
    assert is_similar(a, b, parsed) is similar


@pytest.mark.parametrize(
    ("groups", "new_nodes", "expected"),
    [
        # sizes 1, 3, 5 (max 10), +6: 1→2→3, then 3,3 alternate → 4,4 → 5,5: a 1→5, b 3→5
        ([("a", 1, 10), ("b", 3, 10), ("c", 5, 10)], 6, {"a": (1, 5), "b": (3, 5)}),
        # +9 more: all reach 5 (+6), then 6,6,6 (+3)
        ([("a", 1, 10), ("b", 3, 10), ("c", 5, 10)], 9, {"a": (1, 6), "b": (3, 6), "c": (5, 6)}),
        # a is capped at 3: a 2→3, the rest to b: 2→6
        ([("a", 2, 3), ("b", 2, 10)], 5, {"a": (2, 3), "b": (2, 6)}),
        # request above the set's capacity (1 + 1 = 2) is capped
        ([("a", 4, 5), ("b", 9, 10)], 5, {"a": (4, 5), "b": (9, 10)}),
        # equal sizes: round robin in the given order, the chosen group first
        ([("a", 2, 10), ("b", 2, 10)], 3, {"a": (2, 4), "b": (2, 3)}),
        # a is above its max (9 > 5): upstream's BalanceScaleUpBetweenGroups adds only positive
        # headroom, capacity = 0 + (5 - 2) = 3, so b 2→5; counting a's -4 gave -1: no scale-up
        ([("a", 9, 5), ("b", 2, 5)], 3, {"b": (2, 5)}),
        # two above max (6 > 4, 12 > 10) and one at max (3 = 3, "already maxed, ignore it"):
        # capacity = 0 + 0 + 0 + (8 - 1) = 7, +2 → d 1→3 (sum of raw headroom: -2-2+0+7 = 3)
        ([("a", 6, 4), ("b", 12, 10), ("c", 3, 3), ("d", 1, 8)], 2, {"d": (1, 3)}),
    ],
)
def test_split(
    groups: list[tuple[str, int, int]], new_nodes: int, expected: dict[str, tuple[int, int]]
) -> None:
    infos = balance_scale_up([group(n, target=t, max_size=m) for n, t, m in groups], new_nodes)
    assert {i.group.id: (i.current_size, i.new_size) for i in infos} == expected


def test_scale_up_info_text() -> None:
    info = balance_scale_up([group("MachineDeployment/default/a", target=1, max_size=10)], 1)[0]
    assert str(info) == "{MachineDeployment/default/a 1->2 (max: 10)}"


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(
        st.tuples(st.integers(min_value=0, max_value=20), st.integers(min_value=0, max_value=20)),
        min_size=1,
        max_size=5,
    ),
    new_nodes=st.integers(min_value=0, max_value=60),
)
def test_split_properties(sizes: list[tuple[int, int]], new_nodes: int) -> None:
    """Property: the split adds min(new, capacity) nodes (capacity counting only positive
    headroom), respects every max, never grows a group at or above max, and leaves the groups
    as even as possible (no group ends more than one above another that could grow)."""
    groups = [group(f"g{i}", target=t, max_size=m) for i, (t, m) in enumerate(sizes)]
    infos = {i.group.id: i for i in balance_scale_up(groups, new_nodes)}
    # a group already above its max brings no capacity (and takes none from the others)
    capacity = sum(max(0, g.max_size - g.target_size) for g in groups)
    final = {g.id: infos[g.id].new_size if g.id in infos else g.target_size for g in groups}
    assert sum(final[g.id] - g.target_size for g in groups) == min(new_nodes, capacity)
    for g in groups:
        assert g.target_size <= final[g.id] <= max(g.max_size, g.target_size)
        if g.target_size >= g.max_size:
            assert final[g.id] == g.target_size
    grown = [g for g in groups if final[g.id] > g.target_size]
    for g in grown:
        for other in groups:
            if final[other.id] < other.max_size:
                assert final[g.id] <= final[other.id] + 1
