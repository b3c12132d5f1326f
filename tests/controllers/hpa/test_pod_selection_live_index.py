"""The HPA's pods by label kept by the pod informer's events (issue 29, ``LivePodIndex``).

Before, every pass label-indexed every pod of the HPAs' namespaces again (one ``LabelIndex``
per namespace per sync period: ~0.19 CPU-s a pass at 50,000 pods). The live index must answer
what that from-scratch index over the informer's list answers -- the same pods in the same
order -- after any sequence of adds, updates (labels changed, moved last in the informer's
order) and deletes; a property checks it against an ``IndexedCache`` changed as the informer
changes it. The real loop against the simulated API server indexes no pod in a steady pass.
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.hpa.pod_selection import LabelIndex, LivePodIndex, SelectionPass
from kubescale.kube.indexes import NAMESPACE_INDEX, IndexedCache, object_key
from kubescale.kube.resources import PODS
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import parse_label_selector
from tests.builders.pods import pod

from .hpa_cluster import NAMESPACE, Hpas
from .test_hpa_loop import WEB, cluster, hpas, web

__all__ = ["cluster", "hpas"]

_NAMESPACES = ("a", "b")
_SELECTORS = (
    "app=web",
    "app=web,tier=front",
    "app in (web)",
    "app==db",
    "tier=front,app!=db",
    "app notin (db)",
    "tier",
    "!tier",
    "app in (web,db)",
    "app=nothing",
)
_LABELS = st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db", "front"]), max_size=2
)
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete"]),
        st.sampled_from(_NAMESPACES),
        st.integers(min_value=0, max_value=5),
        _LABELS,
    ),
    max_size=30,
)


def _apply(cache: IndexedCache, index: LivePodIndex, ops: list[Any]) -> None:
    """The informer's cache and its event handlers (``informer._store``/``_apply``): the cache
    changes first, then the handlers are told."""
    version = 0
    for op, namespace, number, labels in ops:
        version += 1
        obj = pod(name=f"p{number}", namespace=namespace, labels=labels)
        obj["metadata"]["resourceVersion"] = str(version)
        if op == "delete":
            old = cache.remove(object_key(obj))
            if old is not None:
                index.delete(cast(Pod, old))
            continue
        previous = cache.upsert(obj)
        if previous is None:
            index.add(cast(Pod, obj))
        else:
            index.update(cast(Pod, previous), cast(Pod, obj))


@given(_OPS, st.sampled_from(_SELECTORS), st.sampled_from(_NAMESPACES))
def test_the_live_index_answers_the_from_scratch_index(
    ops: list[Any], text: str, namespace: str
) -> None:
    cache, index = IndexedCache(), LivePodIndex()
    _apply(cache, index, ops)

    def list_pods(*, namespace: str) -> list[Pod]:
        return cast(list[Pod], cache.by_index(NAMESPACE_INDEX, namespace))

    selector = parse_label_selector(text)
    expected = LabelIndex(list_pods(namespace=namespace)).select(selector)
    got = SelectionPass(list_pods, index).select(namespace, selector)
    assert [object_key(p) for p in got] == [object_key(p) for p in expected]
    assert all(a is b for a, b in zip(got, expected, strict=True))
    assert len(index) == len(cache)  # a deleted pod is released


async def test_a_steady_pass_indexes_no_pod(hpas: Hpas) -> None:
    web(hpas, pods=3, usage="500m")
    hpas.hpa("web", target="web")
    loop = await hpas.loop()
    await hpas.run(loop)
    assert hpas.get_hpa("web")["status"]["currentReplicas"] == 3
    indexed = loop.pod_index.indexed
    assert indexed == 3  # the informer's three pods, once each

    await hpas.run(loop)  # nothing changed since
    assert loop.pod_index.indexed == indexed  # nothing changed: nothing indexed again

    store = hpas.cluster.api.store
    changed = store.get(PODS, "web-0", NAMESPACE)
    store.update({**changed, "metadata": {**changed["metadata"], "labels": {**WEB, "x": "y"}}})
    await hpas.run(loop)
    assert loop.pod_index.indexed == indexed + 1  # the one pod changed
    assert len(loop.pod_index) == 3
