"""Projections derived from the typed objects (issue 29): what a projected cache keeps.

Tables of (object, what the projection keeps) worked out from the TypedDicts in
``kubescale/objects/`` (a field is kept iff the kind's TypedDict names it, recursively), plus
hypothesis properties: projecting is idempotent, never adds anything, keeps every declared
scalar as sent, and interns repeated strings.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.pod import Pod
from kubescale.objects.projection import (
    INTERN_MAX_LENGTH,
    KEEP,
    NOT_INTERNED,
    PROJECTIONS,
    UNREAD_ANNOTATIONS,
    Projection,
    project,
    projection_for,
    projection_of,
)
from tests import builders

POD = PROJECTIONS[("", "Pod")]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _server_pod() -> dict[str, Any]:
    """A pod as kube-apiserver stores it: managedFields, a kubectl annotation, env, probes."""
    body = builders.pods.pod(
        name="web-0",
        labels={"app": "web"},
        annotations={LAST_APPLIED: "{...}", "cluster-autoscaler.kubernetes.io/safe-to-evict": "1"},
        containers=[
            builders.pods.container(
                "app",
                requests={"cpu": "100m"},
                env=[{"name": "A", "value": "1"}],
                livenessProbe={"httpGet": {"path": "/"}},
            )
        ],
        node_name="n1",
        status={
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.1"}],
            "containerStatuses": [
                {"name": "app", "ready": True, "restartCount": 2, "imageID": "sha256:abc"}
            ],
        },
    )
    body["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    body["spec"]["dnsPolicy"] = "ClusterFirst"
    return body


def test_a_pod_keeps_exactly_what_the_typed_pod_names() -> None:
    projected = project(_server_pod(), POD)
    # metadata: managedFields is not in ObjectMeta; the kubectl annotation is declared unread
    assert "managedFields" not in projected["metadata"]
    assert projected["metadata"]["annotations"] == {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "1"
    }
    assert projected["metadata"]["labels"] == {"app": "web"}
    # spec: dnsPolicy is not in PodSpec; Container names no env or livenessProbe
    assert "dnsPolicy" not in projected["spec"]
    assert projected["spec"]["nodeName"] == "n1"
    assert projected["spec"]["containers"] == [
        {"name": "app", "resources": {"requests": {"cpu": "100m"}}}
    ]
    # status: podIPs and imageID are not in PodStatus / ContainerStatus
    assert projected["status"] == {
        "phase": "Running",
        "containerStatuses": [{"name": "app", "ready": True, "restartCount": 2}],
    }


def test_the_original_is_left_alone() -> None:
    original = _server_pod()
    before = copy.deepcopy(original)
    project(original, POD)
    assert original == before


@pytest.mark.parametrize(
    ("group", "kind", "projected"),
    [
        ("", "Pod", True),
        ("", "Node", True),
        ("apps", "ReplicaSet", True),
        ("policy", "PodDisruptionBudget", True),
        # written back whole from the cache (the HPA's status PUT): never projected
        ("autoscaling", "HorizontalPodAutoscaler", False),
        ("autoscaling.k8s.io", "VerticalPodAutoscaler", False),
        ("", "ConfigMap", False),
    ],
)
def test_which_kinds_are_projected(group: str, kind: str, projected: bool) -> None:
    assert (projection_for(group, kind) is not None) == projected


def test_repeated_strings_are_shared() -> None:
    first, second = project(_server_pod(), POD), project(_server_pod(), POD)
    # built separately (two json decodes would give two copies); one object after projection
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]
    assert first["spec"]["nodeName"] is second["spec"]["nodeName"]
    label_key_1 = next(iter(first["metadata"]["labels"]))
    label_key_2 = next(iter(second["metadata"]["labels"]))
    assert label_key_1 is label_key_2


def test_a_recursive_or_nested_declaration_is_derived_once() -> None:
    projection = projection_of(Pod)
    assert projection.fields is not None
    meta = projection.fields["metadata"]
    assert meta.fields is not None
    assert "ownerReferences" in meta.fields
    owner = meta.fields["ownerReferences"].items
    assert isinstance(owner, Projection)
    assert owner.fields is not None
    assert set(owner.fields) >= {"kind", "name", "uid", "controller"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "name", "uid", "spec", "x"]), children, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def _pods(draw: st.DrawFn) -> dict[str, Any]:
    body = _server_pod()
    body["metadata"]["labels"] = draw(st.dictionaries(st.text(max_size=5), st.text(max_size=5)))
    body["spec"]["extra"] = draw(_json)
    body["status"]["phase"] = draw(st.sampled_from(["Running", "Pending", "Failed"]))
    body["status"]["conditions"] = draw(
        st.lists(st.fixed_dictionaries({"type": st.text(max_size=4), "junk": _json}), max_size=3)
    )
    body["metadata"]["annotations"][LAST_APPLIED] = draw(st.text())
    return body


def _is_subset(small: Any, big: Any) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and _is_subset(v, big[k]) for k, v in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(small) == len(big)
            and all(_is_subset(a, b) for a, b in zip(small, big, strict=True))
        )
    return bool(small == big)


@settings(max_examples=60, deadline=None)
@given(_pods())
def test_projecting_is_idempotent_and_only_removes(body: dict[str, Any]) -> None:
    once = project(body, POD)
    assert project(once, POD) == once
    assert _is_subset(once, body)
    # every declared field survives with its value: labels, phase, condition types
    assert once["metadata"]["labels"] == body["metadata"]["labels"]
    assert once["status"]["phase"] == body["status"]["phase"]
    assert [c["type"] for c in once["status"]["conditions"]] == [
        c["type"] for c in body["status"]["conditions"]
    ]
    assert "extra" not in once["spec"]
    assert not UNREAD_ANNOTATIONS & set(once["metadata"]["annotations"])


def test_a_pod_keeps_its_resource_claims() -> None:
    """The descheduler's DefaultEvictor protects a pod with ``spec.resourceClaims`` when
    ``PodsWithResourceClaims`` is enabled; its informer's cache holds projected pods, so the
    projection must keep the field (PodSpec did not name it: the protection never fired on a
    cached pod)."""
    claims = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    body = builders.pods.pod(name="trainer-0", spec={"resourceClaims": claims})
    assert project(body, POD)["spec"]["resourceClaims"] == claims


def _reference(value: Any, projection: Projection, key: str = "") -> Any:
    """:func:`project` as its docstring defines it, interpreted value by value (the
    implementation compiles the projection to closures; this is the definition it must keep)."""
    if isinstance(value, str):
        if key not in NOT_INTERNED and len(value) <= INTERN_MAX_LENGTH:
            return sys.intern(value)
        return value
    if projection.fields is not None:
        if not isinstance(value, dict):
            return value
        return {
            n: _reference(v, projection.fields[n], n)
            for n, v in value.items()
            if n in projection.fields
        }
    if projection.items is not None:
        if not isinstance(value, list):
            return value
        return [_reference(item, projection.items, key) for item in value]
    if projection.values is not None:
        if not isinstance(value, dict):
            return value
        drop = UNREAD_ANNOTATIONS if projection.annotations else frozenset()
        return {n: _reference(v, projection.values, n) for n, v in value.items() if n not in drop}
    if isinstance(value, list):
        return [_reference(item, KEEP, key) for item in value]
    if isinstance(value, dict):
        return {k: _reference(v, KEEP, k) for k, v in value.items()}
    return value


_NAMES = ["a", "name", "uid", "spec", LAST_APPLIED, "message"]
_projections = st.recursive(
    st.just(KEEP),
    lambda children: (
        st.builds(
            lambda fields: Projection(fields=fields),
            st.dictionaries(st.sampled_from(_NAMES), children, max_size=4),
        )
        | st.builds(lambda items: Projection(items=items), children)
        | st.builds(
            lambda values, annotations: Projection(values=values, annotations=annotations),
            children,
            st.booleans(),
        )
    ),
    max_leaves=8,
)
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(min_size=2, max_size=3)
    | st.text(min_size=INTERN_MAX_LENGTH + 1, max_size=INTERN_MAX_LENGTH + 2),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(_NAMES), children, max_size=4)
    ),
    max_leaves=16,
)


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for each in value.values():
            yield from _walk(each)
    elif isinstance(value, list):
        for each in value:
            yield from _walk(each)


def _same_strings(got: Any, want: Any) -> bool:
    """Equal, and each string interned exactly where the definition interns it (every string
    of the test has an interned twin already, so ``sys.intern`` only looks it up here)."""
    if isinstance(want, str):
        return got == want and (got is sys.intern(got)) == (want is sys.intern(want))
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and list(got) == list(want)
            and all(_same_strings(got[k], v) for k, v in want.items())
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_same_strings(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and bool(got == want)


@settings(max_examples=300, deadline=None)
@given(_projections, _values, st.sampled_from(["", "name", "uid"]))
def test_the_compiled_projection_keeps_the_definition(
    projection: Projection, value: Any, key: str
) -> None:
    """For any projection and any JSON value, :func:`project` returns what the definition does
    (same keys in the same order, same scalars, strings interned at the same places) in new
    containers where the definition builds new ones."""
    for each in _walk(value):
        if isinstance(each, str):
            sys.intern(each)  # the twin: decoded strings below are other objects
    fresh = json.loads(json.dumps(value))
    got, want = project(fresh, projection, key=key), _reference(fresh, projection, key)
    assert _same_strings(got, want)
    decoded = {id(each) for each in _walk(fresh) if isinstance(each, dict | list)}

    def kept(value: Any) -> set[int]:
        return {id(each) for each in _walk(value) if id(each) in decoded}

    assert kept(got) == kept(want)  # a value the projection does not apply to is kept as sent


def test_a_projection_that_contains_itself_compiles_once() -> None:
    """A TypedDict that names itself (recursively) projects to any depth."""
    fields: dict[str, Projection] = {}
    tree = Projection(fields=fields)
    fields["child"] = tree
    fields["name"] = KEEP
    deep: dict[str, Any] = {"name": "leaf", "drop": 1}
    for depth in range(50):
        deep = {"name": f"n{depth}", "child": deep, "drop": depth}
    projected = project(deep, tree)
    assert projected == _reference(deep, tree)
    assert "drop" not in projected
