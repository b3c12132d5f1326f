"""The updater's incremental pod→VPA matching answers as upstream's from-scratch one (issue 29).

:class:`PodMatcher` keeps facts across iterations; :func:`match_from_scratch` is upstream's
per-loop matching (every pod: top-most controller, the VPAs indexed under it, their selectors,
the strongest). A hypothesis property runs random histories — pods added, relabelled, moved to
another owner, unbound, being deleted, finished, deleted; re-lists (new objects, the same
resourceVersions); ReplicaSets moved to another Deployment, owners deleted and re-created; VPAs
created, deleted, retargeted, switched Off and back, their recommendation rewritten; a
target's selector changed; a custom kind gaining or losing ``/scale`` — and after every step
compares both answers (the same pods, the very objects, in the same order; the same terminating
counts). It was run against deliberately broken invalidations (a walk never re-checked,
candidates never re-checked, an entry kept across a new resourceVersion): each failed it.

A table checks the counters: a steady iteration matches 0 pods; one changed pod, 1; a VPA
created over a Deployment of 3 pods, those 3 (and its walk is kept: 0 walks).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.updater.eviction_restriction import controller_of, pod_id
from kubescale.controllers.vpa.updater.pod_matching import (
    Matches,
    PodMatcher,
    TargetKey,
    match_from_scratch,
)
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector, label_selector_from_set
from kubescale.objects.vpa import VerticalPodAutoscaler
from tests.builders.meta import owner_reference
from tests.builders.pods import typed_pod
from tests.builders.vpas import target_ref, typed_vpa
from tests.builders.workloads import deployment, replica_set, workload

ROLLOUT_API = "argoproj.io/v1alpha1"
"""A custom kind: a controller only while it serves ``/scale``."""

OWNERS: list[tuple[str, str, str]] = [
    ("ReplicaSet", "a", "web-1"),
    ("ReplicaSet", "a", "web-2"),
    ("ReplicaSet", "a", "api-1"),
    ("ReplicaSet", "b", "web-1"),
    ("Rollout", "a", "ro"),
    ("StatefulSet", "a", "missing"),
    ("Node", "a", "node-1"),
]
"""A pod's direct controller (``None``: no controller reference)."""
DEPLOYMENTS: list[tuple[str, str]] = [("a", "web"), ("a", "api"), ("b", "web")]
LABELS: list[dict[str, str]] = [
    {"app": "web"},
    {"app": "api"},
    {"app": "web", "tier": "x"},
    {},
    {"app": "ro"},
]
TARGETS: list[tuple[str, str, str]] = [
    ("Deployment", "a", "web"),
    ("Deployment", "a", "api"),
    ("Deployment", "b", "web"),
    ("ReplicaSet", "a", "web-1"),
    ("Rollout", "a", "ro"),
]
MODES = ["Recreate", "Auto", "Off", "InPlaceOrRecreate"]
TIMES = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", None]


class World:
    """The caches the updater reads: pods, owners, VPAs, selectors; every write is a new
    object with a new resourceVersion, as the informer holds them."""

    def __init__(self) -> None:
        self.version = 0
        self.pods: dict[str, Pod] = {}
        self.owners: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.vpas: dict[str, VerticalPodAutoscaler] = {}
        self.selectors: dict[TargetKey, LabelSelector] = {
            (namespace, kind, name): label_selector_from_set({"app": name.split("-")[0]})
            for kind, namespace, name in TARGETS
        }
        self.scalable = True
        self.order: list[str] = []
        for namespace, name in DEPLOYMENTS:
            self.put_owner(deployment(name=name, namespace=namespace))
        for _, namespace, name in OWNERS[:4]:
            parent = f"{name.split('-')[0]}"
            self.put_owner(
                replica_set(
                    name=name,
                    namespace=namespace,
                    owner_references=[owner_reference(kind="Deployment", name=parent)],
                )
            )
        self.put_owner(workload("Rollout", name="ro", namespace="a", api_version=ROLLOUT_API))
        # every history starts with pods under each VPA: (owner, labels) per pod
        for owner, labels in [(0, 0), (0, 0), (0, 2), (1, 0), (2, 1), (3, 0), (4, 4), (None, 0)]:
            uid = f"p{self.version}"
            self.pods[uid] = self.pod(uid, owner=owner, labels=labels, namespace=None)
            self.order.append(uid)
        for index, target in enumerate([0, 1, 2, 4]):
            name = f"v{index}"
            self.vpas[name] = self.vpa(name, target=target, mode=index % 2, created=index % 3)

    def stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return obj

    def put_owner(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.owners[(obj["kind"], meta["namespace"], meta["name"])] = self.stamp(obj)

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> Any:
        return self.owners.get((kind, namespace, name))

    def is_scalable(self, api_version: str, kind: str) -> bool:
        return kind != "Rollout" or self.scalable

    def pod(self, uid: str, *, owner: int | None, labels: int, namespace: str | None) -> Pod:
        refs = []
        if owner is not None:
            kind, owner_namespace, name = OWNERS[owner]
            api = ROLLOUT_API if kind == "Rollout" else "v1" if kind == "Node" else "apps/v1"
            refs = [owner_reference(kind=kind, name=name, api_version=api)]
            namespace = namespace or owner_namespace
        made = typed_pod(
            name=f"pod-{uid}",
            namespace=namespace or "a",
            uid=uid,
            labels=LABELS[labels],
            owner_references=refs,
            node_name="node-1",
            status={"phase": "Running"},
        )
        return self.stamp(made)  # type: ignore[arg-type,return-value]

    def replace(self, pod: Pod, change: int) -> Pod:
        """A new object for ``pod`` with one change (``change`` picks which)."""
        new: dict[str, Any] = copy.deepcopy(dict(pod))
        if change == 0:
            new["metadata"]["labels"] = dict(LABELS[self.version % len(LABELS)])
        elif change == 1:
            new["spec"].pop("nodeName", None)
            new["status"] = {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            }
        elif change == 2:
            new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        elif change == 3:
            new["status"] = {"phase": "Succeeded"}
        else:
            kind, _, name = OWNERS[change % len(OWNERS)]
            api = ROLLOUT_API if kind == "Rollout" else "apps/v1"
            new["metadata"]["ownerReferences"] = [
                owner_reference(kind=kind, name=name, api_version=api)
            ]
        return self.stamp(new)  # type: ignore[return-value]

    def vpa(self, name: str, *, target: int, mode: int, created: int) -> VerticalPodAutoscaler:
        kind, namespace, target_name = TARGETS[target]
        api = ROLLOUT_API if kind == "Rollout" else "apps/v1"
        made = typed_vpa(
            name=name,
            namespace=namespace,
            creation_timestamp=TIMES[created],
            target=target_ref(kind=kind, name=target_name, api_version=api),
            update_mode=MODES[mode],
            targets={"app": {"cpu": f"{self.version}m"}},
        )
        return self.stamp(made)  # type: ignore[arg-type,return-value]

    def listed(self) -> list[Pod]:
        return [self.pods[uid] for uid in self.order if uid in self.pods]


def apply(world: World, step: tuple[Any, ...]) -> None:
    op, a, b, c = step
    uids = sorted(world.pods)
    vpa_names = sorted(world.vpas)
    if op == "add_pod":
        uid = f"p{world.version}"
        world.pods[uid] = world.pod(
            uid,
            owner=a if a < len(OWNERS) else None,
            labels=b % len(LABELS),
            namespace="b" if c == 2 else None,
        )
        world.order.append(uid)
    elif op == "update_pod" and uids:
        uid = uids[a % len(uids)]
        world.pods[uid] = world.replace(world.pods[uid], b)
    elif op == "delete_pod" and uids:
        del world.pods[uids[a % len(uids)]]
    elif op == "relist":
        # a re-list: every object anew, the same resourceVersions; the order may change
        world.pods = {uid: copy.deepcopy(pod) for uid, pod in world.pods.items()}
        world.owners = {key: copy.deepcopy(obj) for key, obj in world.owners.items()}
        world.vpas = {name: copy.deepcopy(vpa) for name, vpa in world.vpas.items()}
        world.order = [uid for uid in world.order if uid in world.pods]
        if a % 2:
            world.order.reverse()
    elif op == "move_replica_set":
        kind, namespace, name = OWNERS[a % 4]
        _, parent = DEPLOYMENTS[b % 2]
        world.put_owner(
            replica_set(
                name=name,
                namespace=namespace,
                owner_references=[owner_reference(kind="Deployment", name=parent)] if c else [],
            )
        )
    elif op == "delete_owner":
        keys = sorted(world.owners)
        world.owners.pop(keys[a % len(keys)], None)
    elif op == "add_deployment":
        namespace, name = DEPLOYMENTS[a % len(DEPLOYMENTS)]
        world.put_owner(deployment(name=name, namespace=namespace))
    elif op == "add_vpa":
        name = f"v{a % 4}"
        world.vpas[name] = world.vpa(name, target=b % len(TARGETS), mode=c % 4, created=a % 3)
    elif op == "delete_vpa" and vpa_names:
        del world.vpas[vpa_names[a % len(vpa_names)]]
    elif op == "retarget_vpa" and vpa_names:
        name = vpa_names[a % len(vpa_names)]
        old = world.vpas[name]
        world.vpas[name] = world.vpa(
            name,
            target=b % len(TARGETS),
            mode=MODES.index(old["spec"]["updatePolicy"]["updateMode"]),
            created=TIMES.index(old["metadata"].get("creationTimestamp")),
        )
    elif op == "vpa_mode" and vpa_names:
        name = vpa_names[a % len(vpa_names)]
        new: dict[str, Any] = copy.deepcopy(dict(world.vpas[name]))
        new["spec"]["updatePolicy"] = {"updateMode": MODES[b % 4]}
        world.vpas[name] = world.stamp(new)  # type: ignore[assignment]
    elif op == "recommendation" and vpa_names:
        name = vpa_names[a % len(vpa_names)]
        new = copy.deepcopy(dict(world.vpas[name]))
        new["status"]["recommendation"]["containerRecommendations"][0]["target"]["cpu"] = "7m"
        world.vpas[name] = world.stamp(new)  # type: ignore[assignment]
    elif op == "selector":
        kind, namespace, name = TARGETS[a % len(TARGETS)]
        key = (namespace, kind, name)
        if c == 0:
            world.selectors.pop(key, None)
        else:
            world.selectors[key] = label_selector_from_set(LABELS[b % len(LABELS)])
    elif op == "scalable":
        world.scalable = bool(a % 2)


STEPS = st.tuples(
    st.sampled_from(
        [
            "add_pod",
            "add_pod",
            "update_pod",
            "delete_pod",
            "relist",
            "move_replica_set",
            "delete_owner",
            "add_deployment",
            "add_vpa",
            "add_vpa",
            "delete_vpa",
            "retarget_vpa",
            "vpa_mode",
            "recommendation",
            "selector",
            "scalable",
        ]
    ),
    st.integers(0, 7),
    st.integers(0, 7),
    st.integers(0, 3),
)


def scratch(world: World) -> Matches:
    return match_from_scratch(
        world.listed(),
        list(world.vpas.values()),
        world.selectors,
        lookup=world.lookup,
        scalable_kinds=world.is_scalable,
        unschedulable_too=True,
    )


def incremental(world: World, matcher: PodMatcher) -> Matches:
    return matcher.match(
        world.listed(),
        list(world.vpas.values()),
        world.selectors,
        lookup=world.lookup,
        scalable_kinds=world.is_scalable,
    )


def same(got: Matches, want: Matches) -> None:
    def ids(matched: Mapping[tuple[str, str], list[Pod]]) -> dict[tuple[str, str], list[int]]:
        return {key: [id(pod) for pod in pods] for key, pods in matched.items()}

    assert {k: [pod_id(p) for p in v] for k, v in got[0].items()} == {
        k: [pod_id(p) for p in v] for k, v in want[0].items()
    }
    assert ids(got[0]) == ids(want[0])  # the very objects the informer holds now
    assert got[1] == want[1]


@pytest.mark.full_examples
@settings(max_examples=300, deadline=None)
@given(steps=st.lists(STEPS, max_size=40))
def test_incremental_matching_answers_as_from_scratch(steps: list[tuple[Any, ...]]) -> None:
    world = World()
    matcher = PodMatcher(unschedulable_too=True)
    same(incremental(world, matcher), scratch(world))
    for step in steps:
        apply(world, step)
        same(incremental(world, matcher), scratch(world))
        assert len(matcher) <= len(world.pods)  # entries of deleted pods released
        for pod in world.listed():
            assert matcher.controller_key(pod) == controller_of(pod)


def test_matching_counts_what_changed() -> None:
    world = World()  # 8 pods, 7 of them under a controller; VPAs on a/web, a/api, b/web, ro
    matcher = PodMatcher(unschedulable_too=True)
    incremental(world, matcher)
    # first iteration: the 7 controlled pods matched; 5 walks (ReplicaSets a/web-1, a/web-2,
    # a/api-1, b/web-1 to their Deployments, Rollout ro to itself)
    assert (matcher.matched, matcher.walked, len(matcher)) == (7, 5, 8)
    incremental(world, matcher)
    assert (matcher.matched, matcher.walked) == (0, 0)  # nothing changed
    apply(world, ("update_pod", 0, 0, 0))  # one pod relabelled
    incremental(world, matcher)
    assert (matcher.matched, matcher.walked) == (1, 0)
    apply(world, ("recommendation", 0, 0, 0))  # the recommender rewrote v0's status
    incremental(world, matcher)
    assert (matcher.matched, matcher.walked) == (0, 0)
    apply(world, ("vpa_mode", 1, 2, 0))  # v1 (a/api) switched Off: api's 1 pod anew
    incremental(world, matcher)
    assert (matcher.matched, matcher.walked) == (1, 0)
    apply(world, ("move_replica_set", 0, 1, 1))  # a/web-1 (3 pods) moved to Deployment api
    incremental(world, matcher)
    assert (matcher.matched, matcher.walked) == (3, 1)
    apply(world, ("relist", 1, 0, 0))  # new objects, the same resourceVersions
    incremental(world, matcher)
    assert (matcher.matched, matcher.walked) == (0, 0)
    apply(world, ("delete_pod", 0, 0, 0))
    incremental(world, matcher)
    assert (matcher.matched, matcher.released, len(matcher)) == (0, 1, 7)
