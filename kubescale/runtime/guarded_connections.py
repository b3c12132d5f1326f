"""The TLS listener: deadlines on every connection, a connection cap, a header-size cap.

aiohttp reads requests with no deadline of its own (its keep-alive timer only closes a
connection that has sent nothing of a next request) and accepts every connection its socket
offers. This module puts Go ``http.Server``'s deadlines on the connection instead
(:class:`~kubescale.runtime.server_limits.ServerLimits`):

* :class:`GuardedRequestHandler` is aiohttp's per-connection protocol with a deadline for what
  the connection is doing: reading a request's headers (``read_header_timeout`` from the
  request's first byte — for the first request, from the end of the TLS handshake), reading
  its body (``read_timeout`` from that same first byte), or waiting for the next request
  (``idle_timeout``). A deadline that passes closes the connection at once (``abort``: no TLS
  close_notify to wait for) — unless the request's body has been read whole and its handler is
  running, which is not the client's doing. Header bytes are counted as they arrive; past
  ``max_header_bytes`` the connection is answered ``431`` and closed before aiohttp's parser
  buffers more. The end of the headers is found by scanning for the blank line, and the
  handler's middleware (:mod:`kubescale.runtime.https_server`) confirms it.
* :class:`GuardedListener` owns the listening socket and accepts connections itself (so it can
  count them, TLS handshakes included), hands each accepted socket to asyncio's TLS protocol
  (with the handshake timeout) and aiohttp's handler. Under uvloop (what ``kubescale serve``
  runs on when installed) that is uvloop's TLS, records in C (``connect_accepted_socket(ssl=)``);
  under asyncio's loop it is asyncio's pure-Python TLS protocol, whose 256 KiB per-connection
  read buffer is allocated and zeroed up front — 200 MB for 800 idle connections — so the
  listener's TLS protocol there reads in 32 KiB (two TLS records). uvloop's buffer is also
  256 KiB but ``malloc``-ed and never zeroed: an idle connection keeps resident only the pages
  its reads touched (the memory trade-off is in :mod:`kubescale.runtime.server_limits`). At
  ``max_connections`` it closes one connection to make room (:meth:`_Slot.eviction_rank`):
  first one that has had its TLS handshake and more than a second (``grace``) but never
  completed a request (waiting, trickling headers or a body) — a legitimate client needs
  milliseconds for that, so a flood of stalled connections evicts its own members rather than
  locking the port —; then a TLS handshake older than ``grace`` (stalled); then a connection
  younger than that; then one in the middle of a later request; last a kept-alive idle one
  (kube-apiserver's, reused for the next AdmissionReview). Among connections of the same rank,
  the client address holding the most connections gives one up first, then the longest
  waiting: a flood from a few addresses evicts itself, not kube-apiserver's new connections. A
  connection whose handler is running with its whole request is never closed; when every
  connection is such, the new one is closed at once.

Metrics (on the process registry): ``kubescale_https_connections`` (open now) and
``kubescale_https_connections_closed_total{reason}``: ``read-header-timeout``,
``read-timeout``, ``idle-timeout``, ``header-too-large``, ``evicted`` (to make room at the
cap), ``refused`` (at the cap with nothing to evict), ``handshake`` (failed or timed out).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import socket
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from kubescale.runtime.server_limits import ServerLimits

__all__ = ["GuardedListener", "GuardedRequestHandler", "ListenerMetrics", "Phase"]

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


class Phase(enum.Enum):
    """What a connection is doing."""

    HANDSHAKE = "handshake"
    IDLE = "idle"
    """Waiting for a request (the first, or the next one on a kept-alive connection)."""
    HEADERS = "headers"
    BODY = "body"
    """Headers read: the body is being read, or the handler is running."""


class ListenerMetrics:
    """Open connections and why connections were closed."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.open = Gauge(
            "kubescale_https_connections",
            "Connections open on the TLS port, TLS handshakes included.",
            registry=registry,
        )
        closed = Counter(
            "kubescale_https_connections_closed",
            "Connections the TLS server closed before the client did, by reason.",
            ["reason"],
            registry=registry,
        )
        self.closed = {reason: closed.labels(reason=reason) for reason in CLOSE_REASONS}


class _CompactSSLProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 32 KiB read buffer instead of 256 KiB (module docstring)."""

    max_size = 32 * 1024


class _Slot:
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
    """aiohttp's request handler with deadlines and a header-size cap (module docstring)."""

    def __init__(
        self,
        manager: web.Server,
        *,
        loop: asyncio.AbstractEventLoop,
        limits: ServerLimits,
        slot: _Slot,
        on_close: Callable[[_Slot, str | None], None],
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
        self._deadline_reason = ""
        self._header_bytes = 0
        self._tail = b""
        self._request_started = 0.0
        self._payload: Any = None
        self._close_reason: str | None = None
        self._requests = 0
        self.completed = 0
        """Requests whose handler has returned."""

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
        self._arm(self._limits.read_header_timeout, "read-header-timeout")

    def data_received(self, data: bytes) -> None:
        if self._close_reason is not None:
            return  # being closed: nothing more is parsed
        slot = self._slot
        if data and slot.phase is Phase.IDLE:
            now = self._loop.time()
            if self._requests > 0:  # a kept-alive connection's next request starts now
                self._request_started = now
            self._enter(Phase.HEADERS, self._request_started)
            self._header_bytes = 0
            self._tail = b""
            self._arm_at(
                self._request_started + self._limits.read_header_timeout, "read-header-timeout"
            )
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

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_deadline()
        self._payload = None
        self._on_close(self._slot, self._close_reason)
        super().connection_lost(exc)

    # -- deadlines --------------------------------------------------------------------------

    def _enter(self, phase: Phase, since: float) -> None:
        self._slot.phase = phase
        self._slot.since = since

    def _enter_body(self) -> None:
        self._enter(Phase.BODY, self._request_started)
        self._arm_at(self._request_started + self._limits.read_timeout, "read-timeout")

    def _arm(self, seconds: float, reason: str) -> None:
        self._arm_at(self._loop.time() + seconds, reason)

    def _arm_at(self, when: float, reason: str) -> None:
        self._cancel_deadline()
        self._deadline_reason = reason
        self._deadline = self._loop.call_at(when, self._expired)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
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


class GuardedListener:
    """The listening socket, the accept loop, the connection cap (module docstring)."""

    def __init__(
        self,
        *,
        server: web.Server,
        ssl_context: ssl.SSLContext,
        limits: ServerLimits,
        host: str | None,
        port: int,
        registry: CollectorRegistry,
        logger: logging.Logger,
        backlog: int = 128,
    ) -> None:
        self._server = server
        self._ssl_context = ssl_context
        self._limits = limits
        self._host = host
        self._port = port
        self._backlog = backlog
        self._metrics = ListenerMetrics(registry)
        self._log = logger
        self._slots: dict[_Slot, None] = {}
        self._per_peer: collections.Counter[str] = collections.Counter()
        """Open connections by client address."""
        self._handshake_grace = min(1.0, limits.tls_handshake_timeout / 2)
        """How long a new connection's TLS handshake is presumed honest at the cap."""
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The bound port (``port=0`` picks a free one)."""
        if self._sock is None:
            raise RuntimeError("the listener is not started")
        bound: int = self._sock.getsockname()[1]
        return bound

    @property
    def open_connections(self) -> int:
        return len(self._slots)

    async def start(self) -> None:
        """Bind and listen (``OSError`` when the address is taken), then accept."""
        self._sock = _listening_socket(self._host, self._port, backlog=self._backlog)
        self._accepting = asyncio.create_task(self._accept_loop(self._sock))

    async def stop(self) -> None:
        """Stop accepting and close the socket; connections still in their TLS handshake are
        closed (those aiohttp serves are closed by its runner's shutdown)."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
            self._accepting = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        handshakes = [s.handshake for s in self._slots if s.handler is None and s.handshake]
        for task in handshakes:
            task.cancel()
        await asyncio.gather(*handshakes, return_exceptions=True)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE and the like: wait instead of spinning
                self._log.warning("cannot accept a connection: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if len(self._slots) >= self._limits.max_connections and not self._evict_one():
                self._metrics.closed["refused"].inc()
                conn.close()
                continue
            slot = _Slot(loop.time(), conn, str(address[0]))
            self._slots[slot] = None
            self._per_peer[slot.peer] += 1
            self._metrics.open.set(len(self._slots))
            slot.handshake = asyncio.create_task(self._handshake(conn, slot))

    def _evict_one(self) -> bool:
        now = asyncio.get_running_loop().time()
        grace = self._handshake_grace
        candidates: list[tuple[tuple[int, int, float], _Slot]] = []
        for slot in self._slots:
            ranked = slot.eviction_rank(now=now, grace=grace)
            if ranked is not None:
                rank, since = ranked
                candidates.append(((rank, -self._per_peer[slot.peer], since), slot))
        if not candidates:
            return False
        _, victim = min(candidates, key=lambda candidate: candidate[0])
        self._release(victim, "evicted")
        victim.close_now()
        return True

    async def _handshake(self, conn: socket.socket, slot: _Slot) -> None:
        """The TLS handshake, then aiohttp's handler: the TLS protocol calls the handler's
        ``connection_made`` once the handshake is done (the slot leaves ``HANDSHAKE`` there).

        Under uvloop, uvloop's own TLS (records in C) via ``loop.connect_accepted_socket(ssl=)``;
        under asyncio's loop, asyncio's TLS protocol with the compact read buffer."""
        loop = asyncio.get_running_loop()
        handler = GuardedRequestHandler(
            self._server, loop=loop, limits=self._limits, slot=slot, on_close=self._release
        )
        if _is_uvloop(loop):
            await self._uvloop_handshake(loop, conn, slot, handler)
            return
        handshake: asyncio.Future[None] = loop.create_future()
        tls = _CompactSSLProtocol(
            loop,
            handler,
            self._ssl_context,
            handshake,
            server_side=True,
            # typeshed says int; asyncio takes any positive number of seconds
            ssl_handshake_timeout=self._limits.tls_handshake_timeout,  # type: ignore[arg-type]
            # a peer that never answers our close_notify holds its slot this long at most
            ssl_shutdown_timeout=self._limits.tls_handshake_timeout,
        )
        transport: asyncio.BaseTransport | None = None
        try:
            transport, _ = await loop.connect_accepted_socket(lambda: tls, conn)
            if isinstance(transport, asyncio.Transport):
                slot.transport = transport
            await handshake
        except (OSError, ssl.SSLError, TimeoutError, ValueError):
            _close(transport, conn)
            self._release(slot, "handshake")
        except asyncio.CancelledError:
            _close(transport, conn)
            self._release(slot, "evicted")
            raise
        finally:
            slot.handshake = None

    async def _uvloop_handshake(
        self,
        loop: asyncio.AbstractEventLoop,
        conn: socket.socket,
        slot: _Slot,
        handler: GuardedRequestHandler,
    ) -> None:
        """uvloop's TLS: its transport takes the socket (closing it on failure, on cancellation
        and at the end), and the call returns once the handshake is done. Its TLS protocol
        gives every connection a 256 KiB read buffer (``malloc``, not zeroed: only the pages a
        read touches become resident) — see :mod:`kubescale.runtime.server_limits`."""
        slot.loop_owns_socket = True
        try:
            await loop.connect_accepted_socket(
                lambda: handler,
                conn,
                ssl=self._ssl_context,
                ssl_handshake_timeout=self._limits.tls_handshake_timeout,
                # a peer that never answers our close_notify holds its slot this long at most
                ssl_shutdown_timeout=self._limits.tls_handshake_timeout,
            )
        except (OSError, ssl.SSLError, TimeoutError, ValueError):
            self._release(slot, "handshake")
        except asyncio.CancelledError:
            self._release(slot, "evicted")
            raise
        finally:
            slot.handshake = None

    def _release(self, slot: _Slot, reason: str | None) -> None:
        if slot.released:
            return
        slot.released = True
        self._slots.pop(slot, None)
        self._per_peer[slot.peer] -= 1
        if self._per_peer[slot.peer] <= 0:
            del self._per_peer[slot.peer]
        self._metrics.open.set(len(self._slots))
        if reason is not None:
            self._metrics.closed[reason].inc()


def _is_uvloop(loop: asyncio.AbstractEventLoop) -> bool:
    return type(loop).__module__.startswith("uvloop")


def _close(transport: asyncio.BaseTransport | None, conn: socket.socket) -> None:
    if isinstance(transport, asyncio.Transport):
        transport.abort()
    conn.close()


def _listening_socket(host: str | None, port: int, *, backlog: int) -> socket.socket:
    """A non-blocking listening socket: ``host``, or every interface (dual-stack when the
    machine has IPv6, else IPv4)."""
    if host:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=backlog)
    elif socket.has_dualstack_ipv6():
        try:
            sock = socket.create_server(
                ("::", port), family=socket.AF_INET6, backlog=backlog, dualstack_ipv6=True
            )
        except OSError:
            sock = socket.create_server(("0.0.0.0", port), backlog=backlog)
    else:
        sock = socket.create_server(("0.0.0.0", port), backlog=backlog)
    sock.setblocking(False)
    return sock
