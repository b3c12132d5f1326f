"""The model keeps its pods' containers by aggregate key (issue 29).

The checkpoint pass subtracts each live container's memory peak of the window in progress from
its VPA's merged state, in the order of the walk over the pods (upstream's
``subtractCurrentContainerMemoryPeak`` loop; float subtractions do not commute bit for bit).
It built that from a walk over every pod's containers once per pass; the model now keeps the
index as pods come, change labels, gain containers and go. The property: after any sequence of
those, the kept index holds the same containers under the same keys, in the same walk order,
as the from-scratch walk (:meth:`ClusterState.live_containers`) — and no key of a deleted pod.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.aggregate_state import ContainerState
from kubescale.controllers.vpa.model.cluster_state import (
    AggregateKey,
    ClusterState,
    LiveContainers,
)
from kubescale.controllers.vpa.model.model_config import RecommenderConfig

_Op = tuple[str, str, str, str, tuple[str, ...]]
"""(op, namespace, pod, label value, containers): ``add`` (add or update) or ``delete``."""

_ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "delete"]),
        st.sampled_from(["ns", "other"]),
        st.sampled_from(["p0", "p1", "p2", "p3"]),
        st.sampled_from(["a", "b"]),
        st.lists(st.sampled_from(["app", "side", "log"]), unique=True, max_size=3).map(tuple),
    ),
    max_size=25,
)


def _apply(state: ClusterState, ops: Sequence[_Op]) -> None:
    for op, namespace, pod, label, containers in ops:
        if op == "delete":
            state.delete_pod(namespace=namespace, name=pod)
            continue
        state.add_or_update_pod(
            namespace=namespace,
            name=pod,
            labels={"app": label},
            phase="Running",
            containers={name: {"cpu": 100, "memory": 1 << 20} for name in containers},
        )


def _by_key(live: LiveContainers) -> dict[AggregateKey, list[int]]:
    """Each key's containers (by identity) in walk order."""
    return {
        key: [id(container) for _, container in sorted(entries, key=lambda e: e[0])]
        for key, entries in live.items()
    }


def _walk_order(live: LiveContainers) -> list[tuple[AggregateKey, int]]:
    """Every container in walk order across keys (a VPA's containers mix keys)."""
    entries: list[tuple[tuple[int, int], AggregateKey, ContainerState]] = [
        (place, key, container) for key, listed in live.items() for place, container in listed
    ]
    return [(key, id(container)) for _, key, container in sorted(entries, key=lambda e: e[0])]


@given(ops=_ops)
def test_the_kept_index_is_the_walk(ops: list[_Op]) -> None:
    state = ClusterState(config=RecommenderConfig())
    _apply(state, ops)
    kept, walked = state.live_index(), state.live_containers()
    assert _by_key(kept) == _by_key(walked)
    assert _walk_order(kept) == _walk_order(walked)


@pytest.mark.parametrize(
    ("ops", "keys"),
    [
        # one pod, two containers: two keys (namespace, container, "app=a")
        (
            [("add", "ns", "p0", "a", ("app", "side"))],
            [AggregateKey("ns", "app", "app=a"), AggregateKey("ns", "side", "app=a")],
        ),
        # relabelled a -> b: its containers move to the "app=b" keys, nothing stays under a
        (
            [("add", "ns", "p0", "a", ("app",)), ("add", "ns", "p0", "b", ("app",))],
            [AggregateKey("ns", "app", "app=b")],
        ),
        # deleted: no key is left for it
        ([("add", "ns", "p0", "a", ("app",)), ("delete", "ns", "p0", "", ())], []),
    ],
)
def test_the_index_keeps_nothing_of_what_left(ops: list[_Op], keys: list[AggregateKey]) -> None:
    state = ClusterState(config=RecommenderConfig())
    _apply(state, ops)
    assert sorted(state.live_index(), key=repr) == keys
    assert state.containers_walked == 0  # nothing here walked the pods
