"""Node-group size annotations are parsed as upstream's ``strconv.Atoi`` parses them.

Upstream (``cloudprovider/clusterapi/clusterapi_utils.go``, ``minSize``/``maxSize``) reads
``cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size`` with ``strconv.Atoi``: on a
64-bit build that is an optional sign and ASCII digits, within int64 — everything else is an
error, and the resource is not a node group. Python's ``int()`` accepts far more (whitespace,
underscores, Unicode digits, any size), so a value Go rejects must be rejected here too.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.base.go_strconv import INT64_MAX, INT64_MIN, GoAtoiError, go_atoi
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    CAPACITY_PREFIX,
    MAX_SIZE_ANNOTATION,
    MIN_SIZE_ANNOTATION,
    AnnotationError,
    scale_from_zero,
    scaling_bounds,
)
from kubescale.objects.machine_deployment import MachineDeployment


def resource(min_size: str | None, max_size: str | None, **extra: str) -> MachineDeployment:
    annotations = dict(extra)
    if min_size is not None:
        annotations[MIN_SIZE_ANNOTATION] = min_size
    if max_size is not None:
        annotations[MAX_SIZE_ANNOTATION] = max_size
    return {"kind": "MachineDeployment", "metadata": {"annotations": annotations}}


# What strconv.Atoi answers on 64-bit Go, worked out from strconv/atoi.go: the fast path for
# 0 < len < 19 (sign, then digits '0'-'9' only), else ParseInt(s, 10, 0) = ParseInt(s, 10, 64):
# base 10 given, so no prefix and no underscores; |value| checked against 1<<63.
ATOI_TABLE = [
    ("0", 0),
    ("7", 7),
    ("+5", 5),  # the sign '+' is allowed
    ("-3", -3),
    ("007", 7),  # leading zeros are digits
    ("9223372036854775807", INT64_MAX),  # 2^63 − 1: the largest int64
    ("-9223372036854775808", INT64_MIN),  # −2^63: the smallest
    ("+0009223372036854775807", INT64_MAX),  # 23 chars: slow path, still in range
]
ATOI_REJECTED = [
    ("99999999999999999999999", "value out of range"),  # the value: ≈ 10^23 > 2^63 − 1
    ("9223372036854775808", "value out of range"),  # 2^63: one past the largest
    ("-9223372036854775809", "value out of range"),  # −2^63 − 1: one below the smallest
    ("", "invalid syntax"),
    ("+", "invalid syntax"),  # a sign and no digits
    ("-", "invalid syntax"),
    (" 12", "invalid syntax"),  # int(" 12") == 12
    ("12 ", "invalid syntax"),
    ("12\n", "invalid syntax"),  # a regex "$" would let a trailing newline through
    ("1_000", "invalid syntax"),  # int("1_000") == 1000
    ("\u0661\u0662", "invalid syntax"),  # Arabic-Indic "12": int() accepts it
    ("\uff11", "invalid syntax"),  # fullwidth "1"
    ("0x10", "invalid syntax"),  # no base prefix in base 10
    ("1e3", "invalid syntax"),
    ("1.0", "invalid syntax"),
    ("--1", "invalid syntax"),
    ("+-1", "invalid syntax"),
]


@pytest.mark.parametrize(("text", "expected"), ATOI_TABLE)
def test_go_atoi_accepts(text: str, expected: int) -> None:
    assert go_atoi(text) == expected


@pytest.mark.parametrize(("text", "reason"), ATOI_REJECTED)
def test_go_atoi_rejects(text: str, reason: str) -> None:
    with pytest.raises(GoAtoiError) as caught:
        go_atoi(text)
    assert caught.value.reason == reason


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), st.sampled_from(["", "+", "0"]))
def test_every_int64_round_trips(value: int, prefix: str) -> None:
    # Go's formatting of an int64 (and with an explicit '+' or leading zeros on a non-negative
    # value) parses back to it.
    text = str(value) if value < 0 else prefix + str(value)
    assert go_atoi(text) == value


@given(st.integers(min_value=0, max_value=10**40), st.booleans())
def test_every_value_outside_int64_is_out_of_range(excess: int, negative: bool) -> None:
    # one past either end of int64, and beyond
    value = INT64_MIN - 1 - excess if negative else INT64_MAX + 1 + excess
    with pytest.raises(GoAtoiError) as caught:
        go_atoi(str(value))
    assert caught.value.reason == "value out of range"


@given(st.text(max_size=25))
def test_anything_but_sign_and_ascii_digits_is_a_syntax_error(text: str) -> None:
    body = text[1:] if text[:1] in ("+", "-") else text
    well_formed = bool(body) and all(c in string.digits for c in body)
    if well_formed:
        assert go_atoi(text) == int(text)  # ASCII digits: int() agrees on those
    else:
        with pytest.raises(GoAtoiError) as caught:
            go_atoi(text)
        assert caught.value.reason == "invalid syntax"


# ---- the annotations --------------------------------------------------------------------------


def test_sizes_within_int64_are_a_node_group() -> None:
    assert scaling_bounds(resource("+1", "9223372036854775807")) == (1, INT64_MAX)
    assert scaling_bounds(resource(None, "5")) == (0, 5)  # missing min counts as 0


@pytest.mark.parametrize(
    ("min_size", "max_size", "message"),
    [
        # the issue: 10^23 became a valid max size through int()
        (
            "1",
            "99999999999999999999999",
            f"annotation {MAX_SIZE_ANNOTATION}='99999999999999999999999' is not an integer: "
            "value out of range",
        ),
        (" 1", "5", f"annotation {MIN_SIZE_ANNOTATION}=' 1' is not an integer"),
        ("1", "1_000", f"annotation {MAX_SIZE_ANNOTATION}='1_000' is not an integer"),
        ("1", "5\n", f"annotation {MAX_SIZE_ANNOTATION}='5\\n' is not an integer"),
        ("\u0661", "5", f"annotation {MIN_SIZE_ANNOTATION}='\u0661' is not an integer"),
    ],
)
def test_sizes_go_rejects_are_an_error_naming_the_annotation(
    min_size: str, max_size: str, message: str
) -> None:
    with pytest.raises(AnnotationError) as caught:
        scaling_bounds(resource(min_size, max_size))
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)  # one line for the event


@pytest.mark.parametrize("value", ["99999999999999999999999", " 110", "1_10"])
def test_integer_capacity_annotations_go_rejects_are_an_error(value: str) -> None:
    extra = {
        CAPACITY_PREFIX + "cpu": "2",
        CAPACITY_PREFIX + "memory": "8Gi",
        CAPACITY_PREFIX + "maxPods": value,
    }
    with pytest.raises(AnnotationError, match=r"maxPods="):
        scale_from_zero(resource("0", "5", **extra))
