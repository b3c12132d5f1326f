"""Per-connection guards of the TLS port: deadlines, a header-size cap, and the lean lane.

aiohttp reads requests with no deadline of its own (its keep-alive timer only closes a
connection that has sent nothing of a next request). :class:`GuardedRequestHandler` — aiohttp's
per-connection protocol, which the listener (:mod:`kubescale.runtime.guarded_listener`) gives
every accepted connection — puts Go ``http.Server``'s deadlines on the connection instead
(:class:`~kubescale.runtime.server_limits.ServerLimits`): a deadline for what the connection is
doing: reading a request's headers (``read_header_timeout`` from the request's first byte — for
the first request, from the end of the TLS handshake), reading its body (``read_timeout`` from
that same first byte), or waiting for the next request (``idle_timeout``). A deadline that
passes closes the connection at once (``abort``: no TLS close_notify to wait for) — unless the
request's body has been read whole and its handler is running, which is not the client's doing.
Header bytes are counted as they arrive; past ``max_header_bytes`` the connection is answered
``431`` and closed before a parser buffers more.

**The lean lane.** While the application has lean routes
(:mod:`kubescale.runtime.lean_requests`), a connection starts in it: its bytes are buffered
here, and each request of the lean shape is answered by its route's handler and written to the
transport directly — no aiohttp request, response, router or middleware. The first request of
any other shape is handed to aiohttp's parser with every byte received since that request's
first byte, and the connection stays with aiohttp from then on (its header counting starts
again from that first byte; the deadlines are the same). Requests are answered in order: while
a handler's answer is awaited (the webhook waiting for a controller to reach the cache) or the
transport's write buffer is full, nothing more is read.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import socket
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web

from kubescale.runtime.lean_requests import (
    LeanAnswer,
    LeanRequest,
    LeanRoutes,
    encode_answer,
)
from kubescale.runtime.server_limits import ServerLimits

__all__ = ["CLOSE_REASONS", "ConnectionSlot", "GuardedRequestHandler", "Phase"]

log = logging.getLogger("kubescale.https")

_HEADER_END: Final = b"\r\n\r\n"
_TOO_LARGE: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 36\r\n\r\n"
    b"431 Request Header Fields Too Large\n"
)
CLOSE_REASONS: Final = (
    "read-header-timeout",
    "read-timeout",
    "idle-timeout",
    "header-too-large",
    "evicted",
    "refused",
    "handshake",
)

_INTERNAL_ERROR: Final = LeanAnswer(
    body=b"500 Internal Server Error\n", content_type="text/plain", status=500
)


class Phase(enum.Enum):
    """What a connection is doing."""

    HANDSHAKE = "handshake"
    IDLE = "idle"
    """Waiting for a request (the first, or the next one on a kept-alive connection)."""
    HEADERS = "headers"
    BODY = "body"
    """Headers read: the body is being read, or the handler is running."""


class ConnectionSlot:
    """One accepted connection, from ``accept`` until it is closed."""

    __slots__ = (
        "accepted",
        "conn",
        "handler",
        "handshake",
        "loop_owns_socket",
        "peer",
        "phase",
        "released",
        "since",
        "transport",
    )

    def __init__(self, now: float, conn: socket.socket, peer: str) -> None:
        self.accepted = now
        self.conn = conn
        self.peer = peer
        """The client's IP address."""
        self.transport: asyncio.Transport | None = None
        """The TCP transport, once the TLS handshake has begun."""
        self.phase = Phase.HANDSHAKE
        self.since = now
        """When the current request (or the wait for one, or the handshake) began."""
        self.handler: GuardedRequestHandler | None = None
        self.handshake: asyncio.Task[None] | None = None
        self.loop_owns_socket = False
        """uvloop's TLS transport holds the socket (it closes it; we must not)."""
        self.released = False

    def eviction_rank(self, *, now: float, grace: float) -> tuple[int, float] | None:
        """Which connection makes room first: lowest rank, then (in the listener) the client
        address holding the most connections, then longest waiting; ``None`` for a connection
        whose handler is running with its whole request (not the client's doing).

        A connection that has never completed a request is presumed honest for ``grace``
        seconds from its accept — a legitimate client completes its TLS handshake and sends
        its request well within that —, then it is what an attacker holds. So: 0: past its
        TLS handshake, no request completed, for longer than ``grace`` (waiting, trickling
        headers or a body: a slowloris); 1: in its TLS handshake for longer than ``grace``
        (stalled); 2: new, within ``grace`` (maybe kube-apiserver's); 3: has served requests,
        now in the middle of one; 4: has served requests and waits, kept alive, for the next —
        kube-apiserver's connections.
        """
        handler = self.handler
        if self.phase is Phase.BODY and handler is not None and handler.body_complete():
            return None
        if handler is not None and handler.completed > 0:
            return (4 if self.phase is Phase.IDLE else 3, self.since)
        if now - self.accepted < grace:
            return (2, self.since)
        return (1 if handler is None else 0, self.since)

    def close_now(self) -> None:
        if self.handler is not None:
            self.handler.abort()
            return
        # In the TLS handshake, or not even started: its task may never run again.
        if self.handshake is not None:
            self.handshake.cancel()
        if self.transport is not None:
            self.transport.abort()
        elif not self.loop_owns_socket:
            self.conn.close()
        # else: the cancelled handshake closes uvloop's transport, and with it the socket


class GuardedRequestHandler(web.RequestHandler):
    """aiohttp's request handler with deadlines, a header-size cap and the lean lane (module
    docstring)."""

    def __init__(
        self,
        manager: web.Server,
        *,
        loop: asyncio.AbstractEventLoop,
        limits: ServerLimits,
        slot: ConnectionSlot,
        on_close: Callable[[ConnectionSlot, str | None], None],
        lean: LeanRoutes | None = None,
    ) -> None:
        super().__init__(
            manager,
            loop=loop,
            # our idle deadline (below) closes first and counts it; aiohttp's is a backstop
            keepalive_timeout=limits.idle_timeout + 1.0,
            lingering_time=0.0,  # an unread body closes the connection; it is not drained
            access_log=None,  # type: ignore[arg-type]  # aiohttp: None turns access logs off
        )
        self._limits = limits
        self._slot = slot
        self._on_close = on_close
        self._deadline: asyncio.TimerHandle | None = None
        self._deadline_at = 0.0
        self._deadline_reason = ""
        self._header_bytes = 0
        self._tail = b""
        self._request_started = 0.0
        self._payload: Any = None
        self._close_reason: str | None = None
        self._requests = 0
        self.completed = 0
        """Requests whose handler has returned."""
        # the lean lane (None once the connection is aiohttp's)
        self._lean = lean if lean else None
        self._buffer = bytearray()
        """Bytes received in the lean lane and not yet answered."""
        self._scanned = 0
        """How much of the buffer is known to hold no blank line (the header search resumes)."""
        self._head: LeanRequest | None = None
        self._body_start = 0
        self._waiting: asyncio.Task[LeanAnswer] | None = None
        """A lean request's answer being awaited (its whole request is in)."""
        self._read_paused = False
        self._closing = False

    # -- what the middleware reports --------------------------------------------------------

    def headers_received(self, payload: Any) -> None:
        """The handler chain got the request: its body (``payload``) is read from here on."""
        self._requests += 1
        if self._slot.phase is Phase.IDLE:  # pipelined: its bytes came with the previous one
            self._request_started = self._loop.time()
        if self._slot.phase is not Phase.BODY:
            self._enter_body()
        self._payload = payload

    def request_finished(self) -> None:
        """The handler returned: the connection waits for the next request."""
        self._payload = None
        self.completed += 1
        if self.transport is None or self._slot.released:
            return  # closed while the handler ran: no deadline to keep it referenced
        self._enter(Phase.IDLE, self._loop.time())
        self._arm(self._limits.idle_timeout, "idle-timeout")

    @property
    def closed_by_server(self) -> bool:
        """Whether this side closed the connection (a deadline, eviction, oversized headers)."""
        return self._close_reason is not None

    def body_complete(self) -> bool:
        if self._waiting is not None:  # a lean handler runs: a synchronous one ends unobserved
            return True
        payload = self._payload
        return payload is not None and bool(payload.is_eof())

    def abort(self, reason: str = "evicted") -> None:
        """Close the connection now, without a TLS close_notify."""
        if self._close_reason is None:
            self._close_reason = reason
        self._cancel_deadline()
        transport = self.transport
        if transport is not None:
            transport.abort()

    # -- the protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        now = self._loop.time()
        self._slot.handler = self  # from here on, closing it means closing this transport
        self._enter(Phase.IDLE, now)
        self._request_started = now  # the first request's clock starts after the handshake
        super().connection_made(transport)
        if self._lean is not None:
            # aiohttp's keep-alive backstop would close a connection whose requests it never
            # sees; the deadlines here cover every phase (aiohttp arms it again if it takes over)
            self.keep_alive(True)
        self._arm(self._limits.read_header_timeout, "read-header-timeout")

    def data_received(self, data: bytes) -> None:
        if self._close_reason is not None or self._closing:
            return  # being closed: nothing more is parsed
        if self._lean is not None:
            self._buffer += data
            self._pump()
            return
        self._feed_aiohttp(data)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._read_paused and self._waiting is None:
            self._resume_reading()
            self._pump()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_deadline()
        self._payload = None
        self._buffer = bytearray()
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        self._on_close(self._slot, self._close_reason)
        super().connection_lost(exc)

    # -- aiohttp's lane ---------------------------------------------------------------------

    def _feed_aiohttp(self, data: bytes) -> None:
        slot = self._slot
        if data and slot.phase is Phase.IDLE:
            self._start_request()
            self._header_bytes = 0
            self._tail = b""
        if slot.phase is Phase.HEADERS and data:
            window = self._tail + data
            end = window.find(_HEADER_END)
            if end >= 0:
                self._header_bytes += end + len(_HEADER_END) - len(self._tail)
            else:
                self._header_bytes += len(data)
            if self._header_bytes > self._limits.max_header_bytes:
                self._refuse_headers()
                return
            if end >= 0:
                self._enter_body()
            else:
                self._tail = window[-(len(_HEADER_END) - 1) :]
        super().data_received(data)

    def _to_aiohttp(self) -> None:
        """Hand the request being read, from its first byte, to aiohttp, for good."""
        self._lean = None
        data = bytes(self._buffer)
        self._buffer = bytearray()
        self._header_bytes = 0
        self._tail = b""
        self._feed_aiohttp(data)

    # -- the lean lane ----------------------------------------------------------------------

    def _pump(self) -> None:
        """Answer every whole lean request buffered, in order, until one must be waited for,
        the write buffer is full, or a request is not of the lean shape."""
        buffer = self._buffer
        while buffer and self._lean is not None and self._waiting is None and not self._closing:
            if self._close_reason is not None or self.transport is None:
                return
            if self.writing_paused:
                self._pause_reading()
                return
            slot = self._slot
            if slot.phase is Phase.IDLE:
                self._start_request()
                self._scanned = 0
            if slot.phase is Phase.HEADERS:
                end = buffer.find(_HEADER_END, self._scanned)
                head_bytes = end + len(_HEADER_END)
                if (end < 0 and len(buffer) > self._limits.max_header_bytes) or (
                    head_bytes > self._limits.max_header_bytes
                ):
                    self._refuse_headers()
                    return
                if end < 0:
                    self._scanned = max(0, len(buffer) - len(_HEADER_END) + 1)
                    return
                head = self._lean.match(bytes(buffer[:end]))
                if head is None:
                    self._to_aiohttp()
                    return
                self._head = head
                self._body_start = head_bytes
                self._enter_body()
            head = self._head
            assert head is not None
            end_of_body = self._body_start + head.content_length
            if len(buffer) < end_of_body:
                return
            body = bytes(buffer[self._body_start : end_of_body])
            del buffer[:end_of_body]
            self._head = None
            self._requests += 1
            self._answer(head, body)

    def _answer(self, head: LeanRequest, body: bytes) -> None:
        try:
            answer = head.handler(body)
        except Exception:
            log.exception("lean route handler failed")
            self._send(_INTERNAL_ERROR, close=True)
            return
        if isinstance(answer, LeanAnswer):
            self._send(answer, close=head.close)
            return
        self._pause_reading()
        self._waiting = asyncio.ensure_future(answer)
        self._waiting.add_done_callback(lambda task: self._answered_later(task, close=head.close))

    def _answered_later(self, task: asyncio.Task[LeanAnswer], *, close: bool) -> None:
        if self._waiting is not task:
            return  # the connection was lost meanwhile
        self._waiting = None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("lean route handler failed", exc_info=error)
            self._send(_INTERNAL_ERROR, close=True)
            return
        self._send(task.result(), close=close)
        if not self._closing and not self.writing_paused:
            self._resume_reading()
            self._pump()

    def _send(self, answer: LeanAnswer, *, close: bool) -> None:
        transport = self.transport
        if transport is None or self._close_reason is not None:
            return
        transport.write(encode_answer(answer, close=close))
        self.request_finished()
        if close:
            self._closing = True
            self._cancel_deadline()
            transport.close()  # flushes the answer, then closes

    def _pause_reading(self) -> None:
        if not self._read_paused and self.transport is not None:
            self._read_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._read_paused and self.transport is not None:
            self._read_paused = False
            self.transport.resume_reading()

    # -- deadlines --------------------------------------------------------------------------

    def _start_request(self) -> None:
        """The first bytes of a request: its header deadline runs from them (the first
        request's from the end of the TLS handshake)."""
        if self._requests > 0:  # a kept-alive connection's next request starts now
            self._request_started = self._loop.time()
        self._enter(Phase.HEADERS, self._request_started)
        self._arm_at(
            self._request_started + self._limits.read_header_timeout, "read-header-timeout"
        )

    def _enter(self, phase: Phase, since: float) -> None:
        self._slot.phase = phase
        self._slot.since = since

    def _enter_body(self) -> None:
        self._enter(Phase.BODY, self._request_started)
        self._arm_at(self._request_started + self._limits.read_timeout, "read-timeout")

    def _arm(self, seconds: float, reason: str) -> None:
        self._arm_at(self._loop.time() + seconds, reason)

    def _arm_at(self, when: float, reason: str) -> None:
        """The connection's deadline is now ``when``. The timer is moved only when it would
        fire later than that: one that fires earlier finds the deadline moved and waits again
        (:meth:`_expired`), so a busy kept-alive connection moves its timer about once per
        ``read_header_timeout`` instead of three times a request."""
        self._deadline_at = when
        self._deadline_reason = reason
        timer = self._deadline
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._deadline = self._loop.call_at(when, self._expired)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self._loop.time() < self._deadline_at:  # the deadline moved after the timer was set
            self._deadline = self._loop.call_at(self._deadline_at, self._expired)
            return
        if self._slot.phase is Phase.BODY and self.body_complete():
            return  # the whole request arrived in time; its handler is running
        if self._deadline_reason == "idle-timeout" and self.transport is not None:
            # A kept-alive connection that served its requests: close it politely (TLS
            # close_notify), so a client about to reuse it sees it closing.
            self._close_reason = self._deadline_reason
            self._on_close(self._slot, self._close_reason)  # counted now, not once closed
            self.transport.close()
            return
        self.abort(self._deadline_reason)

    def _refuse_headers(self) -> None:
        self._close_reason = "header-too-large"
        self._cancel_deadline()
        self._on_close(self._slot, "header-too-large")  # counted now, not once it has closed
        transport = self.transport
        if transport is not None:
            transport.write(_TOO_LARGE)
            transport.close()  # flushes the answer, then closes
