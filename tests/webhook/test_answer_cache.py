"""The memo's answers by question (whole pod answers by body but ``request.uid``,
:func:`kubescale.webhook.admission_reviews.split_uid`): which uid it cuts; a hit is byte for
byte what the uncached route answers, for any uid and pod; a look-alike uid field is never cut;
answers with side effects are not remembered; a LimitRange change (which leaves the match alone)
drops the namespace's answers before the next request. That a VPA or owner change is seen by the
very next request, also under concurrent VPA writes, is shown through the memo by
``test_match_cache_informers`` and ``test_decision_cache_informers`` (their repeated bodies are
answers by question).

Against deliberately broken copies (not committed): splicing an escaped or non-ASCII uid as
sent fails the property here; a hit without the match check fails three of those informer
tests; not listening to the admission caches' input changes fails the LimitRange test here and
the concurrent-VPA-writes test there."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.kube.resources import LIMIT_RANGES
from kubescale.webhook.admission_reviews import split_uid
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings
from tests.builders.admission import admission_review
from tests.controllers.vpa.admission.test_decision_cache_informers import (
    _caught_up,
    _patch,
    _requests,
)

from .test_admission_routes import Setup, _setup, web_pod


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings()):
        yield value


def _uncached(setup: Setup) -> AdmissionWebhook:
    """The same route over the same informers with every cache off."""
    webhook = AdmissionWebhook(
        settings=WebhookSettings(), registry=CollectorRegistry(), caches=setup.caches
    )
    webhook.memo.max_entries = 0
    return webhook


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"request":{"uid":"a-1","x":1}}', (b'{"request":{"uid":"","x":1}}', b"a-1")),
        (b'{"request": {"uid" :"a"}}', None),  # not the '"uid":' field as Go writes it
        (b'{"request": {"uid":  \n "a b"}}', (b'{"request": {"uid":  \n ""}}', b"a b")),
        (b'{"request":{"uid":"a\\"b"}}', None),  # an escape: never cut
        (b'{"request":{"uid":"a\\\\"}}', None),
        ('{"request":{"uid":"é"}}'.encode(), None),  # not ASCII
        (b'{"request":{"uid":"a\tb"}}', None),  # a control character
        (b'{"request":{"uid":""}}', None),  # empty
        (b'{"request":{"uid":1}}', None),  # not a string
        (b'{"request":{"uid":"a', None),  # cut short
        (b'{"request":{}}', None),
    ],
)
def test_which_uid_is_cut(body: bytes, expected: tuple[bytes, bytes] | None) -> None:
    assert split_uid(body) == expected


async def test_the_next_pod_of_a_replicaset_is_a_hit_byte_for_byte(setup: Setup) -> None:
    webhook, uncached = setup.webhook, _uncached(setup)
    for index in range(3):
        body = json.dumps(
            admission_review(
                uid=f"req-{index}",
                namespace="default",
                request={"object": web_pod(), "oldObject": None},
            ),
            separators=(",", ":"),
        ).encode()
        answer = await webhook.admit(body, content_type="application/json")
        reference = await uncached.admit(body, content_type="application/json")
        assert answer.body == reference.body
        assert answer.patches == reference.patches
        assert answer.status == reference.status
    assert webhook.memo.answer_hits == 2  # the first was decided, the next two looked up
    assert len(uncached.memo) == 0
    counted = setup.registry.get_sample_value(
        "vpa_admission_controller_admission_pods_total", {"applied": "true"}
    )
    assert counted == 3  # hits are counted as decisions are


async def test_a_look_alike_uid_before_request_uid_is_never_cut(setup: Setup) -> None:
    webhook = setup.webhook
    # the object before request.uid, and in it a label named "uid" whose value is the
    # request's uid: the first '"uid":' field is the label's; the probe finds it is not
    # request.uid, so nothing is remembered
    pod = web_pod()
    pod["metadata"]["labels"] = {"uid": "req-1", "app": "web"}
    review = admission_review(
        uid="req-1", namespace="default", request={"object": pod, "oldObject": None}
    )
    request = review["request"]
    review["request"] = {"object": request.pop("object"), **request}
    body = json.dumps(review, separators=(",", ":")).encode()
    assert split_uid(body) is not None
    assert body.index(b'"uid":"req-1"') < body.index(b'"uid":"req-1"', body.index(b"uid") + 4)
    answer = await webhook.admit(body, content_type="application/json")
    assert answer.review["response"]["uid"] == "req-1"
    assert webhook.memo.answers() == 0


async def test_a_pod_without_a_controller_is_not_remembered(setup: Setup) -> None:
    pod = web_pod()
    del pod["metadata"]["ownerReferences"]
    body = json.dumps(
        admission_review(
            uid="req-1", namespace="default", request={"object": pod, "oldObject": None}
        )
    ).encode()
    await setup.webhook.admit(body, content_type="application/json")
    assert setup.webhook.memo.answers() == 0


_UIDS = st.one_of(
    st.uuids().map(str),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8),
    st.sampled_from(['a"b', "a\\b", "é", "a b", "\t"]),
)


def _variant(kind: int) -> dict[str, Any]:
    pod = web_pod()
    if kind == 1:  # no controller: no VPA, never remembered
        del pod["metadata"]["ownerReferences"]
    elif kind == 2:  # labels are part of the match
        pod["metadata"]["labels"] = {"app": "web", "tier": "x"}
    elif kind == 3:  # other resources: the same VPA, its own decision
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return pod


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    requests=st.lists(st.tuples(st.integers(0, 3), _UIDS, st.booleans()), min_size=1, max_size=8)
)
async def test_any_uid_and_pod_get_the_uncached_routes_bytes(
    setup: Setup, requests: list[tuple[int, str, bool]]
) -> None:
    webhook, uncached = setup.webhook, _uncached(setup)
    for kind, uid, compact in requests:
        review = admission_review(
            uid=uid, namespace="default", request={"object": _variant(kind), "oldObject": None}
        )
        body = json.dumps(review, separators=(",", ":")) if compact else json.dumps(review)
        raw = body.encode()
        answer = await webhook.admit(raw, content_type="application/json")
        reference = await uncached.admit(raw, content_type="application/json")
        assert answer.body == reference.body


async def test_a_limit_range_change_drops_the_namespaces_answers(setup: Setup) -> None:
    """Nothing of the match changes here: the answer's inputs (the LimitRanges' versions)
    do, and the informer's handler releases the answer."""
    webhook = setup.webhook

    async def cpu(uid: str) -> str:
        body = json.dumps(
            admission_review(
                uid=uid, namespace="default", request={"object": web_pod(), "oldObject": None}
            )
        ).encode()
        answer = await webhook.admit(body, content_type="application/json")
        return _requests(_patch(answer.review))["cpu"]

    assert await cpu("req-1") == "250m"
    assert await cpu("req-2") == "250m"
    assert webhook.memo.answer_hits == 1
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": "default"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "200m", "memory": "1Gi"}}]},
    }
    await setup.kube.create(LIMIT_RANGES, limit_range)
    await _caught_up(setup)
    # the limit the VPA wants (500m) is over the max: capped to 200m, the request keeps its
    # ratio: 250m × 200/500 = 100m
    assert await cpu("req-3") == "100m"
    assert webhook.memo.answers_dropped == 1
