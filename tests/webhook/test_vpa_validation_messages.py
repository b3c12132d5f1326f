"""Go's printing of bad values in field errors (webhook/field_errors.py).

Expected strings are what Go prints: ``strconv.Quote`` for ``%q`` and ``%v`` of a float64
(``%g`` with the shortest precision, exponent form below 1e-4 and from 1e6 on), plus
apimachinery's error bodies (values hidden for Required/Forbidden/Internal errors).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.webhook.field_errors import (
    FieldError,
    forbidden,
    go_float,
    go_json_string,
    go_quote,
    internal_error,
    invalid,
    not_supported,
    required,
    too_many,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bad", '"bad"'),
        ("", '""'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("tab\tnew\nline", '"tab\\tnew\\nline"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("héllo ✓", '"héllo ✓"'),
        ("\u200b", '"\\u200b"'),
        ("\U000e0001", '"\\U000e0001"'),
    ],
)
def test_go_quote(text: str, expected: str) -> None:
    assert go_quote(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (-1.0, "-1"),
        (0.5, "0.5"),
        (0.999, "0.999"),
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (123456.0, "123456"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-0.00012345, "-0.00012345"),
        (1e21, "1e+21"),
        (9.223372036854776e15, "9.223372036854776e+15"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_go_float(value: float, expected: str) -> None:
    assert go_float(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_float_round_trips(value: float) -> None:
    assert float(go_float(value)) == value


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (required("spec.a"), "spec.a: Required value"),
        (required("spec.a", "needed"), "spec.a: Required value: needed"),
        (forbidden("spec.a", "no"), "spec.a: Forbidden: no"),
        (invalid("spec.a", "0", "must be positive"), "spec.a: Invalid value: 0: must be positive"),
        (
            not_supported("spec.a", '"x"', ("a", "b")),
            'spec.a: Unsupported value: "x": supported values: "a", "b"',
        ),
        (not_supported("spec.a", '"x"', ()), 'spec.a: Unsupported value: "x"'),
        (too_many("spec.a", 3, 2), "spec.a: Too many: 3: must have at most 2 items"),
        (too_many("spec.a", 2, 1), "spec.a: Too many: 2: must have at most 1 item"),
        (internal_error(".", "boom"), ".: Internal error: boom"),
    ],
)
def test_error_texts(error: FieldError, message: str) -> None:
    assert error.message() == message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("broken", '"broken"'),
        ('say "hi" \\', '"say \\"hi\\" \\\\"'),
        ("a<b>&c", '"a\\u003cb\\u003e\\u0026c"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\x00\x1f\x7f", '"\\u0000\\u001f\x7f"'),
        ("héllo ✓ \u200b", '"héllo ✓ \u200b"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("\ud800", '"\\ufffd"'),
    ],
)
def test_go_json_string(text: str, expected: str) -> None:
    """``json.Marshal`` of a string: HTML characters, line/paragraph separators and control
    characters escaped, the rest (DEL and non-ASCII included) as it is."""
    assert go_json_string(text) == expected
