"""The informer store: keys, built-in and custom indexes, and lister queries."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.kube.indexes import (
    NAMESPACE_INDEX,
    NODE_INDEX,
    OWNER_INDEX,
    IndexedCache,
    controller_owner_index,
    object_key,
)
from kubescale.kube.listers import Lister
from kubescale.kube.resources import NODES, PODS
from kubescale.objects.selectors import parse_label_selector
from tests import builders

POD = functools.partial(builders.pods.pod, containers=[builders.pods.container("c", image="i")])


def owner(uid: str, *, controller: bool | None = True) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": uid, "uid": uid}
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"name": "a", "namespace": "ns"}}, "ns/a"),
        ({"metadata": {"name": "node-1"}}, "node-1"),
        ({"metadata": {"name": "x", "namespace": ""}}, "x"),
    ],
)
def test_object_key_is_meta_namespace_key(obj: dict[str, Any], key: str) -> None:
    assert object_key(obj) == key


@pytest.mark.parametrize(
    ("owners", "expected"),
    [
        ([owner("rs-1")], ["rs-1"]),
        ([owner("a", controller=False), owner("b")], ["b"]),  # only the controller ref
        ([owner("a", controller=None)], []),  # controller unset is not a controller
        ([owner("a"), owner("b")], ["a"]),  # GetControllerOf: the first one
        ([], []),
    ],
)
def test_owner_index_takes_the_controller_reference(
    owners: list[dict[str, Any]], expected: list[str]
) -> None:
    assert (
        list(
            controller_owner_index(
                POD(
                    name="p",
                    uid="uid-default-p",
                    owner_references=owners,
                    status={"phase": "Running"},
                )
            )
        )
        == expected
    )


def test_lister_queries() -> None:
    cache = IndexedCache()
    cache.upsert(
        POD(
            name="a",
            uid="uid-default-a",
            labels={"app": "web", "tier": "fe"},
            owner_references=[owner("rs-1")],
            node_name="n1",
            status={"phase": "Running"},
        )
    )
    cache.upsert(
        POD(
            name="b",
            uid="uid-default-b",
            labels={"app": "web"},
            owner_references=[owner("rs-1")],
            node_name="n2",
            status={"phase": "Running"},
        )
    )
    cache.upsert(
        POD(
            name="c",
            namespace="other",
            uid="uid-other-c",
            labels={"app": "db"},
            owner_references=[owner("rs-2")],
            node_name="n1",
            status={"phase": "Running"},
        )
    )
    cache.upsert(POD(name="d", namespace="other", uid="uid-other-d", status={"phase": "Pending"}))
    lister: Lister[Any] = Lister(cache, PODS)

    def names(objs: list[dict[str, Any]]) -> list[str]:
        return sorted(o["metadata"]["name"] for o in objs)

    assert lister.get("a", "default") is not None
    assert lister.get("a", "other") is None
    assert names(lister.list()) == ["a", "b", "c", "d"]
    assert names(lister.list(namespace="other")) == ["c", "d"]
    assert names(lister.list(selector="app=web")) == ["a", "b"]
    assert names(lister.list(selector="app in (web,db),tier!=fe")) == ["b", "c"]
    assert names(lister.list(selector=parse_label_selector("!app"))) == ["d"]
    assert names(lister.list(namespace="default", selector="tier")) == ["a"]
    assert names(lister.list(field_selector="status.phase=Pending")) == ["d"]
    assert names(lister.by_owner("rs-1")) == ["a", "b"]
    assert names(lister.by_owner("rs-1", selector="tier=fe")) == ["a"]
    assert names(lister.by_node("n1")) == ["a", "c"]
    assert lister.by_node("n3") == []
    with pytest.raises(ValueError, match="namespaced"):
        lister.get("a")


def test_cluster_scoped_lister_and_custom_index() -> None:
    cache = IndexedCache({"zone": lambda o: [o["metadata"]["labels"]["zone"]]})
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "a")):
        cache.upsert({"metadata": {"name": name, "labels": {"zone": zone}}})
    lister: Lister[Any] = Lister(cache, NODES)
    assert lister.get("n2") is not None
    assert sorted(o["metadata"]["name"] for o in lister.by_index("zone", "a")) == ["n1", "n3"]
    cache.add_indexer("initial", lambda o: [o["metadata"]["name"][0]])
    assert len(lister.by_index("initial", "n")) == 3
    with pytest.raises(KeyError, match="no index"):
        lister.by_index("missing", "x")


def test_update_moves_an_object_between_index_values() -> None:
    cache = IndexedCache()
    cache.upsert(POD(name="a", uid="uid-default-a", node_name="n1", status={"phase": "Running"}))
    old = cache.upsert(
        POD(name="a", uid="uid-default-a", node_name="n2", status={"phase": "Running"})
    )
    assert old is not None
    assert old["spec"]["nodeName"] == "n1"
    assert cache.by_index(NODE_INDEX, "n1") == []
    assert [o["metadata"]["name"] for o in cache.by_index(NODE_INDEX, "n2")] == ["a"]
    assert cache.index_values(NODE_INDEX) == ["n2"]
    cache.remove("default/a")
    assert cache.index_values(NODE_INDEX) == []
    assert cache.remove("default/a") is None


_names = st.sampled_from(["a", "b", "c", "d", "e"])
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("upsert"),
            _names,
            st.sampled_from(["ns1", "ns2"]),
            st.sampled_from([None, "n1", "n2"]),
            st.sampled_from([None, "rs-1", "rs-2"]),
        ),
        st.tuples(st.just("remove"), _names, st.sampled_from(["ns1", "ns2"])),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_indexes_always_agree_with_a_full_scan(ops: list[tuple[Any, ...]]) -> None:
    cache = IndexedCache()
    for op in ops:
        if op[0] == "upsert":
            _, name, ns, node, rs = op
            cache.upsert(
                POD(
                    name=name,
                    namespace=ns,
                    uid=f"uid-{ns}-{name}",
                    owner_references=[owner(rs)] if rs else [],
                    node_name=node,
                    status={"phase": "Running"},
                )
            )
        else:
            cache.remove(f"{op[2]}/{op[1]}")
    everything = cache.values()
    for index, func in (
        (NAMESPACE_INDEX, lambda o: o["metadata"]["namespace"]),
        (NODE_INDEX, lambda o: o["spec"].get("nodeName")),
        (OWNER_INDEX, lambda o: next(iter(controller_owner_index(o)), None)),
    ):
        expected: dict[str, set[str]] = {}
        for obj in everything:
            value = func(obj)
            if value:
                expected.setdefault(value, set()).add(object_key(obj))
        assert set(cache.index_values(index)) == set(expected)
        for value, keys in expected.items():
            assert {object_key(o) for o in cache.by_index(index, value)} == keys
