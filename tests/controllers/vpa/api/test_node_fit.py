"""Node fit (beyond upstream): recommended requests scaled down to fit the largest node.

Tables with the arithmetic in comments; hypothesis checks the two promises: a fitted pod's
total requests never exceed the allocatable (when the rest of the pod leaves room at all) and
no request is ever raised.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.current_resources import parse_resource_list
from kubescale.controllers.vpa.api.node_fit import fit_requests_to_node
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from tests import builders

POD = functools.partial(builders.pods.typed_pod, name="p", namespace=None, api_version=None)

Resources = dict[str, str]


def container(name: str, requests: Resources | None = None, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"name": name, "image": "app", **extra}
    if requests is not None:
        result["resources"] = {"requests": requests}
    return result


def quantities(resources: Resources | None) -> dict[str, Quantity] | None:
    return parse_resource_list(resources)


def fit(
    the_pod: Pod, recommended: list[Resources | None], allocatable: Resources
) -> list[tuple[Resources | None, tuple[str, ...]]]:
    fitted = fit_requests_to_node(
        pod=the_pod,
        recommended=[quantities(requests) for requests in recommended],
        allocatable=quantities(allocatable) or {},
    )
    return [
        (None if requests is None else {k: str(v) for k, v in requests.items()}, lowered)
        for requests, lowered in fitted
    ]


def test_a_pod_that_fits_is_unchanged() -> None:
    assert fit(POD(containers=[container("a")]), [{"cpu": "1", "memory": "1Gi"}], {"cpu": "2"}) == [
        ({"cpu": "1", "memory": "1Gi"}, ())
    ]


def test_a_single_container_is_cut_to_the_allocatable() -> None:
    # 3000m x 2000m / 3000m = 2000m.
    assert fit(POD(containers=[container("a")]), [{"cpu": "3"}], {"cpu": "2"}) == [
        ({"cpu": "2"}, ("cpu",))
    ]


def test_requests_shrink_in_proportion() -> None:
    # Wanted 3 + 1 = 4 cpus on a 2-cpu node: 3000m x 2000m / 4000m = 1500m, 1000m -> 500m.
    assert fit(
        POD(containers=[container("a"), container("b")]), [{"cpu": "3"}, {"cpu": "1"}], {"cpu": "2"}
    ) == [
        ({"cpu": "1500m"}, ("cpu",)),
        ({"cpu": "500m"}, ("cpu",)),
    ]


def test_rounding_is_down_so_the_total_fits() -> None:
    # 1000m x 2000m / 3000m = 666.7m -> 666m each; 3 x 666m = 1998m <= 2000m.
    result = fit(
        POD(containers=[container("a"), container("b"), container("c")]),
        [{"cpu": "1"}, {"cpu": "1"}, {"cpu": "1"}],
        {"cpu": "2"},
    )
    assert result == [({"cpu": "666m"}, ("cpu",))] * 3


def test_memory_is_scaled_in_whole_bytes_keeping_the_format() -> None:
    # 3Gi x 2Gi / 4Gi = 1.5Gi = 1536Mi; 1Gi -> 512Mi.
    assert fit(
        POD(containers=[container("a"), container("b")]),
        [{"memory": "3Gi"}, {"memory": "1Gi"}],
        {"memory": "2Gi"},
    ) == [({"memory": "1536Mi"}, ("memory",)), ({"memory": "512Mi"}, ("memory",))]


def test_overhead_sidecars_and_unpatched_containers_are_fixed() -> None:
    # Fixed: overhead 250m + sidecar 250m + unpatched app container 500m = 1000m; the 2-cpu node
    # leaves 1000m for the recommended 2 -> 2000m x 1000m / 2000m = 1000m. The plain init
    # container (run before the others) is not added.
    the_pod = POD(
        containers=[container("patched"), container("other", {"cpu": "500m"})],
        spec={
            "overhead": {"cpu": "250m"},
            "initContainers": [
                container("sidecar", {"cpu": "250m"}, restartPolicy="Always"),
                container("setup", {"cpu": "1500m"}),
            ],
        },
    )
    assert fit(the_pod, [{"cpu": "2"}, None], {"cpu": "2"}) == [
        ({"cpu": "1"}, ("cpu",)),
        (None, ()),
    ]


def test_a_resource_the_container_does_not_get_counts_as_fixed() -> None:
    # Container b gets memory only; its current 1-cpu request is fixed: room 1000m for a's 3.
    the_pod = POD(containers=[container("a"), container("b", {"cpu": "1"})])
    assert fit(the_pod, [{"cpu": "3"}, {"memory": "1Gi"}], {"cpu": "2", "memory": "4Gi"}) == [
        ({"cpu": "1"}, ("cpu",)),
        ({"memory": "1Gi"}, ()),
    ]


def test_current_requests_are_read_from_the_container_status() -> None:
    # Spec says 100m but the status (resized) says 1: room 2000m - 1000m = 1000m.
    the_pod = POD(containers=[container("a"), container("b", {"cpu": "100m"})])
    the_pod["status"] = {
        "containerStatuses": [{"name": "b", "resources": {"requests": {"cpu": "1"}}}]
    }
    assert fit(the_pod, [{"cpu": "3"}, None], {"cpu": "2"}) == [
        ({"cpu": "1"}, ("cpu",)),
        (None, ()),
    ]


def test_no_room_left_changes_nothing() -> None:
    # The unpatched container alone needs the whole node: resizing the other cannot help.
    the_pod = POD(containers=[container("a"), container("b", {"cpu": "2"})])
    assert fit(the_pod, [{"cpu": "3"}, None], {"cpu": "2"}) == [({"cpu": "3"}, ()), (None, ())]


def test_resources_the_node_does_not_list_are_left_alone() -> None:
    assert fit(
        POD(containers=[container("a")]), [{"nvidia.com/gpu": "4", "cpu": "1"}], {"cpu": "2"}
    ) == [({"nvidia.com/gpu": "4", "cpu": "1"}, ())]


# -- properties -----------------------------------------------------------------------------------

_MILLI = st.integers(min_value=0, max_value=10**6)
_BYTES = st.integers(min_value=0, max_value=2**42)


@st.composite
def _case(draw: st.DrawFn) -> tuple[Pod, list[Resources | None], Resources]:
    count = draw(st.integers(min_value=1, max_value=5))
    containers = []
    recommended: list[Resources | None] = []
    for index in range(count):
        current = {"cpu": f"{draw(_MILLI)}m", "memory": str(draw(_BYTES))}
        containers.append(container(f"c{index}", current))
        if draw(st.booleans()):
            new: Resources = {}
            if draw(st.booleans()):
                new["cpu"] = f"{draw(_MILLI)}m"
            if draw(st.booleans()):
                new["memory"] = str(draw(_BYTES))
            recommended.append(new)
        else:
            recommended.append(None)
    allocatable = {"cpu": f"{draw(_MILLI)}m", "memory": str(draw(_BYTES))}
    return POD(containers=[*containers]), recommended, allocatable


def _units(name: str, quantity: Quantity) -> int:
    return quantity.milli_value() if name == "cpu" else quantity.value()


def _current(the_pod: Mapping[str, Any], index: int) -> dict[str, Quantity]:
    return quantities(the_pod["spec"]["containers"][index]["resources"]["requests"]) or {}


@given(_case())
def test_fitted_requests_never_exceed_the_allocatable_nor_grow(
    case: tuple[Pod, list[Resources | None], Resources],
) -> None:
    the_pod, recommended, allocatable = case
    before = [quantities(requests) for requests in recommended]
    after = fit_requests_to_node(
        pod=the_pod, recommended=before, allocatable=quantities(allocatable) or {}
    )
    for name, capacity in (quantities(allocatable) or {}).items():
        fixed = 0
        total = 0
        for index, (old, (new, _)) in enumerate(zip(before, after, strict=True)):
            if old is None or name not in old:
                fixed += _units(name, _current(the_pod, index)[name])
                continue
            assert new is not None
            assert _units(name, new[name]) <= _units(name, old[name])  # never raised
            total += _units(name, new[name])
        if fixed < _units(name, capacity):
            assert fixed + total <= _units(name, capacity)
