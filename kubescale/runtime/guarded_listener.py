"""The TLS listener: the listening socket, the accept loop, the TLS handshake, the connection cap.

:class:`GuardedListener` owns the listening socket and accepts connections itself (so it can
count them, TLS handshakes included), hands each accepted socket to asyncio's TLS protocol
(with the handshake timeout) and the guarded per-connection protocol
(:class:`~kubescale.runtime.guarded_connections.GuardedRequestHandler`: deadlines, header cap,
the lean lane, aiohttp). Under uvloop (what ``kubescale serve`` runs on when installed) that is
uvloop's TLS, records in C (``connect_accepted_socket(ssl=)``); under asyncio's loop it is
asyncio's pure-Python TLS protocol, whose 256 KiB per-connection read buffer is allocated and
zeroed up front — 200 MB for 800 idle connections — so the listener's TLS protocol there reads
in 32 KiB (two TLS records). uvloop's buffer is also 256 KiB but ``malloc``-ed and never zeroed:
an idle connection keeps resident only the pages its reads touched (the memory trade-off is in
:mod:`kubescale.runtime.server_limits`). At ``max_connections`` it closes one connection to
make room (:meth:`~kubescale.runtime.guarded_connections.ConnectionSlot.eviction_rank`): first
one that has had its TLS handshake and more than a second (``grace``) but never completed a
request (waiting, trickling headers or a body) — a legitimate client needs milliseconds for
that, so a flood of stalled connections evicts its own members rather than locking the port —;
then a TLS handshake older than ``grace`` (stalled); then a connection younger than that; then
one in the middle of a later request; last a kept-alive idle one (kube-apiserver's, reused for
the next AdmissionReview). Among connections of the same rank, the client address holding the
most connections gives one up first, then the longest waiting: a flood from a few addresses
evicts itself, not kube-apiserver's new connections. A connection whose handler is running with
its whole request is never closed; when every connection is such, the new one is closed at once.

Metrics (on the process registry): ``kubescale_https_connections`` (open now) and
``kubescale_https_connections_closed_total{reason}``: ``read-header-timeout``,
``read-timeout``, ``idle-timeout``, ``header-too-large``, ``evicted`` (to make room at the
cap), ``refused`` (at the cap with nothing to evict), ``handshake`` (failed or timed out).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
from asyncio import sslproto

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from kubescale.runtime.guarded_connections import (
    CLOSE_REASONS,
    ConnectionSlot,
    GuardedRequestHandler,
)
from kubescale.runtime.lean_requests import LeanRoutes
from kubescale.runtime.server_limits import ServerLimits

__all__ = ["GuardedListener", "ListenerMetrics"]


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
        lean: LeanRoutes | None = None,
    ) -> None:
        self._server = server
        self._lean = lean
        """Routes answered below aiohttp (:mod:`kubescale.runtime.lean_requests`)."""
        self._ssl_context = ssl_context
        self._limits = limits
        self._host = host
        self._port = port
        self._backlog = backlog
        self._metrics = ListenerMetrics(registry)
        self._log = logger
        self._slots: dict[ConnectionSlot, None] = {}
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
            slot = ConnectionSlot(loop.time(), conn, str(address[0]))
            self._slots[slot] = None
            self._per_peer[slot.peer] += 1
            self._metrics.open.set(len(self._slots))
            slot.handshake = asyncio.create_task(self._handshake(conn, slot))

    def _evict_one(self) -> bool:
        now = asyncio.get_running_loop().time()
        grace = self._handshake_grace
        candidates: list[tuple[tuple[int, int, float], ConnectionSlot]] = []
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

    async def _handshake(self, conn: socket.socket, slot: ConnectionSlot) -> None:
        """The TLS handshake, then aiohttp's handler: the TLS protocol calls the handler's
        ``connection_made`` once the handshake is done (the slot leaves ``HANDSHAKE`` there).

        Under uvloop, uvloop's own TLS (records in C) via ``loop.connect_accepted_socket(ssl=)``;
        under asyncio's loop, asyncio's TLS protocol with the compact read buffer."""
        loop = asyncio.get_running_loop()
        handler = GuardedRequestHandler(
            self._server,
            loop=loop,
            limits=self._limits,
            slot=slot,
            on_close=self._release,
            lean=self._lean,
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
        slot: ConnectionSlot,
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

    def _release(self, slot: ConnectionSlot, reason: str | None) -> None:
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
