"""Expanders (reference §2.4): each filter's rule worked by hand, ties, and the chain."""

from __future__ import annotations

import math
import random

import pytest

from kubescale.controllers.autoscaler.expander.expanders import (
    ExpanderChain,
    LeastNodes,
    LeastWaste,
    MostPods,
    RandomPick,
)
from kubescale.controllers.autoscaler.expander.expansion_option import ExpansionOption
from kubescale.controllers.autoscaler.expander.price_expander import (
    PriceExpander,
    preferred_node_cpu,
)
from kubescale.controllers.autoscaler.expander.priority_expander import PriorityExpander
from kubescale.controllers.autoscaler.simulator.template_nodes import (
    TemplateNode,
    sanitize_template,
)
from kubescale.objects.config_map import ConfigMap
from tests.controllers.autoscaler.builders import ca_node, ca_pod, group


def template(name: str, cpu: str, memory: str) -> TemplateNode:
    return sanitize_template(
        node=ca_node(name, cpu=cpu, memory=memory), pods=[], group_id=name, source="node"
    )


def option(
    name: str,
    count: int,
    pods: int,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    price: float | None = None,
) -> ExpansionOption:
    return ExpansionOption(
        group=group(name, price=price),
        node_count=count,
        pods=tuple(ca_pod(f"{name}-p{i}", cpu=cpu, memory=memory) for i in range(pods)),
    )


def ids(options: list[ExpansionOption]) -> list[str]:
    return [o.group.id for o in options]


TEMPLATES = {
    "small": template("small", "4", "16Gi"),
    "large": template("large", "8", "32Gi"),
    "twin": template("twin", "4", "16Gi"),
}


def test_least_waste_worked_example() -> None:
    # small: 3 nodes → 12 cpu, 48Gi for 10 × (1 cpu, 1Gi):
    #   (12−10)/12 + (48−10)/48 = 0.1667 + 0.7917 = 0.9583
    # large: 2 nodes → 16 cpu, 64Gi: (16−10)/16 + (64−10)/64 = 0.375 + 0.84375 = 1.21875
    options = [option("large", 2, 10), option("small", 3, 10)]
    assert ids(LeastWaste().best_options(options, TEMPLATES)) == ["small"]


def test_least_waste_keeps_ties_and_skips_options_without_template() -> None:
    options = [option("small", 3, 10), option("twin", 3, 10), option("unknown", 1, 10)]
    assert ids(LeastWaste().best_options(options, TEMPLATES)) == ["small", "twin"]


def test_most_pods_and_least_nodes() -> None:
    options = [option("a", 2, 5), option("b", 3, 7), option("c", 2, 7), option("d", 0, 9)]
    assert ids(MostPods().best_options(options, TEMPLATES)) == ["d"]
    assert ids(MostPods().best_options(options[:3], TEMPLATES)) == ["b", "c"]
    # d adds 0 nodes: ignored; the fewest of 2, 3, 2 → a and c
    assert ids(LeastNodes().best_options(options, TEMPLATES)) == ["a", "c"]
    assert LeastNodes().best_options([option("z", 0, 1)], TEMPLATES) == []


def test_random_is_uniform_over_the_options() -> None:
    rng = random.Random(7)
    picker = RandomPick(rng=rng)
    options = [option("a", 1, 1), option("b", 1, 1), option("c", 1, 1)]
    seen = {picker.best_options(options, TEMPLATES)[0].group.id for _ in range(60)}
    assert seen == {"a", "b", "c"}
    assert picker.best_options([], TEMPLATES) == []


@pytest.mark.parametrize(
    ("nodes", "cpu"),
    [
        (0, 1000),
        (2, 1000),
        (3, 2000),
        (6, 2000),
        (7, 4000),
        (20, 4000),
        (21, 8000),
        (60, 8000),
        (61, 16000),
        (200, 16000),
        (201, 32000),
    ],
)
def test_preferred_node_doubles_every_3x(nodes: int, cpu: int) -> None:
    assert preferred_node_cpu(nodes) == cpu


def test_price_worked_example() -> None:
    templates = {"a": template("a", "2", "8Gi"), "b": template("b", "8", "32Gi")}
    # 8 pods of (1 cpu, 2Gi): pod price = 0.033174 + 2 × 0.004446 = 0.042066 → × 8 = 0.336528
    # stabilization pod (500m, 500Mi) = 0.5 × 0.033174 + 500/1024 × 0.004446 = 0.0187579
    stab = 0.5 * 0.033174 + 500 / 1024 * 0.004446
    pods = 8 * (0.033174 + 2 * 0.004446)
    # a: 4 nodes × 0.10 = 0.40; preferred (3 nodes) = 2 cpu = node cpu → unfitness 1
    score_a = (0.40 + stab) / (pods + stab) * 1.0
    # b: 1 node × 0.38; unfitness max(2/8, 8/2) = 4; suppressed (4−1)(1−tanh(0)) + 1 = 4
    score_b = (0.38 + stab) / (pods + stab) * 4.0
    assert score_a == pytest.approx(1.178650, rel=1e-5)
    assert score_b == pytest.approx(4.489431, rel=1e-5)
    options = [
        option("a", 4, 8, cpu="1", memory="2Gi", price=0.10),
        option("b", 1, 8, cpu="1", memory="2Gi", price=0.38),
    ]
    expander = PriceExpander(cluster_nodes=3)
    assert ids(expander.best_options(options, templates)) == ["a"]
    assert "final_score=1.178650" in expander.debug["a"]


def test_price_suppression_fades_with_node_count() -> None:
    # (u − 1)(1 − tanh((N − 1)/15)) + 1 with u = 4: N = 16 → 3 × (1 − tanh(1)) + 1
    suppressed = 3 * (1 - math.tanh(1.0)) + 1
    assert suppressed == pytest.approx(1.715218, rel=1e-5)


PRIORITIES = """
10:
  - .*small.*
50:
  - .*large.*
  - .*huge.*
"""


def config_map(text: str | None) -> ConfigMap | None:
    return None if text is None else {"data": {"priorities": text}}


def test_priority_picks_the_highest_matching_groups() -> None:
    expander = PriorityExpander(config_map=lambda: config_map(PRIORITIES))
    options = [
        option("md-small", 1, 1),
        option("md-large", 1, 1),
        option("md-huge", 1, 1),
        option("other", 1, 1),
    ]
    assert ids(expander.best_options(options, TEMPLATES)) == ["md-large", "md-huge"]
    assert [w[0] for w in expander.warnings] == ["PriorityConfigMapNotMatchedGroup"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "PriorityConfigMapInvalid"),  # missing ConfigMap
        ("not: [valid", "PriorityConfigMapInvalid"),  # not YAML
        ("high:\n  - .*", "PriorityConfigMapInvalid"),  # priority not an integer
        ("10:\n  - '('", "PriorityConfigMapInvalid"),  # bad regexp
        ("10:\n  - nothing-matches", "PriorityConfigMapNoGroupMatched"),
    ],
)
def test_priority_falls_back_to_all_options(text: str | None, reason: str) -> None:
    expander = PriorityExpander(config_map=lambda: config_map(text))
    options = [option("a", 1, 1), option("b", 1, 1)]
    assert ids(expander.best_options(options, TEMPLATES)) == ["a", "b"]
    assert expander.warnings[-1][0] == reason


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # upstream pkg/expander/priority/priority.go, reloadConfigMap: an empty value fails
        # parsePrioritiesYAMLString, wrapped as "Wrong configuration for priority expander: %v.
        # Ignoring update."
        (
            {"priorities": ""},
            "Wrong configuration for priority expander: priority configuration in "
            "cluster-autoscaler-priority-expander configmap is empty; please provide valid "
            "configuration. Ignoring update.",
        ),
        # the key missing altogether: "Wrong configmap for priority expander, doesn't contain
        # %s key. Ignoring update."
        (
            {"other": "10:\n  - .*"},
            "Wrong configmap for priority expander, doesn't contain priorities key. "
            "Ignoring update.",
        ),
        # a regexp that does not compile: "Can't compile regexp rule for priority %d and rule
        # %s: %v", wrapped the same way (the regexp engine's own error text differs from Go's)
        (
            {"priorities": "10:\n  - '('"},
            "Wrong configuration for priority expander: Can't compile regexp rule for priority "
            "10 and rule (: missing ), unterminated subpattern at position 0. Ignoring update.",
        ),
    ],
)
def test_priority_config_warning_texts(data: dict[str, str], message: str) -> None:
    expander = PriorityExpander(config_map=lambda: {"data": data})
    options = [option("a", 1, 1), option("b", 1, 1)]
    assert ids(expander.best_options(options, TEMPLATES)) == ["a", "b"]
    assert expander.warnings == [("PriorityConfigMapInvalid", message)]


def test_chain_stops_at_one_then_random_breaks_ties() -> None:
    options = [option("small", 3, 10), option("twin", 3, 10), option("large", 2, 10)]
    # least-waste leaves small and twin (tie); least-nodes keeps both (3, 3); random picks one
    chain = ExpanderChain([LeastWaste(), LeastNodes()], rng=random.Random(1))
    picked = chain.best_option(options, TEMPLATES)
    assert picked is not None
    assert picked.group.id in {"small", "twin"}
    # least-nodes first: large (2 nodes) alone → the chain stops there
    chain = ExpanderChain([LeastNodes(), LeastWaste()], rng=random.Random(1))
    picked = chain.best_option(options, TEMPLATES)
    assert picked is not None
    assert picked.group.id == "large"
    # nothing left → no option
    assert (
        ExpanderChain([LeastNodes()], rng=random.Random(1)).best_option(
            [option("z", 0, 1)], TEMPLATES
        )
        is None
    )
