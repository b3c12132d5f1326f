"""decode_json: orjson where it can, the standard library's result and errors otherwise."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.base.json_decoding import decode_json

# Each body orjson refuses (checked below) but json.loads reads: decode_json must read it too.
STDLIB_ONLY = [
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b'{"a": "\\ud800"}',  # a lone surrogate escape
    b'\xef\xbb\xbf{"a": 1}',  # UTF-8 byte-order mark
    '{"a": 1}'.encode("utf-16"),
]


@pytest.mark.parametrize("body", STDLIB_ONLY)
def test_what_orjson_refuses_is_read_as_the_standard_library_reads_it(body: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body)
    got, want = decode_json(body), json.loads(body)
    if isinstance(want.get("a"), float) and math.isnan(want["a"]):
        assert math.isnan(got["a"])
    else:
        assert got == want


def test_an_integer_beyond_64_bits_reads_as_a_float_as_kube_apiserver_reads_it() -> None:
    # sigs.k8s.io/json: int64, "falling back to float64 on any parse or overflow error"
    assert decode_json(b'{"n": 123456789012345678901234567890}') == {"n": 1.2345678901234568e29}
    assert decode_json(b'{"n": 9223372036854775807}') == {"n": 2**63 - 1}  # exact: int64


@pytest.mark.parametrize("body", [b"", b"{", b'{"a": 1,}', b"\xff\xfe\x00", b'{"a": 1} x'])
def test_a_broken_body_raises_the_standard_library_error(body: bytes) -> None:
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)) as stdlib:
        json.loads(body)
    with pytest.raises(stdlib.type, match=str(stdlib.value)[:10]):
        decode_json(body)


_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(_json)
def test_the_same_value_as_the_standard_library(value: Any) -> None:
    body = json.dumps(value).encode()
    assert decode_json(body) == json.loads(body)
