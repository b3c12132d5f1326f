"""The TLS application that the webhook and the scheduler extender mount their routes on.

Request bodies are limited to 5 MiB like upstream's admission server: a body that announces a
larger Content-Length is answered ``413`` before it is read, and a chunked body that grows past
the limit while being read is answered ``413`` by aiohttp.

Bodies are also limited as a whole: a :class:`BodyBudget` counts the bytes of request bodies
being received or handled at once (``--max-in-flight-body-bytes``). A request whose body is
larger than ``SMALL_BODY_BYTES`` reserves its declared length (5 MiB when it declares none)
before its handler runs and gives it back when the handler returns; when the budget cannot
cover it, the request is answered ``503`` with ``Retry-After: 1`` and the connection closed,
before a byte of the body is read — so stalled or slow uploads cannot make the process buffer
more than the budget, and small requests (every ordinary AdmissionReview) never wait for it.

Lean routes (:data:`LEAN_ROUTES`) are answered by the connection itself, below this application
(:mod:`kubescale.runtime.lean_requests`): only requests with a small declared body, so the body
limits above hold for them by construction.

The same middleware tells the connection's
:class:`~kubescale.runtime.guarded_connections.GuardedRequestHandler` when a request's headers
are in and when its handler is done, which moves the connection's deadline from "headers" to
"whole request" to "idle".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import CollectorRegistry, Counter, Gauge

from kubescale.runtime.guarded_connections import GuardedRequestHandler
from kubescale.runtime.lean_requests import LeanRoutes
from kubescale.runtime.server_limits import MAX_BODY_BYTES, SMALL_BODY_BYTES

__all__ = ["LEAN_ROUTES", "MAX_BODY_BYTES", "BodyBudget", "lean_routes", "make_https_app"]

LEAN_ROUTES = web.AppKey("lean_routes", LeanRoutes)
"""The application's lean routes (:mod:`kubescale.runtime.lean_requests`), which the TLS listener
answers below aiohttp; a route there must also be mounted on the application itself."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BodyBudget:
    """Bytes of request bodies in flight, at most ``limit`` (see the module docstring)."""

    def __init__(self, limit: int, *, registry: CollectorRegistry | None = None) -> None:
        self.limit = limit
        self.in_flight = 0
        registry = registry if registry is not None else CollectorRegistry()
        self._gauge = Gauge(
            "kubescale_https_request_body_bytes_in_flight",
            "Declared bytes of request bodies over 64 KiB being received or handled now.",
            registry=registry,
        )
        self._refused = Counter(
            "kubescale_https_requests_refused_body_budget",
            "Requests answered 503 because the in-flight body budget could not cover them.",
            registry=registry,
        )

    @staticmethod
    def cost(request: web.BaseRequest) -> int:
        """What ``request`` reserves: its declared body length when over ``SMALL_BODY_BYTES``,
        the maximum when it has a body of undeclared length, else nothing."""
        length = request.content_length
        if length is None:
            return MAX_BODY_BYTES if request.body_exists else 0
        return length if length > SMALL_BODY_BYTES else 0

    def try_reserve(self, nbytes: int) -> bool:
        if nbytes == 0:
            return True
        if self.in_flight + nbytes > self.limit:
            self._refused.inc()
            return False
        self.in_flight += nbytes
        self._gauge.set(self.in_flight)
        return True

    def release(self, nbytes: int) -> None:
        if nbytes:
            self.in_flight -= nbytes
            self._gauge.set(self.in_flight)


def _guard(budget: BodyBudget | None) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        length = request.content_length
        if length is not None and length > MAX_BODY_BYTES:
            refused = web.HTTPRequestEntityTooLarge(max_size=MAX_BODY_BYTES, actual_size=length)
            refused.force_close()  # the body is not read: the connection cannot be reused
            raise refused
        protocol = request.protocol
        connection = protocol if isinstance(protocol, GuardedRequestHandler) else None
        if connection is not None:
            connection.headers_received(request.content)
        cost = BodyBudget.cost(request) if budget is not None else 0
        try:
            if budget is not None and not budget.try_reserve(cost):
                cost = 0
                busy = web.HTTPServiceUnavailable(
                    text="too many request bodies in flight; retry\n",
                    headers={"Retry-After": "1"},
                )
                busy.force_close()
                raise busy
            try:
                return await handler(request)
            except ConnectionResetError:
                if connection is None or not connection.closed_by_server:
                    raise
                # The read deadline (or eviction) cut the body: nobody will read an answer,
                # and the close is counted already; keep it out of aiohttp's error log.
                return web.Response(status=408)
        finally:
            if budget is not None:
                budget.release(cost)
            if connection is not None:
                connection.request_finished()

    return guard


def make_https_app(*, budget: BodyBudget | None = None) -> web.Application:
    """An empty application with the body limits and an empty set of lean routes; components
    add their routes to it."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_guard(budget)])
    app[LEAN_ROUTES] = LeanRoutes()
    return app


def lean_routes(app: web.Application) -> LeanRoutes | None:
    """``app``'s lean routes, or ``None`` for an application not made by :func:`make_https_app`
    (then a route is served by aiohttp alone)."""
    return app.get(LEAN_ROUTES)
