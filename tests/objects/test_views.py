"""The views that read an object's ``spec``/``status`` where absent and empty differ, and the
field exactly as sent (issue 28.3: the last raw reads of the VPA, webhook, kube, report and
runtime modules go through them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kubescale.objects.views import (
    optional_spec_of,
    optional_status_of,
    raw_metadata,
    raw_spec,
    raw_status,
)

SPEC: dict[str, Any] = {"containers": []}

# (object, optional_spec_of, raw_spec): a mapping is returned as it is; anything else is None
# for the optional view, and kept as sent (a malformed value included) by the raw one.
SPEC_CASES: list[tuple[Mapping[str, Any], object, object]] = [
    ({}, None, None),  # absent
    ({"spec": None}, None, None),  # null
    ({"spec": "x"}, None, "x"),  # malformed: the raw view keeps it
    ({"spec": []}, None, []),
    ({"spec": {}}, {}, {}),  # empty differs from absent
    ({"spec": SPEC}, SPEC, SPEC),
]


@pytest.mark.parametrize(("obj", "optional", "raw"), SPEC_CASES)
def test_spec_views(obj: Mapping[str, Any], optional: object, raw: object) -> None:
    assert optional_spec_of(obj) == optional
    assert raw_spec(obj) == raw
    if isinstance(optional, Mapping):
        assert optional_spec_of(obj) is obj["spec"]  # the same object, not a copy


@pytest.mark.parametrize(
    ("field", "optional_view", "raw_view"),
    [
        ("status", optional_status_of, raw_status),
        ("metadata", None, raw_metadata),
    ],
)
def test_status_and_metadata_views(
    field: str,
    optional_view: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None,
    raw_view: Callable[[Mapping[str, Any]], object],
) -> None:
    value = {"phase": "Running"}
    assert raw_view({}) is None
    assert raw_view({field: 3}) == 3
    assert raw_view({field: value}) is value
    if optional_view is not None:
        assert optional_view({}) is None
        assert optional_view({field: 3}) is None
        assert optional_view({field: value}) is value
