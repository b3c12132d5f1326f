"""The memo's answers by question, which keep the match (top-most controller and VPA) they were
made with, behind the real route, over the real informers of the in-process API server: a VPA
created, deleted or retargeted, a ReplicaSet moved to another owner and a Deployment's selector
changed are each seen by the very next request, and after every edit the route answers what the
uncached path answers.

The cluster is ``test_admission_routes``' (Deployment ``web`` → ReplicaSet ``web-rs``, VPA
``web-vpa`` on the Deployment, target cpu 250m / memory 200Mi).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.controllers.vpa.admission.admission_memo import AdmissionMemo
from kubescale.kube.resources import DEPLOYMENTS, REPLICA_SETS, VERTICAL_POD_AUTOSCALERS
from kubescale.objects.pod import Pod
from kubescale.webhook.admission_reviews import split_uid
from kubescale.webhook.webhook_config import WebhookSettings
from tests.builders import vpas
from tests.builders.admission import admission_review
from tests.builders.meta import stored_as
from tests.controllers.vpa.admission.test_decision_cache_informers import (
    _caught_up,
    _patch,
    _requests,
    _uncached,
)
from tests.webhook.test_admission_routes import Setup, _recommendation, _setup, web_pod


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings()):
        yield value


async def _ask(setup: Setup, index: int, pod: dict[str, Any] | None = None) -> list[Any]:
    """The next pod's patch, after checking the route's bytes against the uncached path."""
    pod = pod if pod is not None else web_pod()
    body = json.dumps(
        admission_review(
            uid=f"req-{index}", namespace="default", request={"object": pod, "oldObject": None}
        )
    ).encode()
    answer = await setup.webhook.admit(body, content_type="application/json")
    reference = _uncached(setup).decide(stored_as(pod, Pod), may_wait=False)  # the body's pod
    assert answer.review["response"].get("patch", "") == reference.encoded_patch
    return _patch(await setup.post(body))


def _memo(setup: Setup) -> AdmissionMemo:
    return setup.webhook.memo


async def test_a_vpa_created_deleted_or_retargeted_is_seen_by_the_very_next_request(
    setup: Setup,
) -> None:
    assert _requests(await _ask(setup, 1)) == {"cpu": "250m", "memory": "200Mi"}
    assert _requests(await _ask(setup, 2)) == {"cpu": "250m", "memory": "200Mi"}
    assert _memo(setup).answer_hits >= 1  # the second pod's answer (and match) was a lookup

    # a second VPA on the same Deployment: upstream picks the older one (web-vpa) — the
    # answer stays, but the match is made again because the VPA index changed
    misses = _memo(setup).answer_misses
    await setup.kube.create(
        VERTICAL_POD_AUTOSCALERS,
        vpas.vpa(
            name="web-vpa-2",
            target=vpas.target_ref(kind="Deployment", name="web", api_version="apps/v1"),
            update_mode="Recreate",
            status={"recommendation": _recommendation({"cpu": "1", "memory": "1Gi"})},
        ),
    )
    await _caught_up(setup)
    assert _requests(await _ask(setup, 3)) == {"cpu": "250m", "memory": "200Mi"}
    assert _memo(setup).answer_misses > misses

    # the older one goes: the next pod gets the other VPA's target at once
    await setup.kube.delete(VERTICAL_POD_AUTOSCALERS, "web-vpa", namespace="default")
    await _caught_up(setup)
    assert _requests(await _ask(setup, 4)) == {}  # web-vpa-2 has no recommendation yet
    await setup.kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa-2",
        {"status": {"recommendation": _recommendation({"cpu": "1", "memory": "1Gi"})}},
        namespace="default",
        subresource="status",
    )
    await _caught_up(setup)
    assert _requests(await _ask(setup, 5)) == {"cpu": "1", "memory": "1Gi"}

    # retargeted to a Deployment the pod is not under: no VPA for the next pod
    await setup.kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa-2",
        {"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "other"}}},
        namespace="default",
    )
    await _caught_up(setup)
    assert await _ask(setup, 6) == []


async def test_an_owner_change_is_seen_by_the_very_next_request(setup: Setup) -> None:
    assert _requests(await _ask(setup, 1)) == {"cpu": "250m", "memory": "200Mi"}
    assert _requests(await _ask(setup, 2)) == {"cpu": "250m", "memory": "200Mi"}

    # the ReplicaSet is orphaned (its owner reference removed): it is the top-most controller
    # now, and no VPA targets it
    await setup.kube.patch(
        REPLICA_SETS, "web-rs", {"metadata": {"ownerReferences": None}}, namespace="default"
    )
    await _caught_up(setup)
    assert await _ask(setup, 3) == []

    # adopted again by the Deployment: the VPA applies again at once
    deployment = await setup.kube.get(DEPLOYMENTS, "web", namespace="default")
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": deployment["metadata"]["uid"],
        "controller": True,
    }
    await setup.kube.patch(
        REPLICA_SETS, "web-rs", {"metadata": {"ownerReferences": [owner]}}, namespace="default"
    )
    await _caught_up(setup)
    assert _requests(await _ask(setup, 4)) == {"cpu": "250m", "memory": "200Mi"}

    # the Deployment's selector no longer matches the pod's labels: no VPA
    await setup.kube.patch(
        DEPLOYMENTS,
        "web",
        {"spec": {"selector": {"matchLabels": {"app": "other"}}}},
        namespace="default",
    )
    await _caught_up(setup)
    assert await _ask(setup, 5) == []


async def test_labels_are_part_of_the_key(setup: Setup) -> None:
    pod = web_pod()
    assert _requests(await _ask(setup, 1, pod)) == {"cpu": "250m", "memory": "200Mi"}
    other = web_pod()
    other["metadata"]["labels"] = {"app": "not-web"}  # not selected by the Deployment
    questions = [
        split_uid(
            json.dumps(
                admission_review(
                    uid="req", namespace="default", request={"object": p, "oldObject": None}
                )
            ).encode()
        )
        for p in (pod, other)
    ]
    assert questions[0] is not None
    assert questions[1] is not None
    assert questions[0][0] != questions[1][0]
    assert await _ask(setup, 2, other) == []
    assert _requests(await _ask(setup, 3, pod)) == {"cpu": "250m", "memory": "200Mi"}


async def test_a_pod_without_controller_is_not_remembered(setup: Setup) -> None:
    pod = web_pod()
    pod["metadata"]["ownerReferences"] = []
    decider = setup.webhook._pod_decider(setup.caches)
    assert decider.decide(stored_as(pod, Pod), may_wait=False).answered is None


async def test_a_replicasets_status_update_keeps_the_match(setup: Setup) -> None:
    """The ReplicaSet controller rewrites the ReplicaSet's status while it creates a scale-out's
    pods: a new informer object each time, but nothing a match reads changed."""
    assert _requests(await _ask(setup, 1)) == {"cpu": "250m", "memory": "200Mi"}
    before = await setup.kube.get(REPLICA_SETS, "web-rs", namespace="default")
    await setup.kube.patch(
        REPLICA_SETS,
        "web-rs",
        {"metadata": {"labels": {"app": "web", "seen": "yes"}}, "status": {"replicas": 7}},
        namespace="default",
    )
    await _caught_up(setup)
    after = await setup.kube.get(REPLICA_SETS, "web-rs", namespace="default")
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    misses = _memo(setup).answer_misses
    # still a lookup (the whole answer stays in the memo); an identity-only check fails here
    assert _requests(await _ask(setup, 2)) == {"cpu": "250m", "memory": "200Mi"}
    assert _memo(setup).answer_misses == misses
