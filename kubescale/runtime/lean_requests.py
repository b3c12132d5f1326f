"""The TLS server's lean lane: one exact request shape answered below aiohttp's ``web`` layer.

Why: kube-apiserver calls the admission webhook on every pod create, and a profile of one core
under load showed aiohttp's request machinery (request and response objects, routing,
middlewares, the response writer) at about half of a webhook request's CPU time and the
webhook's decision at an eighth. A route registered here (:meth:`LeanRoutes.add_post`) is
answered by :class:`~kubescale.runtime.guarded_connections.GuardedRequestHandler` straight from
the bytes received, when — and only when — the request has exactly this shape:

* request line ``POST <path>[?<query>] HTTP/1.1`` with ``<path>`` a registered path, byte for
  byte (no percent escapes); the query is ignored, as aiohttp's router ignores it
  (kube-apiserver adds ``?timeout=10s``);
* header lines ``name: value`` with a token ``name`` and a ``value`` free of control
  characters (tab allowed), each line at most 8,190 bytes (aiohttp's limit); no folded lines;
* exactly one ``Content-Length`` of digits, at most ``SMALL_BODY_BYTES`` (64 KiB: every such
  body is covered by the connection cap, :mod:`kubescale.runtime.server_limits`);
* no ``Transfer-Encoding``, ``Expect`` or ``Upgrade`` header; ``Connection`` may say
  ``keep-alive`` or ``close``;
* ``Content-Type`` whose media type (before ``;``, case-insensitive) is the route's.

Anything else — another path or method, HTTP/1.0, a chunked or larger body, a header line this
recogniser does not accept — is handed, bytes untouched, to aiohttp's parser (llhttp) and
application, and the connection stays with aiohttp from then on: the lean lane only ever takes
requests that aiohttp would parse the same way, so it cannot disagree with aiohttp about where
a request ends. Answers carry the headers aiohttp's ``web.Response`` would (``Content-Type``,
``Content-Length``, ``Date``, ``Server``; ``Connection: close`` when the client asked).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from aiohttp.http import SERVER_SOFTWARE

from kubescale.runtime.server_limits import SMALL_BODY_BYTES

__all__ = [
    "MAX_LINE_BYTES",
    "LeanAnswer",
    "LeanHandler",
    "LeanRequest",
    "LeanRoutes",
    "encode_answer",
]

MAX_LINE_BYTES: Final = 8190
"""aiohttp's ``max_line_size`` and ``max_field_size``: a longer line goes to aiohttp (its 400)."""

_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE_CONTROL: Final = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_TARGET: Final = re.compile(rb"(/[!-~]*)")
"""A request target in origin form: ``/`` then visible ASCII (no spaces or controls)."""
_DIGITS: Final = re.compile(rb"[0-9]{1,7}")
_NOT_LEAN_HEADERS: Final = frozenset({b"transfer-encoding", b"expect", b"upgrade"})
_REASONS: Final = {200: "OK", 500: "Internal Server Error"}
_SEEN_HEADS: Final = 1024
_SEEN_MAX_AGE: Final = 3600.0
_SEEN_HEAD_BYTES: Final = 4096
"""Longer heads are not remembered, nor taken: the cache holds at most 4 MiB of heads."""


@dataclass(frozen=True, slots=True)
class LeanAnswer:
    """What a lean handler answers: status, media type (sent with ``charset=utf-8``) and body."""

    body: bytes
    content_type: str = "application/json"
    status: int = 200


LeanHandler = Callable[[bytes], "LeanAnswer | Awaitable[LeanAnswer]"]
"""A lean route's handler: the request body in, the answer out — at once, or awaited when the
answer has to wait for something (the connection reads nothing more meanwhile)."""


@dataclass(frozen=True, slots=True)
class LeanRequest:
    """A request head the lean lane takes: whose handler, how long its body is, and whether
    the client asked to close the connection after the answer."""

    handler: LeanHandler
    content_length: int
    close: bool


class LeanRoutes:
    """The lean lane's routes: ``POST`` paths with one media type each (module docstring)."""

    def __init__(self, *, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._routes: dict[bytes, tuple[LeanHandler, bytes]] = {}
        self._seen: dict[bytes, LeanRequest | None] = {}
        """What :meth:`match` answered, by head: a client sends the same head again and again
        (kube-apiserver's differ only in ``Content-Length``); at most ``_SEEN_HEADS``, all
        forgotten when full and every hour."""
        self._seen_since = now()

    def __bool__(self) -> bool:
        return bool(self._routes)

    def add_post(self, path: str, handler: LeanHandler, *, content_type: str) -> None:
        """Answer ``POST path`` of ``content_type`` with ``handler`` in the lean lane. The same
        route must also be on the aiohttp application: requests of any other shape go there."""
        raw = path.encode("ascii")
        if not _TARGET.fullmatch(raw) or b"?" in raw or b"%" in raw:
            raise ValueError(f"lean route path: {path!r} is not a plain absolute path")
        if raw in self._routes:
            raise ValueError(f"lean route path: {path!r} is registered already")
        self._routes[raw] = (handler, content_type.lower().encode("ascii"))
        self._seen.clear()

    def match(self, head: bytes) -> LeanRequest | None:
        """The lean request ``head`` (the bytes before the blank line) is, or ``None`` when it
        is not exactly the lean shape (then aiohttp gets it)."""
        seen = self._seen
        now = self._now()
        if now - self._seen_since >= _SEEN_MAX_AGE:
            seen.clear()
            self._seen_since = now
        if head in seen:
            return seen[head]
        request = self._match(head) if len(head) <= _SEEN_HEAD_BYTES else None
        if len(seen) >= _SEEN_HEADS:
            seen.clear()
        seen[head] = request
        return request

    def _match(self, head: bytes) -> LeanRequest | None:
        lines = head.split(b"\r\n")
        method, space, rest = lines[0].partition(b" ")
        target, space2, version = rest.partition(b" ")
        if method != b"POST" or version != b"HTTP/1.1" or not space or not space2:
            return None
        if len(lines[0]) > MAX_LINE_BYTES or not _TARGET.fullmatch(target):
            return None
        path = target.partition(b"?")[0]
        route = self._routes.get(path)
        if route is None:
            return None
        handler, media_type = route
        length: int | None = None
        close = False
        content_type_ok = False
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or len(line) > MAX_LINE_BYTES or not _TOKEN.fullmatch(name):
                return None  # also a folded line (it starts with a space) and an empty one
            value = value.strip(b" \t")
            if _VALUE_CONTROL.search(value):
                return None
            name = name.lower()
            if name == b"content-length":
                if length is not None or not _DIGITS.fullmatch(value):
                    return None
                length = int(value)
            elif name == b"content-type":
                if content_type_ok:
                    return None
                content_type_ok = value.partition(b";")[0].strip(b" \t").lower() == media_type
                if not content_type_ok:
                    return None
            elif name == b"connection":
                tokens = {token.strip(b" \t").lower() for token in value.split(b",")}
                if not tokens <= {b"keep-alive", b"close"}:
                    return None
                close = b"close" in tokens
            elif name in _NOT_LEAN_HEADERS:
                return None
        if length is None or length > SMALL_BODY_BYTES or not content_type_ok:
            return None
        return LeanRequest(handler=handler, content_length=length, close=close)


class _HttpDate:
    """The ``Date`` header's value, formatted once per second."""

    __slots__ = ("_second", "_value")

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._value = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(second)).encode(
                "ascii"
            )
        return self._value


_DATE: Final = _HttpDate()
_SERVER: Final = SERVER_SOFTWARE.encode("ascii")


def encode_answer(answer: LeanAnswer, *, close: bool) -> bytes:
    """The HTTP/1.1 response for ``answer``: the header lines aiohttp's ``web.Response`` sends
    for such a body, in its order."""
    status = answer.status
    head = b"HTTP/1.1 %d %s\r\nContent-Type: %s; charset=utf-8\r\nContent-Length: %d\r\n" % (
        status,
        _REASONS.get(status, "Unknown").encode("ascii"),
        answer.content_type.encode("ascii"),
        len(answer.body),
    )
    tail = b"Connection: close\r\n\r\n" if close else b"\r\n"
    return head + b"Date: " + _DATE.now() + b"\r\nServer: " + _SERVER + b"\r\n" + tail + answer.body
