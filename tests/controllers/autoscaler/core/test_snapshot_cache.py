"""The scan's snapshot from pieces kept across scans (``core/snapshot_cache.py``, issue 29).

Upstream rebuilds the cluster snapshot every ``RunOnce`` from the nodes and the non-expendable
scheduled pods; the cached build must give that same snapshot. The reference here is exactly the
from-scratch path the loop used before: ``pods_by_schedulability`` → ``drop_expendable`` →
``ClusterSnapshot.build`` over every pod (with the VPA's answer applied to each), compared node
by node (order, labels, taints, allocatable, summed requests, pods in the informer's order, host
ports, anti-affinity pods) after every step of random sequences of pod/node adds, updates,
deletes, re-lists and VPA answer changes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.core.pod_lists import (
    drop_expendable,
    pods_by_schedulability,
)
from kubescale.controllers.autoscaler.core.snapshot_cache import (
    NodePieces,
    PodFactsCache,
    PodListing,
)
from kubescale.controllers.autoscaler.model.node_facts import node_name
from kubescale.controllers.autoscaler.model.pod_facts import PriorityResolver
from kubescale.coordination.requests_ahead import AheadAnswer
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.priority_class import PriorityClass
from kubescale.objects.views import meta
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache
from tests.builders.meta import manifest, metadata, stored_as
from tests.builders.nodes import node
from tests.builders.pods import container, pod

CUTOFF = -10
"""``--expendable-pods-priority-cutoff``'s default: a pod below -10 is expendable."""
PRIORITY_CLASSES: list[PriorityClass] = [
    stored_as(
        {**manifest("scheduling.k8s.io/v1", "PriorityClass", metadata(name="low")), "value": -100},
        PriorityClass,
    ),
    stored_as(
        {**manifest("scheduling.k8s.io/v1", "PriorityClass", metadata(name="high")), "value": 1000},
        PriorityClass,
    ),
]
UNSCHEDULABLE = {
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
}
ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "a"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


class FakeVpa:
    """The VPA's port as the webhook would answer: a pod of app ``a``/``b`` gets the cpu
    recommended for its app; the answer holds while that recommendation's version is the same
    (the webhook's: while the VPA object is the informer's same one)."""

    def __init__(self) -> None:
        self.cpu: dict[str, str] = {}
        self.version: dict[str, int] = {}
        self.asked = 0

    def recommend(self, app: str, cpu: str) -> None:
        self.cpu[app] = cpu
        self.version[app] = self.version.get(app, 0) + 1

    def requests_for(self, pod: Pod) -> Pod:
        return self.answer_for(pod).pod

    def answer_for(self, pod: Pod) -> AheadAnswer:
        self.asked += 1
        app = meta(pod).labels.get("app", "")
        if app not in self.cpu:
            return AheadAnswer(pod=pod, basis=(app, self.version.get(app, 0)))
        spec: dict[str, Any] = dict(pod["spec"])
        spec["containers"] = [
            {**c, "resources": {"requests": {"cpu": self.cpu[app]}}} for c in spec["containers"]
        ]
        return AheadAnswer(
            pod=stored_as({**pod, "spec": spec}, Pod), basis=(app, self.version[app])
        )

    def still_current(self, answer: AheadAnswer) -> bool:
        if answer.pod_only:
            return True
        basis = answer.basis
        assert isinstance(basis, tuple)
        app, version = basis
        return bool(self.version.get(app, 0) == version)


def from_scratch(
    nodes: Sequence[Node], pods: Sequence[Pod], vpa: FakeVpa | None
) -> tuple[ClusterSnapshot, list[Pod], list[Pod]]:
    """The loop's build before the cache: (snapshot, all pods, pending pods)."""
    all_pods = [vpa.requests_for(p) for p in pods] if vpa is not None else list(pods)
    priority = PriorityResolver(PRIORITY_CLASSES)
    lists = pods_by_schedulability(all_pods)
    ordered: list[Node] = sorted(nodes, key=node_name)
    snapshot = ClusterSnapshot.build(
        nodes=ordered,
        pods=drop_expendable(lists.scheduled, cutoff=CUTOFF, priority=priority),
    )
    return snapshot, all_pods, lists.unschedulable


def describe(snapshot: ClusterSnapshot) -> list[Any]:
    """Everything a filter reads of the snapshot, node by node in order."""
    described: list[Any] = [
        (
            name,
            dict(state.labels),
            state.taints,
            state.unschedulable,
            state.allocatable,
            {k: v for k, v in state.requested.items() if v},
            {k: v for k, v in state.non_zero_requested.items() if v},
            state.pods,
            state.used_ports._used,
            sorted(snapshot.anti_affinity_pods(name)),
        )
        for name, state in snapshot.nodes.items()
    ]
    described.append(snapshot._anti_affinity_pods)
    return described


@dataclass
class Cluster:
    """The informer's caches (an update replaces the object in place: its list order stays)."""

    vpa: FakeVpa | None
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = 0
    created: int = 0
    facts: PodFactsCache = field(init=False)
    pieces: NodePieces = field(default_factory=NodePieces)
    requests: RequestCache = field(default_factory=RequestCache)
    non_zero: RequestCache = field(
        default_factory=lambda: RequestCache(non_missing=NON_MISSING_DEFAULTS)
    )

    def __post_init__(self) -> None:
        self.facts = PodFactsCache(self.vpa)

    def rv(self) -> str:
        self.version += 1
        return str(self.version)

    def scan(self) -> tuple[PodListing, ClusterSnapshot]:
        listing = self.facts.refresh(
            [stored_as(p, Pod) for p in self.pods.values()], priority_classes=PRIORITY_CLASSES
        )
        snapshot = self.pieces.snapshot(
            nodes=sorted((stored_as(n, Node) for n in self.nodes.values()), key=node_name),
            listing=listing,
            cutoff=CUTOFF,
            namespace_labels={},
            requests=self.requests,
            non_zero=self.non_zero,
        )
        return listing, snapshot

    def check(self) -> None:
        listing, snapshot = self.scan()
        expected, all_pods, pending = from_scratch(
            [stored_as(n, Node) for n in self.nodes.values()],
            [stored_as(p, Pod) for p in self.pods.values()],
            self.vpa,
        )
        assert describe(snapshot) == describe(expected)
        assert listing.pods == all_pods
        assert listing.by_schedulability().unschedulable == pending
        assert len(self.facts) == len(self.pods)  # one entry per live pod
        assert len(self.pieces) == len(self.nodes)

    # -- the changes

    def add_pod(self, i: int, where: int | None, cpu: int, flavour: int) -> None:
        self.created += 1
        name = f"p{i}"
        spec: dict[str, Any] = {}
        if flavour == 1:
            spec["priorityClassName"] = "low"  # expendable
        elif flavour == 2:
            spec["affinity"] = ANTI_AFFINITY
        elif flavour == 3:
            spec["priority"] = 5
        app = container(requests={"cpu": f"{cpu}00m"})
        if flavour == 4:
            app["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        self.pods[name] = pod(
            name=name,
            uid=f"{name}-{self.created}",
            labels={"app": "ab"[i % 2]},
            metadata_extra={"resourceVersion": self.rv()},
            containers=[app],
            node_name=f"n{where}" if where is not None else None,
            spec=spec,
            status=UNSCHEDULABLE if where is None else {"phase": "Running"},
        )

    def update_pod(self, i: int, how: int, value: int) -> None:
        old = self.pods.get(f"p{i}")
        if old is None:
            return
        new = copy.deepcopy(old)
        new["metadata"]["resourceVersion"] = self.rv()
        if how == 0:
            new["spec"]["containers"][0]["resources"] = {"requests": {"cpu": f"{value}00m"}}
        elif how == 1:
            new["spec"]["nodeName"] = f"n{value % 4}"
            new["status"] = {"phase": "Running"}
        elif how == 2:
            new["status"] = {"phase": "Succeeded" if value % 2 else "Failed"}
        elif how == 3:
            new["metadata"]["labels"] = {"app": "ab"[value % 2]}
        else:
            new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.pods[f"p{i}"] = new

    def relist_pod(self, i: int) -> None:
        """The informer re-listed it unchanged: a new object, the same resourceVersion."""
        old = self.pods.get(f"p{i}")
        if old is not None:
            self.pods[f"p{i}"] = copy.deepcopy(old)

    def delete_pod(self, i: int) -> None:
        self.pods.pop(f"p{i}", None)

    def add_node(self, j: int, cpu: int) -> None:
        name = f"n{j}"
        self.nodes[name] = node(
            name=name,
            resource_version=self.rv(),
            labels={"kubernetes.io/hostname": name},
            allocatable={"cpu": str(cpu), "memory": "8Gi", "pods": "110"},
        )

    def update_node(self, j: int, how: int) -> None:
        old = self.nodes.get(f"n{j}")
        if old is None:
            return
        new = copy.deepcopy(old)
        new["metadata"]["resourceVersion"] = self.rv()
        if how == 0:
            new["status"]["allocatable"]["cpu"] = str(int(new["status"]["allocatable"]["cpu"]) + 1)
        elif how == 1:
            new["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
        else:
            new["metadata"]["labels"]["zone"] = "z1"
        self.nodes[f"n{j}"] = new

    def delete_node(self, j: int) -> None:
        self.nodes.pop(f"n{j}", None)

    def apply(self, step: tuple[Any, ...]) -> None:
        kind, *args = step
        if kind == "vpa":
            if self.vpa is not None:
                self.vpa.recommend(*args)
            return
        getattr(self, kind)(*args)


POD = st.integers(0, 7)
NODE = st.integers(0, 3)
STEPS = st.one_of(
    st.tuples(st.just("add_pod"), POD, st.none() | NODE, st.integers(1, 9), st.integers(0, 4)),
    st.tuples(st.just("update_pod"), POD, st.integers(0, 4), st.integers(1, 9)),
    st.tuples(st.just("relist_pod"), POD),
    st.tuples(st.just("delete_pod"), POD),
    st.tuples(st.just("add_node"), NODE, st.integers(1, 8)),
    st.tuples(st.just("update_node"), NODE, st.integers(0, 2)),
    st.tuples(st.just("delete_node"), NODE),
    st.tuples(st.just("vpa"), st.sampled_from(["a", "b"]), st.sampled_from(["100m", "700m"])),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEPS, max_size=30), with_vpa=st.booleans())
def test_the_kept_snapshot_is_the_one_built_from_scratch(
    steps: list[tuple[Any, ...]], with_vpa: bool
) -> None:
    cluster = Cluster(vpa=FakeVpa() if with_vpa else None)
    for j in range(3):
        cluster.add_node(j, 4)
    cluster.check()
    for step in steps:
        cluster.apply(step)
        cluster.check()


def test_a_steady_scan_derives_nothing_again() -> None:
    vpa = FakeVpa()
    vpa.recommend("a", "300m")
    cluster = Cluster(vpa=vpa)
    for j in range(3):
        cluster.add_node(j, 4)
    for i in range(6):
        cluster.add_pod(i, i % 3, 2, 0)
    cluster.add_pod(6, None, 2, 0)  # pending
    cluster.scan()
    # the first scan derives every pod's facts and builds every node
    assert (cluster.facts.computed, cluster.pieces.rebuilt) == (7, 3)
    asked = vpa.asked
    cluster.scan()
    # nothing changed: no pod derived again, the VPA not asked again, no node rebuilt
    assert (cluster.facts.computed, cluster.pieces.rebuilt, vpa.asked) == (0, 0, asked)
    cluster.update_pod(1, 0, 3)  # p1 (on n1) gets 300m
    cluster.scan()
    assert (cluster.facts.computed, cluster.pieces.rebuilt) == (1, 1)
    vpa.recommend("a", "500m")  # p0, p2, p4, p6 are app a (n0, n2, n1, pending)
    cluster.scan()
    assert (cluster.facts.computed, cluster.pieces.rebuilt) == (4, 3)
    cluster.update_node(2, 2)
    cluster.scan()
    assert (cluster.facts.computed, cluster.pieces.rebuilt) == (0, 1)
    cluster.check()


def test_entries_of_deleted_pods_and_nodes_are_released() -> None:
    cluster = Cluster(vpa=None)
    for j in range(2):
        cluster.add_node(j, 4)
    for i in range(4):
        cluster.add_pod(i, i % 2, 1, 0)
    cluster.scan()
    assert (len(cluster.facts), len(cluster.pieces)) == (4, 2)
    cluster.delete_pod(0)
    cluster.delete_pod(3)
    cluster.delete_node(1)
    listing, snapshot = cluster.scan()
    assert (len(cluster.facts), cluster.facts.released, len(cluster.pieces)) == (2, 2, 1)
    assert [f.key for f in listing.facts] == [("default", "p1"), ("default", "p2")]
    # p1 is bound to n1, which is gone: not in the snapshot (as ClusterSnapshot.build)
    assert [meta(p).name for p in snapshot.nodes["n0"].pods] == ["p2"]
    # a pod deleted and created again under its name is a new pod (a new uid)
    cluster.delete_pod(2)
    cluster.add_pod(2, 0, 3, 0)
    listing, snapshot = cluster.scan()
    assert (cluster.facts.computed, cluster.facts.released, len(cluster.facts)) == (1, 1, 2)
    assert snapshot.nodes["n0"].requested["cpu"] == 300


def test_a_relist_replaces_the_cached_facts() -> None:
    cluster = Cluster(vpa=None)
    cluster.add_node(0, 4)
    for i in range(3):
        cluster.add_pod(i, 0, 1, 0)
    cluster.scan()
    # the informer lists again (after a watch expired): p0 unchanged (a new object, the same
    # resourceVersion), p1 changed meanwhile (200m), p2 gone, p3 new
    relisted = {name: copy.deepcopy(obj) for name, obj in cluster.pods.items()}
    cluster.pods = relisted
    cluster.update_pod(1, 0, 2)
    cluster.delete_pod(2)
    cluster.add_pod(3, 0, 4, 0)
    listing, snapshot = cluster.scan()
    assert (cluster.facts.computed, cluster.facts.released) == (2, 1)
    assert [f.source for f in listing.facts] == list(cluster.pods.values())
    # 100m (p0) + 200m (p1) + 400m (p3)
    assert snapshot.nodes["n0"].requested["cpu"] == 700
    cluster.check()
