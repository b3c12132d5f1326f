"""The memo's decisions behind the real route, fed by the real informers of the in-process API
server: a change written through the client is seen by the very next request, and admissions
racing VPA writes answer what the uncached path answers at the same moment.

The cluster is ``test_admission_routes``' (Deployment ``web`` → ReplicaSet ``web-rs``, VPA
``web-vpa`` on the Deployment, target cpu 250m / memory 200Mi; the pod asks 100m / 100Mi with
limits 200m / 200Mi).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.controllers.vpa.admission.admission_memo import AdmissionMemo
from kubescale.controllers.vpa.admission.cached_pod_admission import (
    AdmissionOptions,
    CachedPodAdmission,
)
from kubescale.kube.resources import LIMIT_RANGES, VERTICAL_POD_AUTOSCALERS
from kubescale.objects.admission_review import AdmissionReview
from kubescale.webhook.webhook_config import WebhookSettings
from tests.builders.admission import admission_review
from tests.webhook.test_admission_routes import Setup, _recommendation, _setup, web_pod


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings()):
        yield value


def _patch(answer: AdmissionReview) -> list[dict[str, Any]]:
    encoded = answer["response"].get("patch")
    return json.loads(base64.b64decode(encoded)) if encoded else []


def _requests(patch: list[dict[str, Any]]) -> dict[str, str]:
    """The container's requests the patch sets (``{}`` when it sets none)."""
    for op in patch:
        if op["path"] == "/spec/containers/0/resources/requests":
            return dict(op["value"])
    return {
        op["path"].rsplit("/", 1)[1]: op["value"]
        for op in patch
        if op["path"].startswith("/spec/containers/0/resources/requests/")
    }


def _uncached(setup: Setup) -> CachedPodAdmission:
    """The same decision without the cache, over the same informers."""
    assert setup.caches is not None
    return CachedPodAdmission(
        caches=setup.caches,
        settings=AdmissionOptions(),
        memo=AdmissionMemo(max_entries=0),
    )


async def _ask(setup: Setup, index: int) -> list[dict[str, Any]]:
    pod = web_pod()
    pod["metadata"]["name"] = f"web-rs-{index}"  # the next pod of the ReplicaSet
    body = json.dumps(
        admission_review(
            uid=f"req-{index}", namespace="default", request={"object": pod, "oldObject": None}
        )
    ).encode()
    return _patch(await setup.post(body))


async def _caught_up(setup: Setup) -> None:
    """Wait until every informer holds what the API server stored (their handlers have run:
    a bookmark at the store's version follows the events), then return at once — the caller's
    next request is the first one after the change."""
    setup.api.bookmark_watches()
    version = str(setup.api.store.resource_version)
    assert await setup.informers.wait_for_resource_version(version, within=10.0)


async def test_a_vpa_change_is_seen_by_the_very_next_request(setup: Setup) -> None:
    decisions = setup.webhook.memo
    first = await _ask(setup, 1)
    assert _requests(first) == {"cpu": "250m", "memory": "200Mi"}
    assert await _ask(setup, 2) == first
    assert (decisions.misses, decisions.hits) == (1, 1)  # the second pod was a lookup

    await setup.kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa",
        {"status": {"recommendation": _recommendation({"cpu": "300m", "memory": "256Mi"})}},
        namespace="default",
        subresource="status",
    )
    await _caught_up(setup)
    after = await _ask(setup, 3)
    assert _requests(after) == {"cpu": "300m", "memory": "256Mi"}
    assert (decisions.misses, decisions.hits) == (2, 1)
    assert decisions.dropped == 1  # the informer's handler dropped the old entry too

    # a spec change (updateMode Off: upstream leaves the pod alone) is a new resourceVersion
    await setup.kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa",
        {"spec": {"updatePolicy": {"updateMode": "Off"}}},
        namespace="default",
    )
    await _caught_up(setup)
    assert await _ask(setup, 4) == []


async def test_a_limit_range_change_is_seen_by_the_very_next_request(setup: Setup) -> None:
    decisions = setup.webhook.memo
    assert _requests(await _ask(setup, 1)) == {"cpu": "250m", "memory": "200Mi"}

    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": "default"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}}]},
    }
    await setup.kube.create(LIMIT_RANGES, limit_range)
    await _caught_up(setup)
    # the cpu limit 500m and memory limit 400Mi stay below the max: the answer is the same,
    # but it is computed anew (the key holds the LimitRanges' versions)
    assert _requests(await _ask(setup, 2)) == {"cpu": "250m", "memory": "200Mi"}
    assert decisions.misses == 2

    # the max drops below the limit the VPA wants (500m): LimitRange wins — the limit is
    # capped to 200m and the request keeps its ratio: 250m × 200/500 = 100m
    await setup.kube.patch(
        LIMIT_RANGES,
        "limits",
        {"spec": {"limits": [{"type": "Container", "max": {"cpu": "200m", "memory": "1Gi"}}]}},
        namespace="default",
    )
    await _caught_up(setup)
    assert _requests(await _ask(setup, 3))["cpu"] == "100m"

    await setup.kube.delete(LIMIT_RANGES, "limits", namespace="default")
    await _caught_up(setup)
    assert _requests(await _ask(setup, 4)) == {"cpu": "250m", "memory": "200Mi"}


async def test_admissions_racing_vpa_writes_answer_what_the_uncached_path_answers(
    setup: Setup,
) -> None:
    """Admissions run while VPA writes land in the informer; each answer equals the uncached
    decision over the same informer state (the route decides without suspending when the
    controller is cached, so nothing can change between the answer and the reference)."""
    uncached = _uncached(setup)
    webhook = setup.webhook
    pod = web_pod()
    body = json.dumps(
        admission_review(
            uid="req-1", namespace="default", request={"object": pod, "oldObject": None}
        )
    ).encode()
    targets = [{"cpu": f"{200 + 10 * i}m", "memory": f"{200 + i}Mi"} for i in range(15)]
    seen: set[str] = set()
    writes_done = asyncio.Event()

    async def write() -> None:
        for target in targets:
            await setup.kube.patch(
                VERTICAL_POD_AUTOSCALERS,
                "web-vpa",
                {"status": {"recommendation": _recommendation(target)}},
                namespace="default",
                subresource="status",
            )
            await asyncio.sleep(0.002)
        writes_done.set()

    async def admit() -> int:
        count = 0
        while not writes_done.is_set() or count < 5:
            answer = await webhook.admit(body, content_type="application/json")
            reference = uncached.decide(json.loads(body)["request"]["object"], may_wait=False)
            assert answer.review["response"].get("patch", "") == reference.encoded_patch
            seen.add(reference.encoded_patch)
            count += 1
            await asyncio.sleep(0)
        return count

    writer = asyncio.create_task(write())
    counts = await asyncio.gather(*(admit() for _ in range(4)))
    await writer
    assert sum(counts) > len(targets)
    assert len(seen) >= 3, "the admissions saw several VPA versions"
    # the repeated body is answered from the memo by its question, else by its inputs
    assert webhook.memo.answer_hits + webhook.memo.hits > 0
    # once the informer holds the last write, the answer is the last target
    await _caught_up(setup)
    assert _requests(await _ask(setup, 99)) == targets[-1]
