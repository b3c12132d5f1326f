"""The admission memo's invalidation rules, behind the real route over the real informers of the
in-process API server, with the memo's event handlers *detached*: only versions can invalidate
(the handlers release memory; an answer must not depend on them having run).

The table: after one edit of the cluster, is the next pod of the ReplicaSet (the same body but
its uid) answered from the memo (a hit) or decided anew (a miss)? Either way the answer is byte
for byte the route's without a memo over the same informers. Then a property: for random
sequences of edits, every answer is the route's without a memo.

The cluster is ``test_admission_routes``' (Deployment ``web`` → ReplicaSet ``web-rs``, VPA
``web-vpa`` on the Deployment, target cpu 250m / memory 200Mi; the pod asks 100m / 100Mi with
limits 200m / 200Mi), served with ``--avoid-hpa-conflict`` so that HPAs are inputs too.

Against deliberately broken memos (not committed): leaving the LimitRanges' versions out of the
inputs (:func:`~kubescale.controllers.vpa.admission.admission_memo.decision_inputs`) fails the
LimitRange row, the LimitRange test and the property (and ``test_decision_cache``'s properties
and three of its rows); serving an answer without checking its match
(:meth:`CachedPodAdmission.current` skipping ``match_unchanged``) fails the VPA, second-VPA,
ownership and selector rows and the property.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.admission import cached_pod_admission
from kubescale.controllers.vpa.admission.admission_memo import AdmissionMemo, Answered, Match
from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.vpa_matching import target_ref_of
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import (
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    LIMIT_RANGES,
    NAMESPACES,
    REPLICA_SETS,
    VERTICAL_POD_AUTOSCALERS,
    ResourceType,
)
from kubescale.objects.admission_review import AdmissionReview
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings
from tests import builders
from tests.builders import vpas
from tests.builders.admission import admission_review
from tests.builders.limit_ranges import limit_range, limit_range_item
from tests.controllers.vpa.admission.test_decision_cache_informers import (
    _caught_up,
    _patch,
    _requests,
)
from tests.webhook.test_admission_routes import Setup, _recommendation, _setup, web_pod

SETTINGS = WebhookSettings(avoid_hpa_conflict=True)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, SETTINGS):
        yield value


def _without_memo(setup: Setup) -> AdmissionWebhook:
    webhook = AdmissionWebhook(settings=SETTINGS, registry=CollectorRegistry(), caches=setup.caches)
    webhook.memo.max_entries = 0
    return webhook


def _detach_handlers(setup: Setup) -> None:
    """Only versions invalidate from here on (the route's decider registered the memo)."""
    listeners = setup.caches._listeners
    while setup.webhook.memo in listeners:
        listeners.remove(setup.webhook.memo)


async def _answer(
    setup: Setup, reference: AdmissionWebhook, uid: str, pod: dict[str, Any] | None = None
) -> AdmissionReview:
    """The route's answer, after checking its bytes against ``reference``'s (the route without
    a memo over the same informers)."""
    body = json.dumps(
        admission_review(
            uid=uid,
            namespace="default",
            request={"object": pod if pod is not None else web_pod(), "oldObject": None},
        )
    ).encode()
    answer = await setup.webhook.admit(body, content_type="application/json")
    expected = await reference.admit(body, content_type="application/json")
    assert answer.body == expected.body
    return answer.review


# -- the edits ------------------------------------------------------------------------------


async def _upsert(setup: Setup, resource: ResourceType, obj: dict[str, Any]) -> None:
    """Create ``obj``, or merge it into the object of that name."""
    metadata = obj["metadata"]
    try:
        await setup.kube.create(resource, obj)
    except KubeApiError as error:
        if error.code != 409:
            raise
        await setup.kube.patch(resource, metadata["name"], obj, namespace=metadata.get("namespace"))


async def _delete(setup: Setup, resource: ResourceType, name: str, namespace: str) -> None:
    try:
        await setup.kube.delete(resource, name, namespace=namespace)
    except KubeApiError as error:
        if error.code != 404:
            raise


async def _put_hpa(setup: Setup, target: str, resource: str) -> None:
    scaler = builders.hpas.hpa(
        name=f"{target}-hpa",
        target=builders.hpas.scale_target_ref(name=target),
        min_replicas=1,
        max_replicas=5,
        metrics=[builders.hpas.resource_metric(resource, utilization=60)],
    )
    await _upsert(setup, HORIZONTAL_POD_AUTOSCALERS, scaler)


async def _recommend(setup: Setup, cpu: str) -> None:
    await setup.kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa",
        {"status": {"recommendation": _recommendation({"cpu": cpu, "memory": "200Mi"})}},
        namespace="default",
        subresource="status",
    )


async def _update_mode(setup: Setup, mode: str) -> None:
    await setup.kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa",
        {"spec": {"updatePolicy": {"updateMode": mode}}},
        namespace="default",
    )


async def _rs_owned(setup: Setup, owned: bool) -> None:
    owners = None
    if owned:
        deployment = await setup.kube.get(DEPLOYMENTS, "web", namespace="default")
        owners = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "web",
                "uid": deployment["metadata"]["uid"],
                "controller": True,
            }
        ]
    await setup.kube.patch(
        REPLICA_SETS, "web-rs", {"metadata": {"ownerReferences": owners}}, namespace="default"
    )


async def _rs_status(setup: Setup, replicas: int) -> None:
    await setup.kube.patch(
        REPLICA_SETS,
        "web-rs",
        {"metadata": {"labels": {"app": "web", "seen": str(replicas)}}, "status": {"replicas": 7}},
        namespace="default",
    )


async def _selector(setup: Setup, app: str) -> None:
    await setup.kube.patch(
        DEPLOYMENTS,
        "web",
        {"spec": {"selector": {"matchLabels": {"app": app}}}},
        namespace="default",
    )


async def _second_vpa(setup: Setup, present: bool) -> None:
    if present:
        vpa = vpas.vpa(
            name="web-vpa-2",
            target=vpas.target_ref(kind="Deployment", name="web", api_version="apps/v1"),
            update_mode="Recreate",
            status={"recommendation": _recommendation({"cpu": "1"})},
        )
        await _upsert(setup, VERTICAL_POD_AUTOSCALERS, vpa)
    else:
        await _delete(setup, VERTICAL_POD_AUTOSCALERS, "web-vpa-2", "default")


async def _other_namespace(setup: Setup) -> None:
    await _upsert(
        setup, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}
    )


Edit = Callable[[Setup], Awaitable[None]]

ROWS: list[tuple[str, Edit, bool]] = [
    # (what changed, the edit, the next pod is answered from the memo)
    ("the VPA's recommendation", lambda s: _recommend(s, "300m"), False),
    ("the VPA's updateMode", lambda s: _update_mode(s, "Off"), False),
    ("a LimitRange created", lambda s: _upsert(
        s,
        LIMIT_RANGES,
        limit_range(items=[limit_range_item(maximum={"cpu": "1", "memory": "1Gi"})]),
    ), False),
    ("a second VPA on the Deployment", lambda s: _second_vpa(s, True), False),
    ("the ReplicaSet orphaned", lambda s: _rs_owned(s, False), False),
    ("the Deployment's selector", lambda s: _selector(s, "other"), False),
    ("an HPA on the Deployment", lambda s: _put_hpa(s, "web", "memory"), False),
    # nothing the answer reads: a hit
    ("the ReplicaSet's status and labels", lambda s: _rs_status(s, 7), True),
    ("an HPA on another Deployment", lambda s: _put_hpa(s, "other", "cpu"), True),
    ("nothing (the same question again)", _caught_up, True),
]  # fmt: skip


@pytest.mark.parametrize(("_what", "edit", "hit"), ROWS, ids=[row[0] for row in ROWS])
async def test_which_change_makes_the_next_answer_anew(
    setup: Setup, _what: str, edit: Edit, hit: bool
) -> None:
    memo, reference = setup.webhook.memo, _without_memo(setup)
    await _answer(setup, reference, "req-1")
    await _answer(setup, reference, "req-2")
    assert memo.answer_hits == 1  # the next pod of the ReplicaSet is a lookup
    _detach_handlers(setup)
    await edit(setup)
    await _caught_up(setup)
    hits = memo.answer_hits
    await _answer(setup, reference, "req-3")
    assert (memo.answer_hits == hits + 1) is hit


async def test_an_answered_pod_does_not_parse_the_vpa_target_again(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --avoid-hpa-conflict the HPAs on the VPA's target are re-read for every answered
    pod; the target itself comes with the answer (the VPA is the informers' same object while
    the match holds), so a hit parses no VPA spec: the cost the memo had added per request
    over the old answer cache (issue 28.4's throughput)."""
    parsed: list[object] = []
    real = target_ref_of

    def counting(vpa: VerticalPodAutoscaler) -> ControllerRef | None:
        parsed.append(vpa)
        return real(vpa)

    monkeypatch.setattr(cached_pod_admission, "target_ref_of", counting)
    memo, reference = setup.webhook.memo, _without_memo(setup)
    await _answer(setup, reference, "req-1")
    decided = len(parsed)
    assert decided >= 1  # the decision read the target (the route's and the reference's)
    hits = memo.answer_hits
    await _answer(setup, reference, "req-2")
    assert memo.answer_hits == hits + 1
    # only the reference (no memo) decided anew, reading the target once
    assert len(parsed) == decided + 1
    # an HPA put on the target is still seen: the next answer is decided anew
    _detach_handlers(setup)
    await _put_hpa(setup, "web", "memory")
    await _caught_up(setup)
    await _answer(setup, reference, "req-3")
    assert memo.answer_hits == hits + 1


async def test_a_limit_range_edited_or_deleted_is_seen_without_the_handlers(setup: Setup) -> None:
    memo, reference = setup.webhook.memo, _without_memo(setup)
    await _upsert(
        setup,
        LIMIT_RANGES,
        limit_range(items=[limit_range_item(maximum={"cpu": "1", "memory": "1Gi"})]),
    )
    await _caught_up(setup)
    # the first answer is decided, the next a lookup; the max (1) is over the limit the VPA
    # wants (250m × 200m/100m = 500m): the VPA's target stands
    cpu = [_requests(_patch(await _answer(setup, reference, f"req-{i}")))["cpu"] for i in (1, 2)]
    assert cpu == ["250m", "250m"]
    assert memo.answer_hits == 1
    _detach_handlers(setup)
    # edited: the max (200m) is now under the limit the VPA wants (500m): capped to 200m, the
    # request keeps its ratio 250m × 200/500 = 100m
    await _upsert(
        setup,
        LIMIT_RANGES,
        limit_range(items=[limit_range_item(maximum={"cpu": "200m", "memory": "1Gi"})]),
    )
    await _caught_up(setup)
    assert _requests(_patch(await _answer(setup, reference, "req-3")))["cpu"] == "100m"
    assert memo.answer_hits == 1
    # in another namespace: nothing the answer reads
    await _other_namespace(setup)
    await _upsert(
        setup,
        LIMIT_RANGES,
        limit_range(
            namespace="other", items=[limit_range_item(maximum={"cpu": "100m", "memory": "1Gi"})]
        ),
    )
    await _caught_up(setup)
    assert _requests(_patch(await _answer(setup, reference, "req-4")))["cpu"] == "100m"
    assert memo.answer_hits == 2
    # deleted: the VPA's target again
    await _delete(setup, LIMIT_RANGES, "limits", "default")
    await _caught_up(setup)
    assert _requests(_patch(await _answer(setup, reference, "req-5")))["cpu"] == "250m"
    assert memo.answer_hits == 2


# -- the property ---------------------------------------------------------------------------

EDITS: list[Callable[[Setup, int], Awaitable[None]]] = [
    lambda s, n: _recommend(s, f"{200 + 50 * n}m"),
    lambda s, n: _update_mode(s, ("Auto", "Off", "Initial")[n % 3]),
    lambda s, n: _upsert(
        s,
        LIMIT_RANGES,
        limit_range(
            items=[limit_range_item(maximum={"cpu": ("150m", "300m", "2")[n % 3], "memory": "1Gi"})]
        ),
    ),
    lambda s, n: _delete(s, LIMIT_RANGES, "limits", "default"),
    lambda s, n: _second_vpa(s, n % 2 == 0),
    lambda s, n: _rs_owned(s, n % 2 == 0),
    _rs_status,
    lambda s, n: _selector(s, ("web", "other")[n % 2]),
    lambda s, n: _put_hpa(s, "web", ("cpu", "memory")[n % 2]),
    lambda s, n: _delete(s, HORIZONTAL_POD_AUTOSCALERS, "web-hpa", "default"),
]


async def _reset(setup: Setup) -> None:
    """Back to the seeded cluster (the fixture is shared by the property's examples)."""
    await _recommend(setup, "250m")
    await _update_mode(setup, "Auto")
    await _delete(setup, LIMIT_RANGES, "limits", "default")
    await _second_vpa(setup, False)
    await _rs_owned(setup, True)
    await _selector(setup, "web")
    await _delete(setup, HORIZONTAL_POD_AUTOSCALERS, "web-hpa", "default")


def _variant(kind: int) -> dict[str, Any]:
    pod = web_pod()
    if kind == 1:  # other resources: the same VPA, another decision
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    elif kind == 2:  # another pod of the ReplicaSet (a name): another question, same inputs
        pod["metadata"]["name"] = "web-rs-x"
    return pod


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(st.integers(0, len(EDITS) - 1), st.integers(0, 5)), min_size=1, max_size=6
    )
)
async def test_any_sequence_of_edits_gets_the_answers_of_the_route_without_a_memo(
    setup: Setup, steps: list[tuple[int, int]]
) -> None:
    reference = _without_memo(setup)
    await _reset(setup)  # every example starts from the seeded cluster
    await _caught_up(setup)
    for kind in range(3):
        await _answer(setup, reference, f"warm-{kind}", _variant(kind))
    _detach_handlers(setup)
    for index, (edit, argument) in enumerate(steps):
        await EDITS[edit](setup, argument)
        await _caught_up(setup)
        for kind in range(3):
            for ask in range(2):  # the second is a lookup when nothing made it stale
                await _answer(setup, reference, f"req-{index}-{kind}-{ask}", _variant(kind))


# -- an answer rides on its decision ----------------------------------------------------------


def _memo_with_answers(max_entries: int) -> tuple[AdmissionMemo, dict[str, Answered]]:
    """Decisions ``a`` and ``b`` (VPAs ``va``, ``vb``), each with an answer ``qa`` / ``qb``."""
    memo = AdmissionMemo(max_entries=max_entries)
    answers = {}
    for name in ("a", "b"):
        inputs = (name.encode(), "default")
        memo.remember_decision(inputs, memo.no_patch, vpa_uid=f"v{name}", namespace="default")
        vpa: VerticalPodAutoscaler = {"metadata": {"uid": f"v{name}"}}
        match = Match(controller=None, vpa=vpa, reads=(), vpas=())
        answers[name] = Answered(decided=memo.no_patch, inputs=inputs, match=match)
        memo.remember_answer(f"q{name}".encode(), answers[name], namespace="default")
    return memo, answers


def test_an_answer_goes_with_its_decision() -> None:
    memo, answers = _memo_with_answers(max_entries=4)
    assert (len(memo), memo.answers()) == (4, 2)

    # the least recently used decision goes, and its answer with it; an answer's hit keeps its
    # decision: order a, qa, b, qb → qa asked: b, qb, qa, a → c stored: b (and qb) go
    assert memo.answer(b"qa", lambda _: True) is answers["a"]
    memo.remember_decision((b"c", "default"), memo.no_patch, vpa_uid="vc", namespace="default")
    assert memo.answer(b"qb", lambda _: True) is None
    assert memo.answer(b"qa", lambda _: True) is answers["a"]
    assert (len(memo), memo.answers()) == (3, 1)

    # a decision dropped by a handler drops its answers (counted as dropped)
    memo.forget_vpa("va")
    assert memo.answer(b"qa", lambda _: True) is None
    assert (memo.dropped, memo.answers_dropped) == (1, 1)

    # an answer whose decision is not kept is not kept either
    memo.remember_answer(b"qb", answers["b"], namespace="default")
    assert memo.answers() == 0
