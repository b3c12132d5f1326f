"""LimitRange items merge as upstream VPA's limit range calculator merges them.

Cases from ``pkg/utils/limitrange/limit_range_calculator_test.go`` (TestGetContainerLimitRangeItem)
plus the rules that table does not pin: the Pod type, several objects, ties, the first list
copied whole, ``default`` replaced as a whole list, empty lists counting as unset.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import pytest

from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem, merged_limit_range_item
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.quantities import Quantity, QuantityError
from tests import builders
from tests.builders.meta import stored_as

LIMIT_RANGE = functools.partial(
    builders.limit_ranges.typed_limit_range, name="lr", namespace=None, api_version=None
)


def texts(resources: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(value) for name, value in resources.items()}


def resources(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def test_no_limit_ranges_is_none() -> None:
    assert merged_limit_range_item([], item_type="Container") is None


def test_items_of_other_types_do_not_count() -> None:
    # "no matching limit ranges": a PersistentVolumeClaim item is not a Container item.
    ranges = [LIMIT_RANGE(items=[{"type": "PersistentVolumeClaim", "max": resources("2", "2")}])]
    assert merged_limit_range_item(ranges, item_type="Container") is None
    assert merged_limit_range_item(ranges, item_type="Pod") is None


@pytest.mark.parametrize("field", ["max", "min", "default"])
def test_a_single_item_is_returned_as_it_is(field: str) -> None:
    # "matching container limit range", "with default value", "respects min".
    item = merged_limit_range_item(
        [LIMIT_RANGE(items=[{"type": "Container", field: resources("2", "2")}])],
        item_type="Container",
    )
    assert item is not None
    assert texts(getattr(item, field)) == {"cpu": "2", "memory": "2"}
    for other in {"max", "min", "default"} - {field}:
        assert not getattr(item, other)


def test_one_item_with_all_three() -> None:
    # "multiple items": max 2, default 1.5, min 1 in one item.
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[
                    {
                        "type": "Container",
                        "max": resources("2", "2"),
                        "default": resources("1.5", "1.5"),
                        "min": resources("1", "1"),
                    }
                ]
            )
        ],
        item_type="Container",
    )
    assert item is not None
    assert texts(item.max) == {"cpu": "2", "memory": "2"}
    assert texts(item.min) == {"cpu": "1", "memory": "1"}
    # 1.5 prints canonically as 1500m.
    assert texts(item.default) == {"cpu": "1500m", "memory": "1500m"}


def test_takes_lowest_max() -> None:
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[
                    {"type": "Container", "max": resources("1.5", "1.5")},
                    {"type": "Container", "max": resources("2.", "2.")},
                ]
            )
        ],
        item_type="Container",
    )
    assert item == LimitRangeItem(
        max={"cpu": Quantity.parse("1.5"), "memory": Quantity.parse("1.5")}
    )


def test_takes_highest_min() -> None:
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[
                    {"type": "Container", "min": resources("1.5", "1.5")},
                    {"type": "Container", "min": resources("1.", "1.")},
                ]
            )
        ],
        item_type="Container",
    )
    assert item is not None
    assert texts(item.min) == {"cpu": "1500m", "memory": "1500m"}


def test_merges_across_objects_per_resource() -> None:
    # Lowest max and highest min per resource, across two LimitRange objects.
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[{"type": "Container", "max": resources("4", "1Gi"), "min": {"cpu": "1"}}]
            ),
            LIMIT_RANGE(
                name="second",
                items=[
                    {"type": "Container", "max": resources("8", "512Mi"), "min": {"memory": "1Mi"}}
                ],
            ),
        ],
        item_type="Container",
    )
    assert item is not None
    assert texts(item.max) == {"cpu": "4", "memory": "512Mi"}
    assert texts(item.min) == {"cpu": "1", "memory": "1Mi"}


def test_pod_and_container_items_merge_separately() -> None:
    ranges = [
        LIMIT_RANGE(
            items=[
                {"type": "Container", "max": {"cpu": "2"}},
                {"type": "Pod", "max": {"cpu": "3"}, "min": {"memory": "100Mi"}},
            ]
        )
    ]
    container = merged_limit_range_item(ranges, item_type="Container")
    pod = merged_limit_range_item(ranges, item_type="Pod")
    assert container is not None
    assert pod is not None
    assert texts(container.max) == {"cpu": "2"}
    assert not container.min
    assert texts(pod.max) == {"cpu": "3"}
    assert texts(pod.min) == {"memory": "100Mi"}


def test_last_default_wins_as_a_whole_list() -> None:
    # result.Default = lri.Default: no per-resource merge, the earlier memory default is gone.
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(items=[{"type": "Container", "default": resources("1", "1Gi")}]),
            LIMIT_RANGE(name="second", items=[{"type": "Container", "default": {"cpu": "2"}}]),
        ],
        item_type="Container",
    )
    assert item is not None
    assert texts(item.default) == {"cpu": "2"}


def test_the_first_max_list_is_copied_whole_later_ones_merge_cpu_and_memory_only() -> None:
    # updatedResult copies the first list (with every resource) and then only compares cpu and
    # memory: a later, lower ephemeral-storage max does not replace the first one.
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[
                    {"type": "Container", "max": {"cpu": "2", "ephemeral-storage": "10Gi"}},
                    {"type": "Container", "max": {"ephemeral-storage": "1Gi", "memory": "1Gi"}},
                ]
            )
        ],
        item_type="Container",
    )
    assert item is not None
    assert texts(item.max) == {"cpu": "2", "ephemeral-storage": "10Gi", "memory": "1Gi"}


def test_a_tie_keeps_the_later_quantity() -> None:
    # pickLowerMax(q1, q2) returns q2 unless q1 < q2: equal values keep the later spelling.
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[
                    {"type": "Container", "max": {"memory": "1024Mi"}},
                    {"type": "Container", "max": {"memory": "1Gi"}},
                ]
            )
        ],
        item_type="Container",
    )
    assert item is not None
    assert item.max["memory"] == Quantity.parse("1Gi")
    assert str(item.max["memory"]) == "1Gi"


def test_items_without_max_min_or_default_do_not_count() -> None:
    # Only defaultRequest / maxLimitRequestRatio: upstream skips the item, so the result is nil.
    ranges = [
        LIMIT_RANGE(
            items=[
                {"type": "Container", "defaultRequest": {"cpu": "100m"}},
                {"type": "Container", "maxLimitRequestRatio": {"cpu": "4"}},
            ]
        )
    ]
    assert merged_limit_range_item(ranges, item_type="Container") is None


def test_empty_and_null_lists_count_as_unset() -> None:
    # The API server omits empty ResourceLists (omitempty), so upstream never sees one.
    ranges = [LIMIT_RANGE(items=[{"type": "Pod", "max": {}, "min": None, "default": {}}])]
    assert merged_limit_range_item(ranges, item_type="Pod") is None


def test_default_request_and_ratio_are_carried() -> None:
    # Beyond upstream: defaultRequest follows default (last wins), ratios keep the lowest.
    item = merged_limit_range_item(
        [
            LIMIT_RANGE(
                items=[
                    {
                        "type": "Container",
                        "default": {"cpu": "1"},
                        "defaultRequest": {"cpu": "100m"},
                        "maxLimitRequestRatio": {"cpu": "4", "memory": "2"},
                    }
                ]
            ),
            LIMIT_RANGE(
                name="second",
                items=[
                    {
                        "type": "Container",
                        "max": {"cpu": "8"},
                        "defaultRequest": {"cpu": "200m"},
                        "maxLimitRequestRatio": {"cpu": "3"},
                    }
                ],
            ),
        ],
        item_type="Container",
    )
    assert item is not None
    assert texts(item.default_request) == {"cpu": "200m"}
    assert texts(item.max_limit_request_ratio) == {"cpu": "3", "memory": "2"}
    assert texts(item.default) == {"cpu": "1"}


def test_malformed_objects_are_ignored_and_bad_quantities_raise() -> None:
    ranges: list[dict[str, Any]] = [{"spec": None}, {"spec": {"limits": "x"}}, {}]
    malformed = [stored_as(r, LimitRange) for r in ranges]  # as a cache could hold them
    assert merged_limit_range_item(malformed, item_type="Container") is None
    with pytest.raises(QuantityError):
        merged_limit_range_item(
            [LIMIT_RANGE(items=[{"type": "Container", "max": {"cpu": "two"}}])],
            item_type="Container",
        )


def test_the_merged_item_is_read_only() -> None:
    item = merged_limit_range_item(
        [LIMIT_RANGE(items=[{"type": "Container", "max": {"cpu": "2"}}])], item_type="Container"
    )
    assert item is not None
    with pytest.raises(TypeError):
        item.max["cpu"] = Quantity.parse("1")  # type: ignore[index]
