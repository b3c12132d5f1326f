"""The lean lane's recogniser (:mod:`kubescale.runtime.lean_requests`): which request heads it
takes, which it leaves to aiohttp, and the answer bytes it writes."""

from __future__ import annotations

import re

import pytest

from kubescale.runtime.lean_requests import LeanAnswer, LeanRoutes, encode_answer


def _handler(body: bytes) -> LeanAnswer:
    return LeanAnswer(body=body)


@pytest.fixture
def routes() -> LeanRoutes:
    routes = LeanRoutes()
    routes.add_post("/", _handler, content_type="application/json")
    return routes


OK = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 12"

# (head, expected content length or None when aiohttp gets it, close, why)
CASES = [
    (OK, 12, False, "kube-apiserver's shape"),
    (OK.replace(b"POST / ", b"POST /?timeout=10s "), 12, False, "the query is ignored"),
    (OK + b"\r\nConnection: close", 12, True, "the client closes after the answer"),
    (OK + b"\r\nConnection: Keep-Alive", 12, False, "keep-alive, any case"),
    (OK.replace(b"application/json", b"Application/JSON; charset=utf-8"), 12, False,
     "media type case-insensitive, parameters ignored"),
    (OK.replace(b"Content-Length: 12", b"content-length:12   "), 12, False,
     "header names case-insensitive, optional whitespace"),
    (OK.replace(b"12", b"65536"), 65536, False, "64 KiB body: the largest taken"),
    (OK + b"\r\nX-Obs: caf\xc3\xa9\tok", 12, False, "obs-text and a tab in a value"),
    # to aiohttp
    (OK.replace(b"12", b"65537"), None, False, "body over 64 KiB: the body budget's"),
    (OK.replace(b"POST / ", b"GET / "), None, False, "another method"),
    (OK.replace(b"POST / ", b"POST /x "), None, False, "another path"),
    (OK.replace(b"POST / ", b"POST /%2F "), None, False, "a percent escape"),
    (OK.replace(b"HTTP/1.1", b"HTTP/1.0"), None, False, "HTTP/1.0"),
    (OK.replace(b"POST / ", b"POST  / "), None, False, "two spaces in the request line"),
    (OK.replace(b"Content-Length: 12", b"Transfer-Encoding: chunked"), None, False, "chunked"),
    (OK + b"\r\nTransfer-Encoding: chunked", None, False, "chunked and a length (smuggling)"),
    (OK + b"\r\nContent-Length: 12", None, False, "two lengths"),
    (OK.replace(b"12", b"+12"), None, False, "a signed length"),
    (OK.replace(b"12", b"0x1"), None, False, "a hex length"),
    (OK.replace(b"Content-Length: 12", b"Content-Length: 12, 12"), None, False, "a list"),
    (OK.replace(b"\r\nContent-Length: 12", b""), None, False, "no length"),
    (OK + b"\r\nExpect: 100-continue", None, False, "Expect"),
    (OK + b"\r\nUpgrade: h2c\r\nConnection: Upgrade", None, False, "Upgrade"),
    (OK + b"\r\nConnection: upgrade", None, False, "a connection token not handled here"),
    (OK + b"\r\n X-Folded: yes", None, False, "a folded line"),
    (OK + b"\r\nX Bad: 1", None, False, "a space in a header name"),
    (OK + b"\r\nX-Bad : 1", None, False, "a space before the colon"),
    (OK + b"\r\nX-Bad: a\x00b", None, False, "a NUL in a value"),
    (OK + b"\r\nX-Bad: a\rb", None, False, "a bare CR in a value"),
    (OK + b"\r\nX-Bad: a\nb", None, False, "a bare LF in a value"),
    (OK + b"\r\nNoColon", None, False, "a line without a colon"),
    (OK + b"\r\n\r\nX: 1", None, False, "an empty line inside the head"),
    (OK + b"\r\nX-Pad: " + b"a" * 8184, None, False, "a line over 8,190 bytes"),
    (OK.replace(b"application/json", b"text/plain"), None, False, "another media type"),
    (OK.replace(b"application/json", b"application/json5"), None, False, "a longer type"),
    (OK + b"\r\nContent-Type: application/json", None, False, "two content types"),
    (OK.replace(b"\r\nContent-Type: application/json", b""), None, False, "no content type"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("head", "length", "close"),
    [case[:3] for case in CASES],
    ids=[case[3] for case in CASES],
)
def test_which_heads_the_lean_lane_takes(
    routes: LeanRoutes, head: bytes, length: int | None, close: bool
) -> None:
    request = routes.match(head)
    if length is None:
        assert request is None
        return
    assert request is not None
    assert request.content_length == length
    assert request.close is close
    assert request.handler is _handler


def test_an_empty_set_of_routes_is_false_and_matches_nothing() -> None:
    routes = LeanRoutes()
    assert not routes
    assert routes.match(OK) is None


@pytest.mark.parametrize("path", ["", "x", "/a?b", "/a%20b", "/a b"])
def test_a_route_path_must_be_plain(path: str) -> None:
    with pytest.raises(ValueError, match="lean route path"):
        LeanRoutes().add_post(path, _handler, content_type="application/json")


def test_a_path_is_registered_once(routes: LeanRoutes) -> None:
    with pytest.raises(ValueError, match="registered already"):
        routes.add_post("/", _handler, content_type="application/json")


def test_the_answer_has_aiohttps_header_lines_in_its_order() -> None:
    # aiohttp 3.14's web.Response(body=..., content_type="application/json", charset="utf-8")
    # writes Content-Type, Content-Length, Date, Server, then Connection when closing.
    answer = encode_answer(LeanAnswer(body=b'{"a":1}'), close=False)
    assert re.fullmatch(
        rb"HTTP/1\.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
        rb"Content-Length: 7\r\nDate: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\r\n"
        rb"Server: Python/3\.\d+ aiohttp/[\d.]+\r\n\r\n\{\"a\":1\}",
        answer,
    ), answer
    closing = encode_answer(
        LeanAnswer(body=b"no", content_type="text/plain", status=500), close=True
    )
    assert closing.startswith(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain;")
    assert closing.endswith(b"\r\nConnection: close\r\n\r\nno")


def test_a_head_is_matched_once_then_remembered(routes: LeanRoutes) -> None:
    first = routes.match(OK)
    assert first is not None
    assert routes.match(OK) is first  # remembered, not parsed again
    assert routes.match(OK + b"\r\nX-Pad: " + b"a" * 4096) is None  # over 4 KiB: aiohttp's
    routes.add_post("/other", _handler, content_type="application/json")
    assert routes.match(OK) is not first  # a new route forgets what was seen
    assert routes.match(OK) == first


def test_remembered_heads_are_forgotten_after_an_hour() -> None:
    clock = [0.0]
    routes = LeanRoutes(now=lambda: clock[0])
    routes.add_post("/", _handler, content_type="application/json")
    first = routes.match(OK)
    clock[0] = 3599.0
    assert routes.match(OK) is first
    clock[0] = 3600.0
    again = routes.match(OK)
    assert again is not first  # parsed anew
    assert again == first
