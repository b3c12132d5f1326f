"""The top-most well-known or scalable controller of a pod (webhook/controller_refs.py).

Cases follow upstream's ``controller_fetcher_test.go`` (TestControllerFetcher) and the owner
rules of ``FindParentControllerForPod``: the pod's *last* controller reference starts the walk,
a controller's *first* controller reference is its parent, missing well-known objects, Node
owners and ownership cycles give no controller, a parent without ``/scale`` ends the walk, and a
scalable custom resource becomes the answer (its Scale carries no owners, so the walk stops).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.controller_refs import (
    ControllerRef,
    controller_owner_ref,
    topmost_controller,
)
from kubescale.objects.pod import Pod
from tests import builders
from tests.builders.meta import stored_as

NS = "test-namespace"
Objects = dict[tuple[str, str], dict[str, Any]]  # (kind, name) -> object


def owner(
    kind: str, name: str, api_version: str = "apps/v1", *, controller: bool = True
) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{name}",
    }
    if controller:
        ref["controller"] = True
    return ref


def obj(kind: str, name: str, *owners: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS}
    if owners:
        metadata["ownerReferences"] = list(owners)
    return {"kind": kind, "metadata": metadata}


pod = functools.partial(
    builders.pods.typed_pod, name="test-pod", namespace=NS, containers=None, api_version=None
)


def resolve(
    the_pod: Pod, objects: list[dict[str, Any]], scalable: frozenset[str] = frozenset()
) -> ControllerRef | None:
    store: Objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    looked_up: list[tuple[str, str, str, str]] = []

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        looked_up.append((api_version, kind, namespace, name))
        assert namespace == NS
        return store.get((kind, name))

    def scalable_kinds(api_version: str, kind: str) -> bool:
        return kind in scalable

    return topmost_controller(the_pod, lookup=lookup, scalable_kinds=scalable_kinds)


def ref(kind: str, name: str, api_version: str = "apps/v1") -> ControllerRef:
    return ControllerRef(api_version=api_version, kind=kind, name=name, namespace=NS)


DEPLOYMENT = obj("Deployment", "test-deployment")
REPLICA_SET = obj("ReplicaSet", "test-rs", owner("Deployment", "test-deployment"))


@pytest.mark.parametrize(
    ("the_pod", "objects", "scalable", "expected"),
    [
        pytest.param(pod(), [], frozenset(), None, id="no owner: not under any VPA"),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment", controller=False)]),
            [DEPLOYMENT],
            frozenset(),
            None,
            id="owner without controller=true is ignored",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [],
            frozenset(),
            None,
            id="deployment doesn't exist: error, no controller",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [DEPLOYMENT],
            frozenset(),
            ref("Deployment", "test-deployment"),
            id="deployment no parent",
        ),
        pytest.param(
            pod(owner_references=[owner("ReplicaSet", "test-rs")]),
            [DEPLOYMENT, REPLICA_SET],
            frozenset(),
            ref("Deployment", "test-deployment"),
            id="replicaset with deployment parent",
        ),
        pytest.param(
            pod(owner_references=[owner("ReplicaSet", "test-rs")]),
            [REPLICA_SET],
            frozenset(),
            None,
            id="replicaset whose deployment is missing: error",
        ),
        pytest.param(
            pod(owner_references=[owner("StatefulSet", "test-statefulset")]),
            [obj("StatefulSet", "test-statefulset")],
            frozenset(),
            ref("StatefulSet", "test-statefulset"),
            id="StatefulSet",
        ),
        pytest.param(
            pod(owner_references=[owner("DaemonSet", "test-daemonset")]),
            [obj("DaemonSet", "test-daemonset")],
            frozenset(),
            ref("DaemonSet", "test-daemonset"),
            id="DaemonSet",
        ),
        pytest.param(
            pod(owner_references=[owner("Job", "test-job", "batch/v1")]),
            [
                obj("Job", "test-job", owner("CronJob", "test-cronjob", "batch/v1")),
                obj("CronJob", "test-cronjob"),
            ],
            frozenset(),
            ref("CronJob", "test-cronjob", "batch/v1"),
            id="Job owned by CronJob",
        ),
        pytest.param(
            pod(owner_references=[owner("ReplicationController", "test-rc", "v1")]),
            [obj("ReplicationController", "test-rc")],
            frozenset(),
            ref("ReplicationController", "test-rc", "v1"),
            id="rc no parent",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [obj("Deployment", "test-deployment", owner("Deployment", "test-deployment"))],
            frozenset(),
            None,
            id="deployment cycle in ownership",
        ),
        pytest.param(
            pod(owner_references=[owner("ReplicaSet", "a")]),
            [
                obj("ReplicaSet", "a", owner("Deployment", "b")),
                obj("Deployment", "b", owner("ReplicaSet", "a")),
            ],
            frozenset(),
            None,
            id="two-object cycle",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [obj("Deployment", "test-deployment", owner("Foo", "bah", "Foo/Foo"))],
            frozenset(),
            ref("Deployment", "test-deployment"),
            id="deployment, parent with no scale subresource: itself",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [
                obj("Deployment", "test-deployment", owner("Scale", "iCanScale", "Foo/Foo")),
                obj("Scale", "iCanScale", owner("Deployment", "higher")),
            ],
            frozenset({"Scale"}),
            ref("Scale", "iCanScale", "Foo/Foo"),
            id="deployment, parent not well known with scale subresource (walk stops there)",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [obj("Deployment", "test-deployment", owner("Scale", "gone", "Foo/Foo"))],
            frozenset({"Scale"}),
            ref("Deployment", "test-deployment"),
            id="scalable kind whose object is absent is not the answer",
        ),
        pytest.param(
            pod(owner_references=[owner("Deployment", "test-deployment")]),
            [obj("Deployment", "test-deployment", owner("Node", "node", "v1"))],
            frozenset({"Node"}),
            None,
            id="parent is node: error, no controller",
        ),
        pytest.param(
            pod(owner_references=[owner("Node", "node-1", "v1")]),
            [obj("Node", "node-1")],
            frozenset({"Node"}),
            None,
            id="static pod owned by a node",
        ),
        pytest.param(
            pod(owner_references=[owner("Foo", "bah", "Foo/Foo")]),
            [obj("Foo", "bah")],
            frozenset(),
            None,
            id="custom resource with no scale subresource",
        ),
        pytest.param(
            pod(owner_references=[owner("Rollout", "r", "argoproj.io/v1alpha1")]),
            [obj("Rollout", "r")],
            frozenset({"Rollout"}),
            ref("Rollout", "r", "argoproj.io/v1alpha1"),
            id="pod directly under a scalable custom resource",
        ),
        pytest.param(
            pod(owner_references=[owner("ReplicaSet", "test-rs"), owner("StatefulSet", "sts")]),
            [DEPLOYMENT, REPLICA_SET, obj("StatefulSet", "sts")],
            frozenset(),
            ref("StatefulSet", "sts"),
            id="two controller refs on the pod: the last wins",
        ),
        pytest.param(
            pod(owner_references=[owner("ReplicaSet", "rs2")]),
            [
                obj(
                    "ReplicaSet", "rs2", owner("Deployment", "first"), owner("Deployment", "second")
                ),
                obj("Deployment", "first"),
                obj("Deployment", "second"),
            ],
            frozenset(),
            ref("Deployment", "first"),
            id="two controller refs on a controller: the first wins",
        ),
    ],
)
def test_topmost_controller(
    the_pod: Pod,
    objects: list[dict[str, Any]],
    scalable: frozenset[str],
    expected: ControllerRef | None,
) -> None:
    assert resolve(the_pod, objects, scalable) == expected


def test_owner_ref_takes_the_pods_namespace() -> None:
    the_pod = pod(owner_references=[owner("ReplicaSet", "test-rs")])
    assert controller_owner_ref(the_pod) == ref("ReplicaSet", "test-rs")


def test_malformed_owner_references_are_ignored() -> None:
    broken: dict[str, Any] = {
        "metadata": {"namespace": NS, "ownerReferences": ["x", {"controller": "true"}]}
    }
    assert resolve(stored_as(broken, Pod), []) is None  # malformed on purpose


@settings(max_examples=200, deadline=None)
@given(
    links=st.lists(
        st.sampled_from(["ReplicaSet", "Deployment", "Foo", "Scale", "Node"]), max_size=6
    ),
    loop_back=st.booleans(),
)
def test_walk_always_ends(links: list[str], loop_back: bool) -> None:
    """Arbitrary owner chains (with or without a cycle back to the start) end in an answer."""
    names = [f"o{i}" for i in range(len(links))]
    objects = []
    for i, kind in enumerate(links):
        parents = [owner(links[i + 1], names[i + 1])] if i + 1 < len(links) else []
        if loop_back and i + 1 == len(links) and links:
            parents = [owner(links[0], names[0])]
        objects.append(obj(kind, names[i], *parents))
    start = pod(owner_references=[owner(links[0], names[0])]) if links else pod()
    result = resolve(start, objects, frozenset({"Scale"}))
    assert result is None or (result.kind, result.name) in {
        (k, n) for k, n in zip(links, names, strict=True)
    }
