"""The admission patch sequence for a pod (webhook/pod_patches.py).

Patch lists are compared whole and in order. The cases follow upstream's
``resource_updates_test.go`` (new / replacement cpu request, two containers, new / replacement
cpu limit, two resources), ``observed_containers_test.go`` (names joined by ", ") and
``handler_test.go`` (the empty-annotations patch first), with the recommendation pipeline's
output given directly as :class:`PodResources` values.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.current_resources import container_requests_and_limits
from kubescale.controllers.vpa.api.pod_patches import (
    _current_lists_set,
    escape_json_pointer,
    observed_containers_value,
    pod_patches,
)
from kubescale.controllers.vpa.api.pod_resources import ContainerResources, PodResources
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.sim.apiserver.patching import apply_json_patch
from tests import builders
from tests.builders.meta import stored_as

POD = functools.partial(builders.pods.typed_pod, name="p", api_version=None)

q = Quantity.parse


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


EMPTY_ANNOTATIONS = add("/metadata/annotations", {})


def updates(text: str) -> dict[str, Any]:
    return add("/metadata/annotations/vpaUpdates", f"Pod resources updated by name: {text}")


def observed(names: str) -> dict[str, Any]:
    return add("/metadata/annotations/vpaObservedContainers", names)


def container(
    name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    spec: dict[str, Any] = {"name": name}
    if resources or requests is not None or limits is not None:
        spec["resources"] = resources
    return spec


def res(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> ContainerResources:
    return ContainerResources(
        requests={k: q(v) for k, v in (requests or {}).items()},
        limits={k: q(v) for k, v in (limits or {}).items()},
    )


def resources(
    *containers: ContainerResources, annotations: dict[str, tuple[str, ...]] | None = None
) -> PodResources:
    return PodResources(containers=tuple(containers), annotations=annotations or {})


CASES = [
    pytest.param(
        POD(containers=[container("c0")]),
        resources(res({"cpu": "1"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources", {}),
            add("/spec/containers/0/resources/requests", {}),
            add("/spec/containers/0/resources/requests/cpu", "1"),
            updates("container 0: cpu request"),
            observed("c0"),
        ],
        id="new cpu recommendation",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "0"})]),
        resources(res({"cpu": "1"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/requests/cpu", "1"),
            updates("container 0: cpu request"),
            observed("c0"),
        ],
        id="replacement cpu recommendation",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "0"}), container("c1")]),
        resources(res({"cpu": "1"}), res({"cpu": "2"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/requests/cpu", "1"),
            add("/spec/containers/1/resources", {}),
            add("/spec/containers/1/resources/requests", {}),
            add("/spec/containers/1/resources/requests/cpu", "2"),
            updates("container 0: cpu request; container 1: cpu request"),
            observed("c0, c1"),
        ],
        id="two containers",
    ),
    pytest.param(
        POD(containers=[container("c0")]),
        resources(res(limits={"cpu": "1"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources", {}),
            add("/spec/containers/0/resources/limits", {}),
            add("/spec/containers/0/resources/limits/cpu", "1"),
            updates("container 0: cpu limit"),
            observed("c0"),
        ],
        id="new cpu limit",
    ),
    pytest.param(
        POD(containers=[container("c0", limits={"cpu": "0"})]),
        resources(res(limits={"cpu": "1"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/limits/cpu", "1"),
            updates("container 0: cpu limit"),
            observed("c0"),
        ],
        id="replacement cpu limit",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "0"})]),
        resources(res({"memory": "256Mi", "cpu": "1", "unobtanium": "2"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/requests/cpu", "1"),
            add("/spec/containers/0/resources/requests/memory", "256Mi"),
            add("/spec/containers/0/resources/requests/unobtanium", "2"),
            updates("container 0: cpu request, memory request, unobtanium request"),
            observed("c0"),
        ],
        id="several resources: cpu, memory, then others by name",
    ),
    pytest.param(
        POD(
            containers=[
                container(
                    "app", {"cpu": "100m", "memory": "100Mi"}, {"cpu": "200m", "memory": "200Mi"}
                )
            ],
            annotations={"team": "a"},
        ),
        resources(
            res({"cpu": "250m", "memory": "256Mi"}, {"cpu": "500m", "memory": "512Mi"}),
            annotations={"app": ("cpu capped to maxAllowed", "memory capped to container limit")},
        ),
        [
            add("/spec/containers/0/resources/requests/cpu", "250m"),
            add("/spec/containers/0/resources/requests/memory", "256Mi"),
            add("/spec/containers/0/resources/limits/cpu", "500m"),
            add("/spec/containers/0/resources/limits/memory", "512Mi"),
            updates(
                "container 0: cpu capped to maxAllowed, memory capped to container limit,"
                " cpu request, memory request, cpu limit, memory limit"
            ),
            observed("app"),
        ],
        id="annotations exist: no empty-annotations patch; capping annotations first",
    ),
    pytest.param(
        POD(containers=[container("c0")], annotations={}),
        resources(res()),
        # Upstream adds resources {} and writes "container 0: "; kubescale names no such entry.
        [observed("c0")],
        id="container without resources and nothing to set: no patch, no entry (deviation)",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "100m"}), container("c1", {"cpu": "100m"})]),
        resources(res(), res({"cpu": "200m"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/1/resources/requests/cpu", "200m"),
            updates("container 1: cpu request"),
            observed("c0, c1"),
        ],
        id="a skipped container is not listed",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "100m"})]),
        resources(res()),
        [EMPTY_ANNOTATIONS, observed("c0")],
        id="nothing to change: only the observed containers annotation",
    ),
    pytest.param(
        POD(containers=[container("c0", {})], annotations={}),
        resources(res({"cpu": "1"})),
        [
            add("/spec/containers/0/resources/requests/cpu", "1"),
            updates("container 0: cpu request"),
            observed("c0"),
        ],
        id="present but empty requests map is not re-initialised",
    ),
    pytest.param(
        POD(containers=[container("c0", limits={"memory": "1Gi"})]),
        resources(res({"memory": "512Mi"}, {"memory": "1Gi"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/requests", {}),
            add("/spec/containers/0/resources/requests/memory", "512Mi"),
            add("/spec/containers/0/resources/limits/memory", "1Gi"),
            updates("container 0: memory request, memory limit"),
            observed("c0"),
        ],
        id="limits only: requests map added, resources object not",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "1"})]),
        resources(res({"example.com/gpu~x": "1"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/requests/example.com~1gpu~0x", "1"),
            updates("container 0: example.com/gpu~x request"),
            observed("c0"),
        ],
        id="JSON-pointer escaping of resource names",
    ),
    pytest.param(
        POD(containers=[container("c0", {"cpu": "1.5"})]),
        resources(res({"cpu": "1.5", "memory": "1.5Gi"})),
        [
            EMPTY_ANNOTATIONS,
            add("/spec/containers/0/resources/requests/cpu", "1500m"),
            add("/spec/containers/0/resources/requests/memory", "1536Mi"),
            updates("container 0: cpu request, memory request"),
            observed("c0"),
        ],
        id="values are canonical quantity strings",
    ),
]


@pytest.mark.parametrize(("the_pod", "computed", "expected"), CASES)
def test_pod_patches(the_pod: Pod, computed: PodResources, expected: list[dict[str, Any]]) -> None:
    assert pod_patches(pod=the_pod, vpa_name="name", resources=computed) == expected


def test_current_resources_come_from_container_status() -> None:
    """resourcehelpers: a status entry with ``resources`` decides what is "unset"."""
    the_pod = POD(containers=[container("c0"), container("c1", {"cpu": "1"})])
    the_pod["status"] = {
        "containerStatuses": [
            {"name": "c0", "resources": {"requests": {"cpu": "1"}}},
            {"name": "c1", "resources": {}},
        ]
    }
    patches = pod_patches(
        pod=the_pod, vpa_name="name", resources=resources(res({"cpu": "2"}), res({"cpu": "2"}))
    )
    assert patches == [
        EMPTY_ANNOTATIONS,
        add("/spec/containers/0/resources/requests/cpu", "2"),
        add("/spec/containers/1/resources", {}),
        add("/spec/containers/1/resources/requests", {}),
        add("/spec/containers/1/resources/requests/cpu", "2"),
        updates("container 0: cpu request; container 1: cpu request"),
        observed("c0, c1"),
    ]


def test_status_without_resources_falls_back_to_spec() -> None:
    the_pod = POD(containers=[container("c0", {"cpu": "1"})])
    the_pod["status"] = {"containerStatuses": [{"name": "c0", "ready": False}]}
    patches = pod_patches(pod=the_pod, vpa_name="name", resources=resources(res({"cpu": "2"})))
    assert patches[1] == add("/spec/containers/0/resources/requests/cpu", "2")


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param([], "", id="no containers"),
        pytest.param(["test1"], "test1", id="one container"),
        pytest.param(["test1", "test2", "test3"], "test1, test2, test3", id="three containers"),
    ],
)
def test_observed_containers_value(names: list[str], expected: str) -> None:
    assert observed_containers_value(POD(containers=[*(container(n) for n in names)])) == expected


@pytest.mark.parametrize(
    ("segment", "expected"),
    [("cpu", "cpu"), ("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), ("~1", "~01")],
)
def test_escape_json_pointer(segment: str, expected: str) -> None:
    assert escape_json_pointer(segment) == expected


QUANTITY_TEXTS = st.sampled_from(["1", "100m", "250m", "1.5", "128Mi", "1Gi", "1000", "12e6"])


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.booleans(),
            st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITY_TEXTS, max_size=2),
            st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITY_TEXTS, max_size=2),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_patch_applies_and_sets_exactly_the_new_values(
    data: list[tuple[bool, dict[str, str], dict[str, str]]],
) -> None:
    """The in-process API server's RFC 6902 implementation applies the patch (every parent
    exists when its child is added) and the pod ends with exactly the new values."""
    containers = [
        container(f"c{i}", {"cpu": "1"} if has else None) for i, (has, _, _) in enumerate(data)
    ]
    the_pod = POD(containers=[*containers])
    computed = resources(*(res(req, lim) for _, req, lim in data))
    patched = apply_json_patch(the_pod, pod_patches(pod=the_pod, vpa_name="v", resources=computed))
    for i, (has, req, lim) in enumerate(data):
        got = patched["spec"]["containers"][i].get("resources", {})
        expected_requests = ({"cpu": "1"} if has else {}) | {k: str(q(v)) for k, v in req.items()}
        assert got.get("requests", {}) == expected_requests
        assert got.get("limits", {}) == {k: str(q(v)) for k, v in lim.items()}
    assert patched["metadata"]["annotations"]["vpaObservedContainers"] == ", ".join(
        c["name"] for c in containers
    )


RESOURCE_HOLDERS: st.SearchStrategy[dict[str, Any] | None] = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "requests": st.one_of(st.none(), st.just({}), st.just({"cpu": "1"})),
            "limits": st.one_of(st.none(), st.just({}), st.just({"memory": "1Gi"})),
        },
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    specs=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), RESOURCE_HOLDERS), max_size=4),
    statuses=st.lists(st.tuples(st.sampled_from(["a", "b", "d"]), RESOURCE_HOLDERS), max_size=4),
)
def test_current_lists_follow_the_shared_resourcehelpers_rule(
    specs: list[tuple[str, Any]], statuses: list[tuple[str, Any]]
) -> None:
    """The patch's nil checks agree with webhook.current_resources on every pod shape."""
    containers = [{"name": n, **({} if r is None else {"resources": r})} for n, r in specs]
    status_entries = [{"name": n, **({} if r is None else {"resources": r})} for n, r in statuses]
    # hypothesis-built JSON (resources possibly malformed), read as the Pod it stands for
    the_pod = stored_as(
        {"spec": {"containers": containers}, "status": {"containerStatuses": status_entries}}, Pod
    )
    current = _current_lists_set(the_pod)
    for name, _ in specs:
        requests, limits = container_requests_and_limits(the_pod, name)
        assert current[name] == (requests is not None, limits is not None)
