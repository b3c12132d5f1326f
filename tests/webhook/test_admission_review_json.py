"""An AdmissionReview body is read exactly as ``json.loads`` reads it (issue 30 item 3).

orjson reads an integer outside ``[-2**63, 2**64)`` as a float instead of raising (checked on
orjson 3.13: ``orjson.loads(b"18446744073709551616")`` is ``1.8446744073709552e+19``), so
``decode_json`` must not take orjson's answer for such a body: a table at orjson's edges, then
a property over integers of any size placed in a review's pod.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.webhook.admission_reviews import ReviewRequest, decode_json, parse_review

U64_MAX = 2**64 - 1  # 18446744073709551615: orjson's largest exact integer
I64_MIN = -(2**63)  # -9223372036854775808: its smallest


@pytest.mark.parametrize(
    "body",
    [
        b"18446744073709551615",  # 2**64 - 1: orjson exact, an int
        b"18446744073709551616",  # 2**64: orjson 1.8446744073709552e+19, a float
        b"-9223372036854775808",  # -2**63: orjson exact
        b"-9223372036854775809",  # -2**63 - 1: orjson a float
        b'{"memory": 123456789012345678901234567890}',  # 10**29-ish: orjson a float
        b'{"memory": 1e400}',  # orjson refuses (infinity): json.loads gives inf
        b'{"uid": "1234567890123456789012"}',  # 22 digits in a string
        b'{"x": 0.12345678901234567890123}',  # a long fraction: the same float either way
        b'{"a": [1, -2, 3.5, null, true, "\\u00e9"]}',
    ],
)
def test_decode_json_reads_each_body_as_json_loads(body: bytes) -> None:
    got, expected = decode_json(body), json.loads(body)
    assert got == expected
    assert repr(got) == repr(expected)  # 18446744073709551616, not 1.8446744073709552e+19


@given(value=st.integers() | st.sampled_from([U64_MAX, U64_MAX + 1, I64_MIN, I64_MIN - 1]))
def test_an_integer_of_any_size_in_a_review_keeps_its_value(value: int) -> None:
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "object": {"spec": {"terminationGracePeriodSeconds": value}},
            },
        }
    ).encode()
    parsed = parse_review(body)
    assert isinstance(parsed, ReviewRequest), parsed
    assert parsed.object == {"spec": {"terminationGracePeriodSeconds": value}}
    assert repr(parsed.object) == repr(json.loads(body)["request"]["object"])  # int, not float
