"""Issue 26, item 7: what the webhook keeps for a namespace goes when the namespace goes.

Through the real route and the real informers of the in-process API server: pods of three
namespaces are admitted (two with a LimitRange) and an event about each namespace's VPA passes
the event throttle, then two namespaces are deleted through the client. Once their DELETEs (and
those of their objects) reached the informers, nothing of them is left in the admission
caches' sorted LimitRanges and parsed selectors, the match, decision and answer caches, or the
event throttle — while the third namespace's state is untouched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubescale.kube.resources import NAMESPACES
from kubescale.webhook.webhook_config import WebhookSettings
from tests.builders.admission import admission_review

from .test_admission_routes import Setup, _recommendation, _setup, web_pod


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings()):
        yield value


def _seed_namespace(setup: Setup, namespace: str, *, min_cpu: str | None) -> None:
    """A Deployment ``web``, its ReplicaSet ``web-rs`` and a VPA with a recommendation (cpu
    250m, memory 200Mi) in a new ``namespace``; with ``min_cpu`` a LimitRange (container min
    cpu) the VPA's request keeps to."""
    store = setup.api.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    labels = {"app": "web"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app"}]}}
    spec = {"selector": {"matchLabels": labels}, "template": template}
    deployment = store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": spec,
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
            "metadata": {"name": "web-rs", "namespace": namespace, "ownerReferences": [owner]},
            "spec": spec,
        }
    )
    vpa = store.create(
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web-vpa", "namespace": namespace},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }
    )
    recommendation = _recommendation({"cpu": "250m", "memory": "200Mi"})
    store.update_status({**vpa, "status": {"recommendation": recommendation}})
    if min_cpu is not None:
        store.create(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "limits", "namespace": namespace},
                "spec": {"limits": [{"type": "Container", "min": {"cpu": min_cpu}}]},
            }
        )


async def _caught_up(setup: Setup) -> None:
    setup.api.bookmark_watches()
    version = str(setup.api.store.resource_version)
    assert await setup.informers.wait_for_resource_version(version, within=10.0)


async def _admit(setup: Setup, namespace: str, index: int) -> None:
    pod = web_pod()
    pod["metadata"]["namespace"] = namespace
    review = admission_review(
        uid=f"{namespace}-{index}", namespace="default", request={"object": pod, "oldObject": None}
    )
    review["request"]["namespace"] = namespace
    answer = await setup.post(json.dumps(review).encode())
    assert "patch" in answer["response"]


def _held(setup: Setup) -> dict[str, set[str]]:
    """Per structure, the namespaces it keeps something for."""
    webhook = setup.webhook
    return {
        "admission caches": setup.caches.held_namespaces(),
        "memo": webhook.memo.namespaces(),
        "event throttle": webhook.event_throttle.namespaces(),
    }


async def test_a_deleted_namespaces_state_is_released_when_its_delete_arrives(
    setup: Setup,
) -> None:
    _seed_namespace(setup, "team-a", min_cpu="100m")
    _seed_namespace(setup, "team-b", min_cpu="100m")
    _seed_namespace(setup, "team-c", min_cpu=None)
    await _caught_up(setup)
    for namespace in ("team-a", "team-b", "team-c"):
        for index in range(3):
            await _admit(setup, namespace, index)
        # an event about the namespace's VPA passed the throttle (the route's key: namespace,
        # name, uid, reason, message)
        setup.webhook.event_throttle.allow((namespace, "web-vpa", "uid", "HPAConflict", "m"))
    held = _held(setup)
    # every structure holds team-a (the LimitRange's override is not remembered as an
    # answer: its event must be recorded per decision, so team-c stands in for answers)
    assert {"team-a", "team-b", "team-c"} <= held["admission caches"]
    assert {"team-a", "team-b", "team-c"} <= held["memo"]
    assert {"team-a", "team-b", "team-c"} <= held["event throttle"]

    await setup.kube.delete(NAMESPACES, "team-a")
    await setup.kube.delete(NAMESPACES, "team-c")
    await _caught_up(setup)

    held = _held(setup)
    for structure, namespaces in held.items():
        assert not namespaces & {"team-a", "team-c"}, structure
    # the namespace that stays keeps its state
    assert "team-b" in held["admission caches"]
    assert "team-b" in held["memo"]
    assert "team-b" in held["event throttle"]
