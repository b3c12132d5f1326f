"""The recommender model finds a pod's VPAs through an index (issue 29).

Upstream's ``addPodToItsVpa`` tries every VPA for each new pod; the model files VPAs by
namespace and by a label equality their selector requires (``_VpaIndex``), so loading a
cluster costs pods × (VPAs sharing a label) selector checks instead of pods × VPAs. Checked
two ways: a count (40 Deployments' VPAs, ``matchLabels: {app: a<i>}``, one pod each: 40
checks, not 40 × 40 = 1,600) and a property (for any VPAs, selectors and pods, the per-VPA pod
counts equal upstream's brute-force count — and still after VPAs are deleted).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model import cluster_state
from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.objects.selectors import (
    LabelSelector,
    label_selector_from_dict,
    label_selector_from_set,
)
from tests import builders

NAMESPACE = "ns"
VPA = functools.partial(builders.vpas.typed_vpa, namespace=NAMESPACE, api_version=None)


def _pod(
    state: ClusterState, name: str, labels: Mapping[str, str], namespace: str = NAMESPACE
) -> None:
    state.add_or_update_pod(
        namespace=namespace,
        name=name,
        labels=labels,
        phase="Running",
        containers={"app": {"cpu": 100, "memory": 1 << 20}},
    )


def test_a_pod_is_checked_against_the_vpas_sharing_its_labels_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = ClusterState(config=RecommenderConfig())
    for i in range(40):
        state.add_or_update_vpa(
            VPA(name=f"a{i}"), selector=label_selector_from_set({"app": f"a{i}"})
        )
    checks: list[tuple[str, str]] = []
    matches = cluster_state._Vpa.matches

    def counting(self: cluster_state._Vpa, namespace: str, labels: Mapping[str, str]) -> bool:
        checks.append((self.name, labels.get("app", "")))
        return matches(self, namespace, labels)

    monkeypatch.setattr(cluster_state._Vpa, "matches", counting)
    for i in range(40):
        _pod(state, f"a{i}-0", {"app": f"a{i}", "tier": "web"})
    # each pod is checked against the one VPA filed under its app label: 40, not 1,600
    assert len(checks) == 40
    assert all(name == app for name, app in checks)
    assert all(state.vpa_pod_count(namespace=NAMESPACE, name=f"a{i}") == 1 for i in range(40))


_KEYS = ["app", "tier", "zone"]
_VALUES = ["a", "b", "c"]
_requirement = st.fixed_dictionaries(
    {
        "key": st.sampled_from(_KEYS),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": st.lists(st.sampled_from(_VALUES), min_size=1, max_size=2, unique=True),
    }
).map(lambda r: {**r, "values": []} if r["operator"] in ("Exists", "DoesNotExist") else r)
_selector = st.fixed_dictionaries(
    {
        "matchLabels": st.dictionaries(
            st.sampled_from(_KEYS), st.sampled_from(_VALUES), max_size=2
        ),
        "matchExpressions": st.lists(_requirement, max_size=2),
    }
)
_labels = st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(_VALUES), max_size=3)


@settings(max_examples=80, deadline=None)
@given(
    vpas=st.lists(st.tuples(st.sampled_from(["ns", "other"]), _selector | st.none()), max_size=8),
    pods=st.lists(st.tuples(st.sampled_from(["ns", "other"]), _labels), max_size=10),
    deleted=st.sets(st.integers(min_value=0, max_value=7)),
)
def test_pod_counts_are_upstreams_brute_force_counts(
    vpas: list[tuple[str, dict[str, object] | None]],
    pods: list[tuple[str, dict[str, str]]],
    deleted: set[int],
) -> None:
    state = ClusterState(config=RecommenderConfig())
    selectors: dict[str, tuple[str, LabelSelector | None]] = {}
    for index, (namespace, raw) in enumerate(vpas):
        selector = None if raw is None else label_selector_from_dict(raw)
        selectors[f"v{index}"] = (namespace, selector)
        state.add_or_update_vpa(VPA(name=f"v{index}", namespace=namespace), selector=selector)
    half = len(pods) // 2
    for index, (namespace, labels) in enumerate(pods[:half]):
        _pod(state, f"p{index}", labels, namespace)
    for index in deleted:
        if f"v{index}" in selectors:
            namespace, _ = selectors.pop(f"v{index}")
            state.delete_vpa(namespace=namespace, name=f"v{index}")
    for index, (namespace, labels) in enumerate(pods[half:], start=half):
        _pod(state, f"p{index}", labels, namespace)
    for name, (namespace, selector) in selectors.items():
        # PodLabelsMatchVPA over every pod: same namespace, then the selector (None: nothing)
        expected = sum(
            1
            for pod_namespace, labels in pods
            if pod_namespace == namespace and selector is not None and selector.matches(labels)
        )
        assert state.vpa_pod_count(namespace=namespace, name=name) == expected, name


class BruteForce(ClusterState):
    """Upstream's linking of a new aggregate: ``UseAggregationIfMatching`` tried on every VPA
    of the model, in order (the model's own code before the index was used there)."""

    def _find_or_create_aggregate(
        self, pod: cluster_state._Pod, container: str, creation_us: int = 0
    ) -> AggregateContainerState:
        key = cluster_state.AggregateKey(pod.namespace, container, pod.label_key)
        state = self._aggregates.get(key)
        if state is None:
            state = AggregateContainerState(self.stores, creation_time_us=creation_us)
            if creation_us == 0:
                self._pending_creation.append(state)
            self._aggregates[key] = state
            for vpa in self._vpas.values():
                self._use_if_matching(vpa, key, state)
        return state


def _links(state: ClusterState) -> tuple[object, ...]:
    return (
        [(key, list(vpa.aggregates)) for key, vpa in state._vpas.items()],
        [(key, a.is_under_vpa, a.update_mode) for key, a in state._aggregates.items()],
    )


@settings(max_examples=80, deadline=None)
@given(
    vpas=st.lists(
        st.tuples(
            st.sampled_from(["ns", "other"]),
            _selector | st.none(),
            st.sampled_from(["Off", "Initial", "Recreate", "Auto"]),
        ),
        max_size=8,
    ),
    pods=st.lists(st.tuples(st.sampled_from(["ns", "other"]), _labels), max_size=10),
    deleted=st.sets(st.integers(min_value=0, max_value=7)),
    readded=st.sets(st.integers(min_value=0, max_value=7)),
)
def test_new_aggregates_are_linked_to_the_vpas_upstream_links_them_to(
    vpas: list[tuple[str, dict[str, object] | None, str]],
    pods: list[tuple[str, dict[str, str]]],
    deleted: set[int],
    readded: set[int],
) -> None:
    """A new aggregate goes to each VPA matching its pod; when several match, the update mode
    of the last one in the model's order stays (issue 29: found through the index)."""
    states = [ClusterState(config=RecommenderConfig()), BruteForce(config=RecommenderConfig())]
    for state in states:

        def add(index: int, state: ClusterState = state) -> None:
            namespace, raw, mode = vpas[index]
            selector = None if raw is None else label_selector_from_dict(raw)
            vpa = VPA(name=f"v{index}", namespace=namespace, update_mode=mode)
            state.add_or_update_vpa(vpa, selector=selector)

        for index in range(len(vpas)):
            add(index)
        half = len(pods) // 2
        for index, (namespace, labels) in enumerate(pods[:half]):
            _pod(state, f"p{index}", labels, namespace)
        for index in sorted(deleted):
            if index < len(vpas):
                state.delete_vpa(namespace=vpas[index][0], name=f"v{index}")
        for index in sorted(readded):  # back at the end of the model's order
            if index < len(vpas):
                add(index)
        for index, (namespace, labels) in enumerate(pods[half:], start=half):
            _pod(state, f"p{index}", labels, namespace)
            _pod(state, f"q{index}", {**labels, "extra": "1"}, namespace)
    assert _links(states[0]) == _links(states[1])
