"""RequestCache (issue 29): equal answers shared, released with their pods, same answers."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubescale.objects.pod import Pod
from kubescale.objects.views import meta
from kubescale.scheduling.pod_resources import NON_MISSING_DEFAULTS, RequestCache, pod_requests
from tests.builders.meta import stored_as
from tests.builders.pods import container, pod


def test_pods_asking_for_the_same_share_one_answer() -> None:
    cache = RequestCache()
    answers = [
        cache.requests(
            stored_as(
                pod(
                    name=f"web-{i}",
                    containers=[container(requests={"cpu": "250m", "memory": "64Mi"})],
                ),
                Pod,
            )
        )
        for i in range(100)
    ]
    # 250m -> 250 millicores, 64Mi -> 64 * 2**20 bytes: one answer for the 100 pods
    assert answers[0] == {"cpu": 250, "memory": 64 * 2**20}
    assert all(answer is answers[0] for answer in answers)
    assert cache.shared_answers() == 1


def test_shared_answers_go_with_the_last_pod_that_had_them() -> None:
    cache = RequestCache()
    steady = stored_as(pod(name="steady", containers=[container(requests={"cpu": "1"})]), Pod)
    cache.requests(steady)
    baseline = cache.shared_answers()
    for cycle in range(20):  # pods created with their own requests, then gone
        cache.requests(
            stored_as(
                pod(name=f"gone-{cycle}", containers=[container(requests={"cpu": f"{cycle + 2}"})]),
                Pod,
            )
        )
    assert cache.shared_answers() == baseline + 20
    cache.forget_missing([("default", "steady")])
    assert len(cache) == 1
    assert cache.shared_answers() == baseline
    assert cache.requests(steady) == {"cpu": 1000}


def test_the_table_of_shared_answers_is_bounded() -> None:
    cache = RequestCache()
    limit = RequestCache.SHARED_ANSWERS_MAX
    for index in range(limit + 10):
        cache.requests(
            stored_as(
                pod(name=f"p-{index}", containers=[container(requests={"cpu": f"{index + 1}m"})]),
                Pod,
            )
        )
    assert cache.shared_answers() <= limit
    assert len(cache) == limit + 10


# "1" CPU and "1k" of memory are both 1000, "0" and "bogus" both 0: answers of different
# resources with equal amounts, which must stay apart
_quantity = st.sampled_from(["1", "1k", "0", "bogus", "250m"])
_resources = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _quantity)
_init: st.SearchStrategy[list[tuple[dict[str, str], dict[str, Any]]]] = st.lists(
    st.tuples(_resources, st.sampled_from([{}, {"restartPolicy": "Always"}])), max_size=2
)


@st.composite
def _pods(draw: st.DrawFn) -> Pod:
    init = draw(st.one_of(st.just([]), _init))
    overhead = draw(st.one_of(st.none(), _resources))
    return stored_as(
        pod(
            name=f"p{draw(st.integers(min_value=0, max_value=5))}",
            containers=[container(requests=draw(_resources))],
            init_containers=[container(f"i{n}", requests=r, **f) for n, (r, f) in enumerate(init)],
            spec={"overhead": overhead} if overhead is not None else None,
        ),
        Pod,
    )


@given(
    pods=st.lists(_pods(), max_size=30),
    keep=st.sets(st.integers(min_value=0, max_value=5)),
    non_zero=st.booleans(),
)
def test_cached_answers_are_pod_requests(pods: list[Pod], keep: set[int], non_zero: bool) -> None:
    """Any pods (replacing each other by name), any forgetting: the cache answers exactly what
    ``pod_requests`` answers, in the same order of resources."""
    non_missing = NON_MISSING_DEFAULTS if non_zero else None
    cache = RequestCache(non_missing=non_missing)
    latest: dict[str, Pod] = {}
    for each in pods:
        latest[meta(each).name] = each
        answer = cache.requests(each)
        expected = pod_requests(each, non_missing=non_missing)
        assert list(answer.items()) == list(expected.items())
    cache.forget_missing(("default", f"p{index}") for index in keep)
    for name, each in latest.items():
        if int(name[1:]) in keep:
            expected = pod_requests(each, non_missing=non_missing)
            assert list(cache.requests(each).items()) == list(expected.items())
