"""Field selectors behave as k8s.io/apimachinery's ``fields`` package.

Expected values come from upstream's fields/selector_test.go and the documented grammar; the
hypothesis test checks the canonical string round-trips and that ``matches`` agrees with a direct
evaluation of the terms.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.field_selectors import (
    FieldRequirement,
    FieldSelector,
    field_value,
    parse_field_selector,
)
from kubescale.objects.selection import EQUALS, NOT_EQUALS, SelectorError


@pytest.mark.parametrize("text", ["x=a,y=b,z=c", "", "x!=a,y=b", r"x=a||y\=b", r"x=a\=\=b"])
def test_good_field_selector_restrings(text: str) -> None:
    assert str(parse_field_selector(text)) == text


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "x=a,b", "x in (a)", "x in (a,b,c)", "x"])
def test_bad_field_selector_is_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
        ("x", "invalid selector: 'x'; can't understand 'x'"),
        ("x==a==b", "invalid field selector: unescaped character in value: 61"),
        ("x=a=b", "invalid field selector: unescaped character in value: 61"),
        ("a=b,c!", "invalid selector: 'a=b,c!'; can't understand 'c!'"),
        ("k=\\a", "invalid field selector: invalid escape sequence: \\a"),
        ("k=\\", "invalid field selector: invalid escape sequence: \\"),
        ("k=\\\\\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_field_selector(text)
    assert str(caught.value) == message


def test_field_selector_deterministic_and_normalised() -> None:
    assert str(parse_field_selector("x=a,a=x")) == str(parse_field_selector("a=x,x=a")) == "a=x,x=a"
    assert str(parse_field_selector("x==a")) == "x=a"
    assert str(parse_field_selector("a=a,")) == "a=a"
    assert str(parse_field_selector(",a=a")) == "a=a"
    assert parse_field_selector("").empty()
    assert parse_field_selector(",").empty()
    assert not parse_field_selector("a=").empty()


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        (r"k=\,,k2=v2", "k", ","),
        (r"k=\\,k2=v2", "k", "\\"),
        (r"k=\\\,,k2=v2", "k", "\\,"),
        (r"k=\=", "k", "="),
        (r"k=\\\=\\\,\\", "k", "\\=\\,\\"),
        ("함=수,목=록", "함", "수"),
        ("a=b=", "a", None),  # rejected below: unescaped "="
    ],
)
def test_field_selector_escaping(text: str, field: str, value: str | None) -> None:
    if value is None:
        with pytest.raises(SelectorError):
            parse_field_selector(text)
        return
    selector = parse_field_selector(text)
    assert selector.exact_value(field) == value
    assert parse_field_selector(str(selector)) == selector


@pytest.mark.parametrize(
    ("selector", "fields", "expected"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("foo=bar", {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"}, True),
        ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
        (
            r"foo=bar,baz=blah,complex=\=value\\\,\\",
            {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"},
            True,
        ),
        ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
        ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
        ("missing=", {}, True),
        ("missing!=", {}, False),
        ("missing!=x", {}, True),
    ],
)
def test_field_selector_matches(selector: str, fields: dict[str, str], expected: bool) -> None:
    assert parse_field_selector(selector).matches(fields) is expected


POD: dict[str, Any] = {
    "metadata": {"name": "web-1", "namespace": "prod", "labels": {"app": "web"}},
    "spec": {"nodeName": "node-a", "hostNetwork": False, "priority": 5},
    "status": {"phase": "Running", "podIP": "10.0.0.3"},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=web-1", True),
        ("metadata.name=web-1,metadata.namespace=prod", True),
        ("metadata.namespace!=prod", False),
        ("spec.nodeName=node-a,status.phase!=Failed", True),
        ("spec.nodeName=", False),
        ("spec.schedulerName=", True),
        ("status.phase=Pending", False),
        ("spec.hostNetwork=false", True),
        ("spec.priority=5", True),
        ("metadata.labels=", True),
        ("metadata.name.first=", True),
    ],
)
def test_field_selector_on_objects(selector: str, expected: bool) -> None:
    assert parse_field_selector(selector).matches(POD) is expected


def test_field_value_resolution() -> None:
    assert field_value(POD, "status.podIP") == "10.0.0.3"
    assert field_value(POD, "spec.hostNetwork") == "false"
    assert field_value(POD, "spec.priority") == "5"
    assert field_value(POD, "spec.missing") == ""
    assert field_value(POD, "metadata") == ""


@pytest.mark.parametrize(
    ("selector", "field", "expected"),
    [
        ("", "test", None),
        ("a=b", "test", None),
        ("test=b", "test", "b"),
        ("test=", "test", ""),
        ("test==b", "test", "b"),
        ("test!=b", "test", None),
        ("test!=", "test", None),
        ("a=,test=b", "test", "b"),
    ],
)
def test_field_requires_exact_match(selector: str, field: str, expected: str | None) -> None:
    assert parse_field_selector(selector).exact_value(field) == expected


def test_field_selector_fields() -> None:
    selector = parse_field_selector("metadata.name=a,spec.nodeName!=b,metadata.name!=c")
    assert selector.fields == frozenset({"metadata.name", "spec.nodeName"})
    assert FieldSelector().fields == frozenset()


_FIELD_TEXT = st.text(alphabet=st.sampled_from("ab=,\\!. -x"), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    terms=st.lists(
        st.tuples(
            st.sampled_from(["metadata.name", "spec.nodeName", "status.phase"]),
            st.booleans(),
            _FIELD_TEXT,
        ),
        max_size=4,
    ),
    obj_values=st.dictionaries(st.sampled_from(["name", "nodeName", "phase"]), _FIELD_TEXT),
)
def test_field_selector_round_trip_and_matching(
    terms: list[tuple[str, bool, str]], obj_values: dict[str, str]
) -> None:
    requirements = [
        FieldRequirement(field=f, operator=EQUALS if equal else NOT_EQUALS, value=v)
        for f, equal, v in terms
    ]
    text = ",".join(str(requirement) for requirement in requirements)
    selector = parse_field_selector(text)
    assert sorted(selector.requirements, key=str) == sorted(requirements, key=str)
    assert parse_field_selector(str(selector)) == selector
    obj = {
        "metadata": {"name": obj_values["name"]} if "name" in obj_values else {},
        "spec": {"nodeName": obj_values["nodeName"]} if "nodeName" in obj_values else {},
        "status": {"phase": obj_values["phase"]} if "phase" in obj_values else {},
    }
    actual = {
        "metadata.name": obj_values.get("name", ""),
        "spec.nodeName": obj_values.get("nodeName", ""),
        "status.phase": obj_values.get("phase", ""),
    }
    expected = all((actual[f] == v) is equal for f, equal, v in terms)
    assert selector.matches(obj) is expected
