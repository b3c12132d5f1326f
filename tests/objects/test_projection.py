"""Projections derived from the typed objects (issue 29): what a projected cache keeps.

Tables of (object, what the projection keeps) worked out from the TypedDicts in
``kubescale/objects/`` (a field is kept iff the kind's TypedDict names it, recursively), plus
hypothesis properties: projecting is idempotent, never adds anything, keeps every declared
scalar as sent, and interns repeated strings.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.pod import Pod
from kubescale.objects.projection import (
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
