"""The store's deep copy of JSON values (kubescale/sim/apiserver/json_copy.py)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.sim.apiserver.json_copy import json_copy

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


def _containers(value: Any) -> list[Any]:
    """Every dict and list in ``value``, outermost first."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_a_copy_is_equal_and_shares_no_dict_or_list(value: Any) -> None:
    copied = json_copy(value)
    assert copied == value
    assert type(copied) is type(value)
    originals = {id(c) for c in _containers(value)}
    assert not originals & {id(c) for c in _containers(copied)}


def test_changing_the_copy_leaves_the_stored_object_alone() -> None:
    stored: dict[str, Any] = {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"ports": [80]},
    }
    handed_out = json_copy(stored)
    handed_out["metadata"]["labels"]["app"] = "other"
    handed_out["spec"]["ports"].append(443)
    assert stored == {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"ports": [80]},
    }


def test_a_value_that_is_not_json_is_deep_copied() -> None:
    when = datetime(2013, 7, 1, tzinfo=UTC)
    inner = {"a": [1]}
    value: dict[str, Any] = {"at": when, "pair": (inner, 2)}
    copied = json_copy(value)
    assert copied == value
    assert copied["pair"][0] is not inner  # the tuple went through copy.deepcopy
    assert copied["pair"] == copy.deepcopy(value["pair"])
