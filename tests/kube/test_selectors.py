"""Label selectors behave as k8s.io/apimachinery's ``labels`` package (field selectors:
test_field_selectors.py).

Expected values come from upstream's tests (labels/selector_test.go, metav1
LabelSelectorAsSelector) and the documented grammar; the hypothesis tests check the
canonical string round-trips and that ``matches`` agrees with a direct evaluation of the rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.selectors import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EVERYTHING,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
    NOTHING,
    LabelSelector,
    Requirement,
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
    new_requirement,
    parse_label_selector,
)

NAME_PART_ERROR = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_ERROR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


# ---------------------------------------------------------------------------------------------
# Label selector strings: TestSelectorParse / TestSetSelectorParser / TestToString.


@pytest.mark.parametrize(
    "text",
    ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"],
)
def test_good_selector_restrings_without_spaces(text: str) -> None:
    assert str(parse_label_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "!x=a", "x<a"])
def test_bad_selector_is_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_parse_is_deterministic() -> None:
    assert str(parse_label_selector("x=a,a=x")) == str(parse_label_selector("a=x,x=a")) == "a=x,x=a"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("", ""),
        ("\rx", "x"),
        ("this-is-a-dns.domain.com/key-with-dash", "this-is-a-dns.domain.com/key-with-dash"),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
        ),
        ("foo  in\t (abc)", "foo in (abc)"),
        ("x notin\n (abc)", "x notin (abc)"),
        ("x  notin\t\t\t(abc,def)", "x notin (abc,def)"),
        ("x in (abc,def)", "x in (abc,def)"),
        ("x in (abc,)", "x in (,abc)"),
        ("x in ()", "x in ()"),
        ("x notin (abc,,def),bar,z in (),w", "bar,w,x notin (,abc,def),z in ()"),
        ("x,y in (a)", "x,y in (a)"),
        ("x=a", "x=a"),
        ("x>1", "x>1"),
        ("x<7", "x<7"),
        ("x=a,y!=b", "x=a,y!=b"),
        ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
        ("x notin ( )", "x notin ()"),
        ("x notin (, a)", "x notin (,a)"),
        ("a ", "a"),
        ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
        ("x==a", "x==a"),
        ("notin=in", "notin=in"),
        ("in in (in)", "in in (in)"),
        ("x in (b,a,b)", "x in (a,b)"),
        ("!x,!y", "!x,!y"),
        ("x in (a,,,)", "x in (,a)"),
        ("x in (,)", "x in ()"),
    ],
)
def test_set_selector_parser(text: str, canonical: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == canonical
    assert parse_label_selector(canonical) == selector


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "x=a||y=b",
            f'unable to parse requirement: invalid label value: "a||y": at key: "x": {VALUE_ERROR}',
        ),
        ("x,,y", "found ',', expected: identifier after ','"),
        (",x,y", "found ',', expected: !, identifier, or 'end of string'"),
        (
            "x nott in (y)",
            "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a in (xyz),", "found '', expected: identifier after ','"),
        ("a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'"),
        ("a in (xyz abc)", "unable to parse requirement: found 'abc', expected: ',' or ')'"),
        ("a notin(", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
        ("a (", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("(", "found '(', expected: !, identifier, or 'end of string'"),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        ("x==a==b", "found '==', expected: ',' or 'end of string'"),
        (
            "x<a",
            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "x>",
            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        ("x in", "unable to parse requirement: found '' expected: '('"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("x=(", "unable to parse requirement: found '(', expected: identifier"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        (
            "x exists",
            "unable to parse requirement: found 'exists', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a in (x,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("Key=Value,", "found '', expected: identifier after ','"),
        ("x in (,,)", "unable to parse requirement: found ')', expected: ',', or identifier"),
        ("a b=c", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ],
)
def test_parse_errors_carry_upstream_wording(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("key", "detail"),
    [
        ("a b", NAME_PART_ERROR),
        ("-a", NAME_PART_ERROR),
        ("a" * 64, "name part must be no more than 63 characters"),
        ("/a", "prefix part must be non-empty"),
        ("a/", "name part must be non-empty; " + NAME_PART_ERROR),
        (
            "Example.com/a",
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        ("a" * 254 + "/b", "prefix part must be no more than 253 characters"),
        (
            "a/b/c",
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') "
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        ),
    ],
)
def test_invalid_label_key_names_the_key(key: str, detail: str) -> None:
    with pytest.raises(SelectorError) as caught:
        new_requirement(key, EXISTS)
    assert str(caught.value) == f'invalid label key "{key}": {detail}'
    if " " not in key:
        with pytest.raises(SelectorError) as caught:
            parse_label_selector(f"{key}=v")
        assert (
            str(caught.value) == f'unable to parse requirement: invalid label key "{key}": {detail}'
        )


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("1234", True),
        ("a_b.c-d", True),
        ("A", True),
        ("a" * 63, True),
        ("a." * 126 + "a/b", True),
        ("_a", False),
        ("a_", False),
        ("a/b_", False),
        ("é", False),
        ("a\n", False),
    ],
)
def test_label_key_validation(key: str, valid: bool) -> None:
    if valid:
        assert str(new_requirement(key, EXISTS)) == key
    else:
        with pytest.raises(SelectorError, match="invalid label key"):
            new_requirement(key, EXISTS)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("", True),
        ("a", True),
        ("A-b_c.d", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-a", False),
        ("a-", False),
        ("a b", False),
        ("a/b", False),
    ],
)
def test_label_value_validation(value: str, valid: bool) -> None:
    if valid:
        assert new_requirement("k", EQUALS, [value]).values == (value,)
    else:
        with pytest.raises(SelectorError, match=r'invalid label value: ".*": at key: "k"'):
            new_requirement("k", EQUALS, [value])


def test_value_too_long_message_matches_upstream() -> None:
    # TestValidatedSelectorFromSet.
    value = "axahm2EJ8Phiephe2eixohbee9eGeiyees1thuozi1xoh0GiuH3diewi8iem7Nui"
    with pytest.raises(SelectorError) as caught:
        label_selector_from_set({"Key": value})
    assert str(caught.value) == (
        f'invalid label value: "{value}": at key: "Key": must be no more than 63 characters'
    )
    assert label_selector_from_set({"key": "val"}).requirements == (
        Requirement("key", EQUALS, ("val",)),
    )


# ---------------------------------------------------------------------------------------------
# Requirements: TestRequirementConstructor / TestToString / matching.


@pytest.mark.parametrize(
    ("key", "operator", "values", "ok"),
    [
        ("x", IN, [], False),
        ("x", NOT_IN, [], False),
        ("x", IN, ["foo"], True),
        ("x", NOT_IN, ["foo"], True),
        ("x", EXISTS, [], True),
        ("x", DOES_NOT_EXIST, [], True),
        ("1foo", IN, ["bar"], True),
        ("1234", IN, ["bar"], True),
        ("y", GREATER_THAN, ["1"], True),
        ("z", LESS_THAN, ["6"], True),
        ("foo", GREATER_THAN, ["bar"], False),
        ("barz", LESS_THAN, ["blah"], False),
        ("a" * 254, EXISTS, [], False),
        ("x", EXISTS, ["a"], False),
        ("x", EQUALS, ["a", "b"], False),
        ("x", GREATER_THAN, ["1", "2"], False),
        ("x", GREATER_THAN, ["9223372036854775808"], False),
        ("x", LESS_THAN, ["9223372036854775807"], True),
        ("x", LESS_THAN, ["-1"], False),  # "-1" is not a valid label value
        ("x", "~", ["a"], False),
    ],
)
def test_requirement_constructor(key: str, operator: str, values: list[str], ok: bool) -> None:
    if ok:
        assert new_requirement(key, operator, values).key == key
    else:
        with pytest.raises(SelectorError):
            new_requirement(key, operator, values)


@pytest.mark.parametrize(
    ("operator", "values", "message"),
    [
        (IN, [], "for 'in', 'notin' operators, values set can't be empty"),
        (EQUALS, [], "exact-match compatibility requires one single value"),
        (EXISTS, ["a"], "values set must be empty for exists and does not exist"),
        (GREATER_THAN, [], "for 'Gt', 'Lt' operators, exactly one value is required"),
        (LESS_THAN, ["x"], "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("~", ["a"], "operator '~' is not recognized"),
    ],
)
def test_requirement_constructor_messages(operator: str, values: list[str], message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        new_requirement("k", operator, values)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("requirements", "text"),
    [
        (
            [("x", IN, ["abc", "def"]), ("y", NOT_IN, ["jkl"]), ("z", EXISTS, [])],
            "x in (abc,def),y notin (jkl),z",
        ),
        (
            [("x", NOT_IN, ["abc", "def"]), ("y", NOT_EQUALS, ["jkl"]), ("z", DOES_NOT_EXIST, [])],
            "x notin (abc,def),y!=jkl,!z",
        ),
        (
            [("x", NOT_IN, ["abc"]), ("y", IN, ["jkl", "mno"]), ("z", NOT_IN, [""])],
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        (
            [
                ("x", EQUALS, ["abc"]),
                ("y", DOUBLE_EQUALS, ["jkl"]),
                ("z", NOT_EQUALS, ["a"]),
                ("z", EXISTS, []),
            ],
            "x=abc,y==jkl,z!=a,z",
        ),
        ([("x", GREATER_THAN, ["2"]), ("y", LESS_THAN, ["8"]), ("z", EXISTS, [])], "x>2,y<8,z"),
        ([("x", IN, ["def", "abc"])], "x in (abc,def)"),
        ([("x", IN, ["b", "a", "b"])], "x in (a,b,b)"),
    ],
)
def test_to_string(requirements: list[tuple[str, str, list[str]]], text: str) -> None:
    selector = LabelSelector(tuple(new_requirement(k, op, vals) for k, op, vals in requirements))
    assert str(selector) == text


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x", {"x": "z"}, True),
        ("!x", {"y": "z"}, True),
        ("x>1", {"x": "2"}, True),
        ("x<1", {"x": "0"}, True),
        ("x=z", {}, False),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("x", {"y": "z"}, False),
        ("!x", {"x": "z"}, False),
        ("x>1", {"x": "0"}, False),
        ("x<1", {"x": "2"}, False),
        ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
        ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
        ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
        ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
        # TestRequirementSelectorMatching
        ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
        ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
        ("x notin (),y", {"y": ""}, True),
        ("!x,y", {"y": ""}, True),
        ("x notin (),!y", {"y": ""}, False),
        ("x in ()", {"y": "baz"}, False),
        ("z>1", {"z": "2"}, True),
        ("z>1", {"z": "v2"}, False),
        # absent keys: != and notin match, = / in / > do not
        ("x!=a", {}, True),
        ("x notin (a)", {}, True),
        ("x in (a)", {}, False),
        ("x>0", {}, False),
        ("x=", {"x": ""}, True),
        ("x=", {}, False),
        ("x>1", {"x": "1_0"}, False),
        ("x>1", {"x": " 5"}, False),
        ("x>1", {"x": "+5"}, True),
        ("x<0", {"x": "-9223372036854775809"}, False),
    ],
)
def test_selector_matches(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


def test_everything_and_nothing() -> None:
    assert EVERYTHING.matches({"x": "y"})
    assert EVERYTHING.matches(None)
    assert EVERYTHING.empty()
    assert parse_label_selector("").empty()
    assert not NOTHING.matches({})
    assert not NOTHING.matches({"x": "y"})
    assert not NOTHING.empty()
    assert str(NOTHING) == ""
    assert not parse_label_selector("x").empty()


@pytest.mark.parametrize(
    ("selector", "key", "expected"),
    [
        ("key in (value)", "key", "value"),
        ("key in (value,value2)", "key", None),
        ("key in (value,value1),key2 in (value2)", "key2", "value2"),
        ("key=value", "key", "value"),
        ("key==value", "key", "value"),
        ("key!=value", "key", None),
        ("key in (value),key2 in (value2)", "key", "value"),
        ("key", "key", None),
        ("other=value", "key", None),
    ],
)
def test_requires_exact_match(selector: str, key: str, expected: str | None) -> None:
    assert parse_label_selector(selector).exact_value(key) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        # the first requirement (requirements are kept sorted by key) that has an exact value
        ("app=web,tier in (a,b)", ("app", "web")),
        ("app in (a,b),tier=db", ("tier", "db")),  # app has two values: no exact one
        ("app!=web,tier", None),
        ("", None),
    ],
)
def test_first_exact_label(selector: str, expected: tuple[str, str] | None) -> None:
    assert parse_label_selector(selector).first_exact_label() == expected


# ---------------------------------------------------------------------------------------------
# metav1.LabelSelector -> selector (LabelSelectorAsSelector).


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ({"matchLabels": {"app": "web"}}, "app=web"),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "app=web,tier in (a,b)",
        ),
        (
            {
                "matchLabels": {"z": "1", "a": "2"},
                "matchExpressions": [
                    {"key": "m", "operator": "NotIn", "values": ["x"]},
                    {"key": "b", "operator": "Exists"},
                    {"key": "c", "operator": "DoesNotExist", "values": []},
                ],
            },
            "a=2,b,!c,m notin (x),z=1",
        ),
        ({"matchLabels": {}, "matchExpressions": [{"key": "k", "operator": "Exists"}]}, "k"),
        ({"matchLabels": None, "matchExpressions": None}, ""),
    ],
)
def test_label_selector_from_dict(selector: dict[str, Any], text: str) -> None:
    assert str(label_selector_from_dict(selector)) == text


def test_duplicate_values_are_printed_like_upstream() -> None:
    # Requirement.String sorts values without de-duplicating them, so three empty values print
    # as "k in (,,)", which labels.Parse itself rejects -- exactly as upstream.
    selector = label_selector_from_dict(
        {"matchExpressions": [{"key": "k", "operator": "In", "values": ["", "", ""]}]}
    )
    assert str(selector) == "k in (,,)"
    assert selector.matches({"k": ""})
    with pytest.raises(SelectorError):
        parse_label_selector(str(selector))


def test_label_selector_from_dict_nil_and_empty() -> None:
    nothing = label_selector_from_dict(None)
    assert nothing == NOTHING
    assert not nothing.matches({})
    everything = label_selector_from_dict({})
    assert everything.empty()
    assert everything.matches({"anything": "at-all"})
    assert label_selector_from_dict({"matchLabels": {}, "matchExpressions": []}).empty()


def test_label_selector_from_dict_matches_pods() -> None:
    selector = label_selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.matches({"app": "web", "tier": "edge"})
    assert not selector.matches({"app": "web", "tier": "edge", "canary": "true"})
    assert not selector.matches({"app": "web", "tier": "backend"})
    assert not selector.matches({"tier": "edge"})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "k", "operator": "Equals", "values": ["a"]}]},
            '"Equals" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "in", "values": ["a"]}]},
            '"in" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "In"}]},
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "NotIn", "values": []}]},
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]},
            "values set must be empty for exists and does not exist",
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "DoesNotExist", "values": ["a"]}]},
            "values set must be empty for exists and does not exist",
        ),
        ({"matchLabels": {"bad key": "v"}}, f'invalid label key "bad key": {NAME_PART_ERROR}'),
        (
            {"matchLabels": {"k": "bad value"}},
            f'invalid label value: "bad value": at key: "k": {VALUE_ERROR}',
        ),
    ],
)
def test_label_selector_from_dict_errors(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        label_selector_from_dict(selector)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": ["app"]},
        {"matchLabels": {"app": 1}},
        {"matchExpressions": {"key": "a"}},
        {"matchExpressions": ["a"]},
        {"matchExpressions": [{"key": 1, "operator": "Exists"}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": "abc"}]},
    ],
)
def test_label_selector_from_dict_rejects_malformed_json(selector: dict[str, Any]) -> None:
    with pytest.raises(SelectorError):
        label_selector_from_dict(selector)


# ---------------------------------------------------------------------------------------------
# Label selector invariants.

_KEYS = ["a", "b", "app", "tier", "example.com/x", "in"]
_VALUES = ["", "1", "2", "10", "007", "x", "y", "web", "notin"]


@st.composite
def _requirements(draw: st.DrawFn) -> tuple[str, str, tuple[str, ...]]:
    key = draw(st.sampled_from(_KEYS))
    operator = draw(
        st.sampled_from(
            [
                IN,
                NOT_IN,
                EQUALS,
                DOUBLE_EQUALS,
                NOT_EQUALS,
                EXISTS,
                DOES_NOT_EXIST,
                GREATER_THAN,
                LESS_THAN,
            ]
        )
    )
    if operator in (IN, NOT_IN):
        # Empty entries in a rendered list ("(,,)") have their own grammar, tested in tables.
        values = tuple(draw(st.lists(st.sampled_from(_VALUES[1:]), min_size=1, max_size=4)))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        values = ()
    elif operator in (GREATER_THAN, LESS_THAN):
        values = (str(draw(st.integers(0, 15))),)
    else:
        values = (draw(st.sampled_from(_VALUES)),)
    return key, operator, values


def _render(requirement: tuple[str, str, tuple[str, ...]], space: str) -> str:
    key, operator, values = requirement
    if operator == EXISTS:
        return f"{space}{key}{space}"
    if operator == DOES_NOT_EXIST:
        return f"{space}!{space}{key}"
    if operator in (IN, NOT_IN):
        inner = f"{space},{space}".join(values)
        return f"{key} {operator}{space}({space}{inner}{space}){space}"
    symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(operator, operator)
    return f"{key}{space}{symbol}{space}{values[0]}{space}"


def _brute_force(
    requirements: list[tuple[str, str, tuple[str, ...]]], labels: Mapping[str, str]
) -> bool:
    """The documented meaning of each operator, evaluated directly."""
    for key, operator, values in requirements:
        present = key in labels
        value = labels.get(key)
        if operator in (IN, EQUALS, DOUBLE_EQUALS):
            ok = present and value in values
        elif operator in (NOT_IN, NOT_EQUALS):
            ok = not present or value not in values
        elif operator == EXISTS:
            ok = present
        elif operator == DOES_NOT_EXIST:
            ok = not present
        else:
            number = int(value) if value is not None and _INTEGER.fullmatch(value) else None
            bound = int(values[0])
            ok = number is not None and (
                number > bound if operator == GREATER_THAN else number < bound
            )
        if not ok:
            return False
    return True


_INTEGER = re.compile(r"[+-]?[0-9]+")
_LABELS = st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(_VALUES), max_size=len(_KEYS))


@settings(max_examples=300, deadline=None)
@given(
    requirements=st.lists(_requirements(), max_size=5),
    space=st.sampled_from(["", " ", "  ", "\t", "\n "]),
    labels=st.lists(_LABELS, min_size=1, max_size=6),
)
def test_matches_agrees_with_brute_force(
    requirements: list[tuple[str, str, tuple[str, ...]]], space: str, labels: list[dict[str, str]]
) -> None:
    text = ",".join(_render(requirement, space) for requirement in requirements)
    selector = parse_label_selector(text)
    for candidate in labels:
        assert selector.matches(candidate) is _brute_force(requirements, candidate), (
            text,
            candidate,
        )


@settings(max_examples=300, deadline=None)
@given(requirements=st.lists(_requirements(), max_size=5), space=st.sampled_from(["", " ", "\t"]))
def test_canonical_string_round_trips(
    requirements: list[tuple[str, str, tuple[str, ...]]], space: str
) -> None:
    selector = parse_label_selector(",".join(_render(r, space) for r in requirements))
    canonical = str(selector)
    assert parse_label_selector(canonical) == selector
    assert str(parse_label_selector(canonical)) == canonical
    keys = [requirement.key for requirement in selector.requirements]
    assert keys == sorted(keys)


@settings(max_examples=200, deadline=None)
@given(
    match_labels=st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(_VALUES), max_size=3),
    expressions=st.lists(
        st.tuples(
            st.sampled_from(_KEYS),
            st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
            st.lists(st.sampled_from(_VALUES), min_size=1, max_size=3, unique=True),
        ),
        max_size=3,
    ),
    labels=_LABELS,
)
def test_dict_selector_string_selects_the_same(
    match_labels: dict[str, str],
    expressions: list[tuple[str, str, list[str]]],
    labels: dict[str, str],
) -> None:
    exprs = [
        {"key": k, "operator": op, "values": vals if op in ("In", "NotIn") else []}
        for k, op, vals in expressions
    ]
    selector = label_selector_from_dict({"matchLabels": match_labels, "matchExpressions": exprs})
    # The canonical text (what a Scale's status.selector carries) selects the same objects.
    assert parse_label_selector(str(selector)).matches(labels) is selector.matches(labels)
