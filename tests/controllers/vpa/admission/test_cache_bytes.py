"""Issue 27, item 14: the admission caches are bounded by bytes, not only by count.

A count bounds nothing when one entry can be a thousand times another: keys and values come
from request bodies. These tests fill each cache with entries from large pods — far fewer than
its count allows — and check that what it holds stays under its byte budget, and (a property)
that the store's accounting is exact and its bounds hold for any sequence of writes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.admission.bounded_lru import BoundedLru
from kubescale.controllers.vpa.admission.decision_cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ENTRIES,
    DecisionCache,
    admit_cached,
)
from kubescale.controllers.vpa.admission.match_cache import (
    DEFAULT_MAX_BYTES as MATCH_MAX_BYTES,
)
from kubescale.controllers.vpa.admission.match_cache import Match, MatchCache
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.answer_cache import MAX_BYTES as ANSWER_MAX_BYTES
from kubescale.webhook.answer_cache import AnswerCache
from kubescale.webhook.webhook_config import WebhookSettings
from tests import builders

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


def test_the_decision_cache_keeps_its_byte_budget_for_large_pods() -> None:
    # Each decision keeps the pod's projection (60 containers × 515 bytes = 30,900 bytes of
    # JSON) and its patch (the vpaObservedContainers annotation names all 60: 32,656 bytes of
    # base64), counted 1,024 + 30,900 + 2 × 32,656 = 97,236 bytes. 400 of them are far under
    # the count bound (4,096) but 400 × 63,556 = 25.4 MB of text alone; the budget
    # (8 MiB = 8,388,608 bytes) keeps 8,388,608 // 97,236 = 86.
    cache = DecisionCache()
    asked = 400
    for index in range(asked):
        admit_cached(
            cache,
            pod=_big_pod(index),
            namespace="default",
            vpa=builders.vpas.vpa(
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
    held_text = sum(len(key[0]) for key in cache._entries if isinstance(key, tuple))
    held_patches = sum(len(value.encoded_patch) for value, _, _ in cache._entries.values())
    assert held_text + held_patches <= DEFAULT_MAX_BYTES
    assert len(cache) == DEFAULT_MAX_BYTES // 97_236 == 86
    assert cache.bytes <= DEFAULT_MAX_BYTES


def test_the_match_cache_keeps_its_byte_budget_for_large_label_sets() -> None:
    # 64 KiB of labels per pod (a pod may have 256 KiB): 100 matches are 6.4 MB of keys;
    # the budget is 4 MiB.
    cache = MatchCache()
    for index in range(100):
        labels = tuple((f"label-{index}-{n}", "v" * 1000) for n in range(64))
        cache.put(("ref", labels), controller=None, vpa=None, reads=(), vpas=())
    held = sum(len(repr(key)) for key in cache._entries)
    assert held <= MATCH_MAX_BYTES
    assert cache.bytes <= MATCH_MAX_BYTES


def test_the_answer_cache_keeps_its_byte_budget_for_large_bodies() -> None:
    # Distinct bodies just under the 32 KiB limit (31,857 bytes for uid "u-599"): 600 of them,
    # under the count bound (1,024), are 19.1 MB. An entry counts its key (the body without
    # the 5-character uid: 31,852), the answer around the uid with its quotes (19 + 4) and
    # 512: 32,387 bytes; the budget (8 MiB = 8,388,608) keeps 8,388,608 // 32,387 = 259.
    cache = AnswerCache()
    match = Match(controller=None, vpa=None, reads=(), vpas=())
    for index in range(600):
        filler = f"{index:05d}" + "x" * (31 * 1024)  # the key is the body but the uid
        body = (
            b'{"request":{"uid":"u-' + str(index).encode() + b'","filler":"'
            + filler.encode() + b'","resource":{"group":"","version":"v1","resource":"pods"},'
            b'"object":{}}}'
        )  # fmt: skip
        cache.remember(
            body,
            uid=f"u-{index}",
            answer=(b'{"response":{"uid":', b"}}"),
            patches=(),
            match=(("k", index), match),
            namespace="default",
        )
    held = sum(len(key) for key in cache._entries if isinstance(key, bytes))
    assert held <= ANSWER_MAX_BYTES
    assert len(cache) == ANSWER_MAX_BYTES // 32_387 == 259


WRITES = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 400)),  # (key, cost)
    max_size=200,
)


@given(writes=WRITES, max_entries=st.integers(0, 10), max_bytes=st.integers(0, 1000))
def test_the_store_never_holds_more_than_its_bounds(
    writes: list[tuple[int, int]], max_entries: int, max_bytes: int
) -> None:
    store: BoundedLru[int] = BoundedLru(
        max_entries=max_entries, max_age=1e9, max_bytes=max_bytes, now=lambda: 0.0
    )
    for key, cost in writes:
        kept = store._store(key, cost, cost)
        assert kept == (max_entries > 0 and cost <= max_bytes)
        if kept:  # the newest write is the last to go
            assert store._get(key) == cost
        else:
            assert store._get(key) is None  # an older value under the key is gone too
        assert len(store) <= max_entries
        assert store.bytes == sum(cost for _, _, cost in store._entries.values())
        assert store.bytes <= max_bytes


def test_the_pod_answer_templates_keep_their_byte_budget() -> None:
    # A template is kept per distinct patch; 200 patches of 64 KiB are 12.8 MB (the count
    # bound is 4,096). The templates are kept under 4 MiB: each counts its patch twice (the
    # key, and inside the template) plus the review around it.
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    for index in range(200):
        patch = f"{index:05d}" + "A" * (64 * 1024)
        _, tail = webhook._pod_template(patch)
        assert patch.encode() in tail  # the template made for it is the one returned
    held = sum(len(patch) + len(h) + len(t) for patch, (h, t) in webhook._pod_bodies.items())
    assert held <= 4 * 1024 * 1024
    assert 0 < len(webhook._pod_bodies) < 200
