"""PodTopologySpread in the shared fit: kube-scheduler's ``filtering_test.go`` cases
(``TestSingleConstraint``, ``TestMultipleConstraints``, minDomains and the node inclusion
policies), at the plugin (the PreFilter counts then each node's Filter, as upstream's test runs
it) and through the whole fit; the counts kept current as pods come and go, held to a recount
by a property."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector, label_selector_from_dict
from kubescale.scheduling.filters import REASON_NODE_AFFINITY, FilterStatus
from kubescale.scheduling.fit import MAX_SPREAD_SELECTORS, ClusterSnapshot
from kubescale.scheduling.snapshot_journal import SnapshotJournal
from kubescale.scheduling.topology_spread import (
    REASON_SPREAD,
    REASON_SPREAD_INVALID,
    REASON_SPREAD_LABEL,
)

from .builders import BAR, fit_node, fit_pod, spread

OK, UNSCHED, UNRESOLVABLE = "Success", "Unschedulable", "UnschedulableAndUnresolvable"
FOO_LABEL = {"foo": ""}
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def zoned(*names_zones: tuple[str, str]) -> list[Node]:
    return [fit_node(n, {"zone": z, "node": n}) for n, z in names_zones]


FOUR = zoned(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


def placed(counts: Mapping[str, int], labels: Mapping[str, str] = FOO_LABEL) -> list[Pod]:
    """``counts[node]`` pods with ``labels`` on each node."""
    return [
        fit_pod(f"p-{node}-{i}", node=node, labels=labels)
        for node, count in counts.items()
        for i in range(count)
    ]


def plugin_codes(pod: Pod, nodes: Sequence[Node], pods: Sequence[Pod]) -> dict[str, str]:
    """PreFilter then Filter of PodTopologySpread alone, per node (upstream's test harness)."""
    snapshot = ClusterSnapshot.build(nodes=nodes, pods=pods)
    info = snapshot.pod_info(pod)
    counts = snapshot.spread(info)
    assert counts is not None
    codes = {}
    for name in sorted(snapshot.nodes):
        status = counts.filter(snapshot.nodes[name])
        codes[name] = _code(status)
    return codes


def _code(status: FilterStatus | None) -> str:
    if status is None:
        return OK
    return UNRESOLVABLE if status.unresolvable else UNSCHED


# (name, pod, nodes, existing pods, expected code per node). Arithmetic: skew = domain count
# + 1 (the pod matches itself) − min over domains; refused when > maxSkew.
SINGLE: list[tuple[str, Pod, list[Node], list[Pod], dict[str, str]]] = [
    (
        "no existing pods",  # zones 0/0: 0+1-0 = 1 <= 1 everywhere
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone")]),
        FOUR,
        [],
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), OK),
    ),
    (
        "no existing pods, incoming pod doesn't match itself",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone", BAR)]),
        FOUR,
        [],
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), OK),
    ),
    (
        # ns1/ns2 pods on node-a are not counted: zones 0/2 → zone2: 2+1-0 = 3 > 1
        "existing pods in a different namespace do not count",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone")]),
        FOUR,
        [
            fit_pod("p-a1", namespace="ns1", node="node-a", labels=FOO_LABEL),
            fit_pod("p-b1", namespace="ns2", node="node-a", labels=FOO_LABEL),
            *placed({"node-x": 1, "node-y": 1}),
        ],
        {"node-a": OK, "node-b": OK, "node-x": UNSCHED, "node-y": UNSCHED},
    ),
    (
        # a null selector selects nothing: counts 0/0 and no self-match → skew 0
        "existing pods do not match null selector",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone", None)]),
        FOUR,
        placed({"node-x": 1, "node-y": 1}),
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), OK),
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",  # 3+1-3 = 1
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone")]),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 3}),
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), OK),
    ),
    (
        # node-b lacks "zone": not counted (zones 1/2) and refused as unresolvable;
        # zone2: 2+1-1 = 2 > 1
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone")]),
        [
            fit_node("node-a", {"zone": "zone1", "node": "node-a"}),
            fit_node("node-b", {"zon": "zone1", "node": "node-b"}),
            fit_node("node-x", {"zone": "zone2", "node": "node-x"}),
            fit_node("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        placed({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}),
        {"node-a": OK, "node-b": UNRESOLVABLE, "node-x": UNSCHED, "node-y": UNSCHED},
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "rack")]),
        zoned(("node-a", "zone1"), ("node-x", "zone2")),
        [],
        {"node-a": UNRESOLVABLE, "node-x": UNRESOLVABLE},
    ),
    (
        # nodes 2/1/0/3, min 0: a 3 > 1, b 2 > 1, x 1, y 4 > 1
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node")]),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 3}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",  # b: 2 <= 2
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(2, "node")]),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 3}),
        {"node-a": UNSCHED, "node-b": OK, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        # no self-match: a 2-0 = 2 > 1, b 1, x 0, y 3 > 1
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        fit_pod("p", labels={"bar": ""}, constraints=[spread(1, "node")]),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 3}),
        {"node-a": UNSCHED, "node-b": OK, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        # only node-a and node-y pass the affinity (Honor): domains 2/3, min 2 → a: 2+1-2 = 1;
        # b and x are not domains (count 0): 0+1-2 < 1 (the NodeAffinity filter refuses them)
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        fit_pod(
            "p",
            labels=FOO_LABEL,
            affinity_in=("node", ["node-a", "node-y"]),
            constraints=[spread(1, "node")],
        ),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 3}),
        {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        "terminating Pods should be excluded",  # a: 0 (terminating), b: 1 → b: 1+1-0 = 2 > 1
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node")]),
        [fit_node("node-a", {"node": "node-a"}), fit_node("node-b", {"node": "node-b"})],
        [
            fit_pod("p-a", node="node-a", labels=FOO_LABEL, terminating=True),
            fit_pod("p-b", node="node-b", labels=FOO_LABEL),
        ],
        {"node-a": OK, "node-b": UNSCHED},
    ),
    (
        # node-b left out by NotIn: zones 0/1 → zone2: 1+1-0 = 2 > 1
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        fit_pod(
            "p",
            labels=FOO_LABEL,
            affinity_not_in=("node", ["node-b"]),
            constraints=[spread(1, "zone")],
        ),
        FOUR,
        placed({"node-b": 2, "node-y": 1}),
        {"node-a": OK, "node-b": OK, "node-x": UNSCHED, "node-y": UNSCHED},
    ),
    (
        # 3 domains < minDomains 4 → min 0: a, b 2+1-0 = 3 > 2; c 1+1-0 = 2
        "pods spread across nodes as 2/2/1, maxSkew is 2, domains < minDomains, c fits",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(2, "node", min_domains=4)]),
        [fit_node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        placed({"node-a": 2, "node-b": 2, "node-c": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-c": OK},
    ),
    (
        # 3 domains >= 2 → min 1: 2+1-1 = 2 <= 2
        "pods spread across nodes as 2/2/1, maxSkew is 2, domains > minDomains, all fit",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(2, "node", min_domains=2)]),
        [fit_node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")],
        placed({"node-a": 2, "node-b": 2, "node-c": 1}),
        dict.fromkeys(("node-a", "node-b", "node-c"), OK),
    ),
    (
        # zones 2/1, 2 domains < 3 → min 0: zone1 2+1 = 3 > 2, zone2 1+1 = 2
        "pods spread across zone as 2/1, maxSkew 2, domains < minDomains, x and y fit",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(2, "zone", min_domains=3)]),
        FOUR,
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": OK},
    ),
    (
        "pods spread across zone as 2/1, maxSkew 2, domains > minDomains, all fit",  # 3-1 = 2
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(2, "zone", min_domains=1)]),
        FOUR,
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), OK),
    ),
    (
        # node-y fails the nodeSelector: domains 1/1/0 → a, b 1+1-0 = 2 > 1; y not a domain
        "NodeAffinityPolicy honored with labelSelectors",
        fit_pod("p", labels=FOO_LABEL, node_selector={"foo": ""}, constraints=[spread(1, "node")]),
        [
            *(fit_node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")),
            fit_node("node-y", {"node": "node-y"}),
        ],
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": OK},
    ),
    (
        # Ignore: node-y is a domain with 1 → y 1+1-0 = 2 > 1
        "NodeAffinityPolicy ignored with labelSelectors",
        fit_pod(
            "p",
            labels=FOO_LABEL,
            node_selector={"foo": ""},
            constraints=[spread(1, "node", affinity_policy="Ignore")],
        ),
        [
            *(fit_node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")),
            fit_node("node-y", {"node": "node-y"}),
        ],
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        "NodeAffinityPolicy honored with nodeAffinity",
        fit_pod("p", labels=FOO_LABEL, affinity_in=("foo", [""]), constraints=[spread(1, "node")]),
        [
            *(fit_node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")),
            fit_node("node-y", {"node": "node-y"}),
        ],
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": OK},
    ),
    (
        "NodeAffinityPolicy ignored with nodeAffinity",
        fit_pod(
            "p",
            labels=FOO_LABEL,
            affinity_in=("foo", [""]),
            constraints=[spread(1, "node", affinity_policy="Ignore")],
        ),
        [
            *(fit_node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")),
            fit_node("node-y", {"node": "node-y"}),
        ],
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        # Honor taints: node-y's untolerated NoSchedule taint leaves it out → 1/1/0
        "NodeTaintsPolicy honored",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node", taints_policy="Honor")]),
        [
            *(fit_node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")),
            fit_node("node-y", {"node": "node-y"}, taints=[TAINT]),
        ],
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": OK},
    ),
    (
        "NodeTaintsPolicy ignored",  # unset is Ignore: node-y counts (1) → 2 > 1
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node")]),
        [
            *(fit_node(n, {"node": n, "foo": ""}) for n in ("node-a", "node-b", "node-x")),
            fit_node("node-y", {"node": "node-y"}, taints=[TAINT]),
        ],
        placed({"node-a": 1, "node-b": 1, "node-y": 1}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": UNSCHED},
    ),
    # ---- TestMultipleConstraints
    (
        # zone 3/3 → all; node 2/1/0/3 → x
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone"), spread(1, "node")]),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 3}),
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        # zone 3/4 → zone1 only; node 2/1/0/4 → x only: nothing
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "zone"), spread(1, "node")]),
        FOUR,
        placed({"node-a": 2, "node-b": 1, "node-y": 4}),
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), UNSCHED),
    ),
    (
        # foo by zone 1/0 → zone2; bar by node 0/0/0/1 → a, b, x: x
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        fit_pod(
            "p",
            labels={"foo": "", "bar": ""},
            constraints=[spread(1, "zone"), spread(1, "node", BAR)],
        ),
        FOUR,
        [*placed({"node-a": 1}), *placed({"node-y": 1}, {"bar": ""})],
        {"node-a": UNSCHED, "node-b": UNSCHED, "node-x": OK, "node-y": UNSCHED},
    ),
    (
        # matchLabelKeys: only pods with the incoming pod's "rev" value count → node-a's 2
        # old pods are ignored, node-x holds 1 of rev 2: a 0+1-0, x 1+1-0 = 2 > 1
        "matchLabelKeys merges the pod's own label into the selector",
        fit_pod(
            "p",
            labels={"foo": "", "rev": "2"},
            constraints=[spread(1, "node", match_label_keys=["rev"])],
        ),
        [fit_node(n, {"node": n}) for n in ("node-a", "node-x")],
        [
            *placed({"node-a": 2}, {"foo": "", "rev": "1"}),
            *placed({"node-x": 1}, {"foo": "", "rev": "2"}),
        ],
        {"node-a": OK, "node-x": UNSCHED},
    ),
    (
        "ScheduleAnyway constraints do not filter",
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node", when="ScheduleAnyway")]),
        FOUR,
        placed({"node-a": 3}),
        dict.fromkeys(("node-a", "node-b", "node-x", "node-y"), OK),
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "expected"),
    [case[1:] for case in SINGLE if case[0] != "ScheduleAnyway constraints do not filter"],
    ids=[case[0] for case in SINGLE if case[0] != "ScheduleAnyway constraints do not filter"],
)
def test_pod_topology_spread_plugin_table(
    pod: Pod, nodes: list[Node], pods: list[Pod], expected: dict[str, str]
) -> None:
    assert plugin_codes(pod, nodes, pods) == expected


def test_schedule_anyway_only_skips_the_prefilter() -> None:
    snapshot = ClusterSnapshot.build(nodes=FOUR, pods=placed({"node-a": 3}))
    info = snapshot.pod_info(
        fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node", when="ScheduleAnyway")])
    )
    assert snapshot.spread(info) is None
    assert snapshot.feasible(info.pod)[0] == ["node-a", "node-b", "node-x", "node-y"]


SPREAD_REFUSED = FilterStatus((REASON_SPREAD,), unresolvable=False)
LABEL_REFUSED = FilterStatus((REASON_SPREAD_LABEL,), unresolvable=True)
AFFINITY_REFUSED = FilterStatus((REASON_NODE_AFFINITY,), unresolvable=True)


def test_whole_fit_runs_node_affinity_before_spread() -> None:
    # the upstream case "incoming pod has nodeAffinity ... hence node-a fits" with every
    # filter: node-b and node-x are refused by NodeAffinity ("in real case, it's false")
    pod = fit_pod(
        "p",
        labels=FOO_LABEL,
        affinity_in=("node", ["node-a", "node-y"]),
        constraints=[spread(1, "node")],
    )
    snapshot = ClusterSnapshot.build(
        nodes=FOUR, pods=placed({"node-a": 2, "node-b": 1, "node-y": 3})
    )
    feasible, statuses = snapshot.feasible(pod)
    assert feasible == ["node-a"]
    assert statuses == {
        "node-b": AFFINITY_REFUSED,
        "node-x": AFFINITY_REFUSED,
        "node-y": SPREAD_REFUSED,
    }


def test_whole_fit_missing_label_is_unresolvable() -> None:
    pod = fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "rack")])
    snapshot = ClusterSnapshot.build(nodes=FOUR, pods=[])
    feasible, statuses = snapshot.feasible(pod)
    assert feasible == []
    assert set(statuses.values()) == {LABEL_REFUSED}


def test_cordoned_nodes_are_domains() -> None:
    # every node of the snapshot is counted, a cordoned one too: its empty domain holds the
    # minimum at 0, so node-b (1 pod) refuses a second: 1+1-0 = 2 > 1
    nodes = [fit_node("node-a", {"node": "node-a"}), fit_node("node-b", {"node": "node-b"})]
    nodes[0]["spec"]["unschedulable"] = True
    snapshot = ClusterSnapshot.build(nodes=nodes, pods=placed({"node-b": 1}))
    pod = fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node")])
    assert snapshot.feasible(pod)[0] == []


def test_invalid_selector_fits_nowhere() -> None:
    bad = {"matchExpressions": [{"key": "foo", "operator": "Bogus"}]}
    pod = fit_pod("p", labels=FOO_LABEL, constraints=[spread(1, "node", bad)])
    snapshot = ClusterSnapshot.build(nodes=FOUR, pods=[])
    feasible, statuses = snapshot.feasible(pod)
    assert feasible == []
    assert {s.reasons for s in statuses.values()} == {(REASON_SPREAD_INVALID,)}


def test_counts_follow_pods_placed_one_by_one() -> None:
    # a binpacking places pods one at a time: the counts must see each placement.
    # nodes a, b; maxSkew 1 by node; each new pod goes to the first fitting node:
    # a(0+1-0) → b(0+1-0; a would be 1+1-0) → a (1+1-1) → b → ...
    snapshot = ClusterSnapshot.build(nodes=[fit_node(n, {"node": n}) for n in ("a", "b")], pods=[])
    journal = SnapshotJournal(snapshot)
    journal.fork()
    order = []
    for i in range(6):
        pod = fit_pod(f"w-{i}", labels=FOO_LABEL, constraints=[spread(1, "node")])
        feasible, _ = snapshot.feasible(pod)
        journal.add_pod(feasible[0], pod)
        order.append(feasible[0])
    assert order == ["a", "b", "a", "b", "a", "b"]
    journal.revert()
    pod = fit_pod("w", labels=FOO_LABEL, constraints=[spread(1, "node")])
    assert snapshot.spread(snapshot.pod_info(pod)) is not None
    # the revert took every placement back out of the kept counts
    assert snapshot.spread_matches("default", _foo_selector(snapshot)) == {}


# -------------------------------------------------------------------------- property

_NODES = ("a", "b")
_change = st.tuples(
    st.sampled_from(("add", "remove", "drop-node", "restore")),
    st.sampled_from(_NODES),
    st.integers(0, 4),  # which pod
)


def _foo_selector(snapshot: ClusterSnapshot) -> LabelSelector:
    constraints = snapshot.pod_info(
        fit_pod("w", labels=FOO_LABEL, constraints=[spread(1, "node")])
    ).spread
    assert constraints
    return constraints[0].selector


_ASKING = fit_pod(
    "w",
    labels=FOO_LABEL,
    affinity_in=("node", ["a"]),
    constraints=[spread(1, "node"), spread(1, "node", affinity_policy="Ignore")],
)


def _domains(snapshot: ClusterSnapshot) -> tuple[Mapping[str, int], ...]:
    counts = snapshot.spread(snapshot.pod_info(_ASKING))
    assert counts is not None
    return counts.domains


def recount(snapshot: ClusterSnapshot, namespace: str, labels_key: str) -> dict[str, int]:
    counts = {}
    for name, state in snapshot.nodes.items():
        found = sum(
            1
            for p in state.pods
            if p["metadata"]["namespace"] == namespace
            and labels_key in p["metadata"]["labels"]
            and not p["metadata"].get("deletionTimestamp")
        )
        if found:
            counts[name] = found
    return counts


@settings(max_examples=300, deadline=None)
@given(changes=st.lists(_change, max_size=25), copy_at=st.integers(0, 25))
def test_kept_counts_equal_a_recount(changes: list[tuple[str, str, int]], copy_at: int) -> None:
    snapshot = ClusterSnapshot.build(nodes=[fit_node(n, {"node": n}) for n in _NODES], pods=[])
    pods = [
        fit_pod(
            f"p{i}",
            labels={"foo": ""} if i % 2 == 0 else {"bar": ""},
            namespace="default" if i < 4 else "other",
            terminating=(i == 2),
        )
        for i in range(5)
    ]
    selector = _foo_selector(snapshot)
    snapshot.spread_matches("default", selector)  # start keeping the counts
    removed: dict[str, Any] = {}
    for step, (kind, node, index) in enumerate(changes):
        if step == copy_at:
            snapshot = snapshot.copy()
            snapshot.spread_matches("default", selector)
        if kind == "add" and node in snapshot.nodes:
            pod = pods[index]
            if not any(p is pod for s in snapshot.nodes.values() for p in s.pods):
                snapshot.add_pod(node, pod)
        elif kind == "remove" and node in snapshot.nodes:
            snapshot.remove_pod(node, pods[index])
        elif kind == "drop-node" and node in snapshot.nodes:
            state = snapshot.remove_node(node)
            assert state is not None
            removed[node] = state
        elif kind == "restore" and node in removed:
            snapshot.restore_node(removed.pop(node))
        expected = recount(snapshot, "default", "foo")
        assert dict(snapshot.spread_matches("default", selector)) == expected
        # a selector first asked now is counted from the kept pods-by-label index
        fresh = label_selector_from_dict(
            {
                "matchLabels": {"foo": ""},
                "matchExpressions": [{"key": f"z{step}", "operator": "DoesNotExist"}],
            }
        )
        assert dict(snapshot.spread_matches("default", fresh)) == expected
        # the whole PreFilter (kept domains, affinity-admitted nodes) against a fresh snapshot
        assert _domains(snapshot) == _domains(
            ClusterSnapshot.build(
                nodes=[fit_node(n, {"node": n}) for n in snapshot.nodes],
                pods=[
                    {**p, "spec": {**p["spec"], "nodeName": n}}
                    for n, state in snapshot.nodes.items()
                    for p in state.pods
                ],
            )
        )


def test_selector_table_is_bounded() -> None:
    snapshot = ClusterSnapshot.build(nodes=[fit_node("a", {"node": "a"})], pods=[])
    for i in range(MAX_SPREAD_SELECTORS + 5):
        pod = fit_pod(
            "w",
            labels={"app": f"v{i}"},
            constraints=[spread(1, "node", {"matchLabels": {"app": f"v{i}"}})],
        )
        snapshot.spread(snapshot.pod_info(pod))
    assert snapshot.spread_selector_count == 5  # started over at 256, then 5 more
