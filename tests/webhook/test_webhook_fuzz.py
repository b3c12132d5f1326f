"""Hypothesis over AdmissionReview bodies: no exception escapes the handler, every answer is a
well-formed AdmissionReview, and pods are always allowed.

Bodies range from arbitrary bytes and arbitrary JSON to reviews of pod- and VPA-shaped objects
whose fields are drawn from a pool of plausible and implausible values (quantities of every
size, wrong types, missing keys). The pods are owned by a ReplicaSet of a Deployment that a VPA
with a recommendation targets, so the generated pods go all the way through matching, capping,
limits and patching. A patch, when there is one, must apply to the object it was made for.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.kube.client import connect
from kubescale.sim.apiserver.patching import PatchError, apply_json_patch
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings
from tests import builders

from .api_fixtures import build_caches

QUANTITIES = st.sampled_from(
    [
        "0",
        "1",
        "100m",
        "250m",
        "1.5",
        "128Mi",
        "1Gi",
        "8Ei",
        "9223372036854775807",
        "1e100",
        "-1",
        "1n",
        "abc",
        "",
        "12 Mi",
    ]
)
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5)
)
RESOURCE_LISTS = st.one_of(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu", ""]), QUANTITIES, max_size=3
    ),
    ODD_VALUES,
)
CONTAINERS = st.fixed_dictionaries(
    {"name": st.sampled_from(["app", "sidecar", "a/b~c", ""])},
    optional={
        "resources": st.one_of(
            st.fixed_dictionaries(
                {}, optional={"requests": RESOURCE_LISTS, "limits": RESOURCE_LISTS}
            ),
            ODD_VALUES,
        ),
        "image": st.just("nginx"),
    },
)
OWNERS = st.sampled_from(
    [
        [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "controller": True}],
        [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone", "controller": True}],
        [{"apiVersion": "v1", "kind": "Node", "name": "n", "controller": True}],
        [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "controller": True}],
        [],
        "not a list",
    ]
)
PODS = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"namespace": st.just("default"), "labels": st.just({"app": "web"})},
            optional={
                "ownerReferences": OWNERS,
                "annotations": st.one_of(st.none(), st.just({}), st.just({"a": "b"})),
                "name": st.text(max_size=5),
            },
        ),
        "spec": st.one_of(
            st.fixed_dictionaries({"containers": st.lists(CONTAINERS, max_size=3)}), ODD_VALUES
        ),
    },
    optional={"status": st.just({"containerStatuses": [{"name": "app", "resources": {}}]})},
)
VPA_SPECS = st.fixed_dictionaries(
    {},
    optional={
        "targetRef": st.one_of(
            st.just({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}), ODD_VALUES
        ),
        "updatePolicy": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "updateMode": st.sampled_from(["Off", "Auto", "Recreate", "InPlace", "x"]),
                    "minReplicas": st.integers(-2, 3),
                },
            ),
            ODD_VALUES,
        ),
        "resourcePolicy": st.fixed_dictionaries(
            {
                "containerPolicies": st.lists(
                    st.fixed_dictionaries(
                        {"containerName": st.sampled_from(["app", "*", ""])},
                        optional={
                            "minAllowed": RESOURCE_LISTS,
                            "maxAllowed": RESOURCE_LISTS,
                            "mode": st.sampled_from(["Auto", "Off", "x"]),
                            "controlledValues": st.sampled_from(
                                ["RequestsOnly", "RequestsAndLimits", "x"]
                            ),
                        },
                    ),
                    max_size=2,
                )
            }
        ),
    },
)
VPAS = st.fixed_dictionaries(
    {"metadata": st.just({"name": "v", "namespace": "default"}), "spec": VPA_SPECS}
)


review = functools.partial(
    builders.admission.admission_review, uid="fuzz", namespace="default", kind=None
)
"""A review of a fuzzed object (no ``request.kind``; ``oldObject`` given, ``null`` included)."""


POD_REVIEWS = PODS.map(lambda pod: review(obj=pod, resource="pods", request={"oldObject": None}))
VPA_REVIEWS = st.tuples(VPAS, st.sampled_from(["CREATE", "UPDATE"]), st.none() | VPAS).map(
    lambda t: review(
        obj=t[0],
        group="autoscaling.k8s.io",
        resource="verticalpodautoscalers",
        operation=t[1],
        request={"oldObject": t[2]},
    )
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
BODIES = st.one_of(
    st.binary(max_size=64),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(["request", "kind", "apiVersion"]), JSON_VALUES).map(
        lambda v: json.dumps(v).encode()
    ),
    POD_REVIEWS.map(lambda v: json.dumps(v).encode()),
    VPA_REVIEWS.map(lambda v: json.dumps(v).encode()),
)


class Harness:
    """An event loop kept across examples, with caches synced from an API server."""

    def __init__(self, tmp_path: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.tmp_path = tmp_path

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def start(self) -> None:
        self.api = ApiServer(seed=5)
        await self.api.start()
        store = self.api.store
        labels = {"app": "web"}
        template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app"}]}}
        deployment = store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"matchLabels": labels}, "template": template},
            }
        )
        owner = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": deployment["metadata"]["uid"],
            "controller": True,
        }
        store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "web-rs", "namespace": "default", "ownerReferences": [owner]},
                "spec": {"selector": {"matchLabels": labels}, "template": template},
            }
        )
        vpa = store.create(
            {
                "apiVersion": "autoscaling.k8s.io/v1",
                "kind": "VerticalPodAutoscaler",
                "metadata": {"name": "web-vpa", "namespace": "default"},
                "spec": {
                    "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "resourcePolicy": {
                        "containerPolicies": [
                            {"containerName": "*", "maxAllowed": {"cpu": "4", "memory": "8Gi"}}
                        ]
                    },
                },
            }
        )
        recommendation = {
            "containerRecommendations": [
                {"containerName": name, "target": {"cpu": "250m", "memory": "200Mi"}}
                for name in ("app", "sidecar", "a/b~c")
            ]
        }
        store.update_status({**vpa, "status": {"recommendation": recommendation}})
        self.api.write_kubeconfig(self.tmp_path / "kubeconfig")
        self.kube = await connect(kubeconfig=self.tmp_path / "kubeconfig", rng=random.Random(0))
        settings_ = WebhookSettings(avoid_hpa_conflict=True, cap_to_largest_node=True)
        self.informers, caches = build_caches(self.kube, settings_, clock=self.kube.clock)
        self.informers.start()
        assert await self.informers.wait_synced()
        self.webhook = AdmissionWebhook(
            settings=settings_, registry=CollectorRegistry(), caches=caches, controller_wait=0.0
        )

    async def stop(self) -> None:
        await self.informers.stop()
        await self.kube.close()
        await self.api.stop()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    harness = Harness(tmp_path_factory.mktemp("fuzz"))
    harness.run(harness.start())
    try:
        yield harness
    finally:
        harness.run(harness.stop())
        harness.loop.close()


def _check(harness: Harness, body: bytes, content_type: str) -> None:
    answer = harness.run(harness.webhook.admit(body, content_type=content_type))
    review = json.loads(json.dumps(answer.review))  # serialisable as the route sends it
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    response = review["response"]
    assert isinstance(response["uid"], str)
    assert isinstance(response["allowed"], bool)
    assert answer.status in ("error", "skipped", "applied")
    assert answer.resource in ("Pod", "VPA", "unknown")
    if answer.resource != "VPA":
        assert response["allowed"] is True
    if not response["allowed"]:
        assert isinstance(response["status"], dict)
        assert "patch" not in response
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        patch = json.loads(base64.b64decode(response["patch"], validate=True))
        assert isinstance(patch, list)
        assert patch
        try:
            obj = json.loads(body)["request"]["object"]
        except (ValueError, KeyError, TypeError):  # pragma: no cover - patches need an object
            pytest.fail("a patch for a request without an object")
        try:
            apply_json_patch(obj, patch)
        except PatchError as exc:  # pragma: no cover - the assertion's message
            pytest.fail(f"the patch does not apply to its object: {exc}")


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=BODIES, content_type=st.sampled_from(["application/json", "text/plain"]))
def test_no_exception_escapes_and_every_answer_is_well_formed(
    harness: Harness, body: bytes, content_type: str
) -> None:
    _check(harness, body, content_type)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(review=POD_REVIEWS)
def test_generated_pods_are_always_allowed_and_patches_apply(
    harness: Harness, review: dict[str, Any]
) -> None:
    _check(harness, json.dumps(review).encode(), "application/json")
