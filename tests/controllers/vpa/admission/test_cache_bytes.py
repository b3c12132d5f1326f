"""Issue 27, item 14: the admission memo is bounded by bytes, not only by count.

A count bounds nothing when one entry can be a thousand times another: keys and values come
from request bodies. These tests fill the memo with decisions of large pods and with answers to
large questions — far fewer than its count allows — and check that what it holds stays under
its byte budget, and (a property) that the store's accounting is exact and its bounds hold for
any sequence of writes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.admission.admission_memo import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ENTRIES,
    AdmissionMemo,
    Answered,
    Match,
    admit_cached,
)
from kubescale.objects.pod import Pod
from kubescale.webhook.admission_reviews import pod_answer_template
from tests import builders
from tests.builders.meta import stored_as

CONTAINERS = 60


def _big_pod(index: int) -> dict[str, Any]:
    """A pod of 60 containers with 404-character names, each with requests and limits:
    distinct per ``index``."""
    containers = [
        {
            "name": f"{c:03d}-" + "n" * 400,
            "resources": {
                "requests": {"cpu": f"{index + 1}m", "memory": "100Mi"},
                "limits": {"cpu": f"{2 * index + 2}m", "memory": "200Mi"},
            },
        }
        for c in range(CONTAINERS)
    ]
    return {"metadata": {"namespace": "default"}, "spec": {"containers": containers}}


def test_the_memo_keeps_its_byte_budget_for_large_pods() -> None:
    # Each decision keeps the pod's projection (60 containers × 515 bytes = 30,900 bytes of
    # JSON), its patch (the vpaObservedContainers annotation names all 60: 32,656 bytes of
    # base64) and the answer's bytes around the uid (the review without its uid's "": 131 bytes
    # and the patch = 32,787), counted 1,024 + 30,900 + 2 × 32,656 + 32,787 = 130,023 bytes.
    # 400 of them are far under the count bound (8,192) but 400 × 96,343 = 38.5 MB of text
    # alone; the budget (24 MiB = 25,165,824 bytes) keeps 25,165,824 // 130,023 = 193.
    memo = AdmissionMemo(answer_template=pod_answer_template)
    asked = 400
    for index in range(asked):
        admit_cached(
            memo,
            pod=stored_as(_big_pod(index), Pod),
            namespace="default",
            vpa=builders.vpas.typed_vpa(
                name="v",
                uid="u",
                resource_version="1",
                target=builders.vpas.target_ref(api_version=None),
                recommendations=[
                    builders.vpas.container_recommendation(
                        "*", target={"cpu": "1", "memory": "1Gi"}
                    )
                ],
                api_version=None,
            ),
            limit_ranges=[],
            hpas=[],
            avoid_hpa_conflict=False,
            largest_node_allocatable=None,
            cap_to_largest_node=False,
        )
    assert asked < DEFAULT_MAX_ENTRIES
    held_text = sum(len(key[0]) for key in memo._entries if isinstance(key, tuple))
    held_answers = sum(
        len(value.encoded_patch) + len(value.head) + len(value.tail)
        for value, _, _ in memo._entries.values()
        if not isinstance(value, Answered)
    )
    assert held_text + held_answers <= DEFAULT_MAX_BYTES
    assert len(memo) == DEFAULT_MAX_BYTES // 130_023 == 193
    assert memo.bytes <= DEFAULT_MAX_BYTES


def test_the_memo_keeps_its_byte_budget_for_large_questions() -> None:
    # Distinct bodies just under the 32 KiB limit (31,857 bytes with a 5-character uid): 1,000 of
    # them, under the count bound (8,192), are 31.9 MB. An answer counts its question (the body
    # without the 5-character uid: 31,852) and 1,024 (its decision's bytes are counted with the
    # decision; no VPA here): 32,876 bytes; the budget (24 MiB = 25,165,824) keeps
    # 25,165,824 // 32,876 = 765.
    memo = AdmissionMemo()
    answered = Answered(
        decided=memo.no_patch,
        inputs=None,
        match=Match(controller=None, vpa=None, reads=(), vpas=()),
    )
    for index in range(1000):
        filler = f"{index:05d}" + "x" * (31 * 1024)
        question = (
            b'{"request":{"uid":"","filler":"'
            + filler.encode() + b'","resource":{"group":"","version":"v1","resource":"pods"},'
            b'"object":{}}}'
        )  # fmt: skip
        memo.remember_answer(question, answered, namespace="default")
    held = sum(len(key) for key in memo._entries if isinstance(key, bytes))
    assert held <= DEFAULT_MAX_BYTES
    assert len(memo) == memo.answers() == DEFAULT_MAX_BYTES // 32_876 == 765


WRITES = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 400)),  # (key, cost)
    max_size=200,
)


@given(writes=WRITES, max_entries=st.integers(0, 10), max_bytes=st.integers(0, 1000))
def test_the_store_never_holds_more_than_its_bounds(
    writes: list[tuple[int, int]], max_entries: int, max_bytes: int
) -> None:
    memo = AdmissionMemo(max_entries=max_entries, max_age=1e9, max_bytes=max_bytes, now=lambda: 0.0)
    for key, cost in writes:
        kept = memo._store(key, memo.no_patch, cost, vpa_uid="", namespace="")
        assert kept == (max_entries > 0 and cost <= max_bytes)
        if kept:  # the newest write is the last to go
            assert memo._entries[key][2] == cost
        else:
            assert memo._get(key) is None  # an older value under the key is gone too
        assert len(memo) <= max_entries
        assert memo.bytes == sum(cost for _, _, cost in memo._entries.values())
        assert memo.bytes <= max_bytes
