"""The TLS application that the webhook and the scheduler extender mount their routes on.

Request bodies are limited to 5 MiB like upstream's admission server: a body that announces a
larger Content-Length is answered ``413`` before it is read, and a chunked body that grows past
the limit while being read is answered ``413`` by aiohttp.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

MAX_BODY_BYTES = 5 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _body_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
    length = request.content_length
    if length is not None and length > MAX_BODY_BYTES:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY_BYTES, actual_size=length)
    return await handler(request)


def make_https_app() -> web.Application:
    """An empty application with the body limit; components add their routes to it."""
    return web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_body_limit])
