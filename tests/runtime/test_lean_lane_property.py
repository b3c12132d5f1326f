"""The lean lane inside the connection protocol: however a client's bytes are split into reads,
every request is answered once, in order, by the lane its shape calls for — lean requests below
aiohttp until the first request of another shape, aiohttp for that one and all after it.

Driven through :class:`~kubescale.runtime.guarded_connections.GuardedRequestHandler` with an
in-memory transport, so the split points are exactly the drawn ones (TLS records would merge
them). The same lanes over real TLS sockets, on both loops: ``test_lean_lane.py``.

It fails against a copy whose header search resumes at the end of the buffer instead of three
bytes before it (a blank line split across two reads is missed, and the request never answered),
and against one that answers a pipelined lean request after an aiohttp one in the lean lane
(the answers come out of order).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.runtime.guarded_connections import ConnectionSlot, GuardedRequestHandler
from kubescale.runtime.https_server import lean_routes, make_https_app
from kubescale.runtime.lean_requests import LeanAnswer
from kubescale.runtime.server_limits import ServerLimits


class MemoryTransport(asyncio.Transport):
    """What the protocol writes, and whether it paused reading or closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.reading = True
        self.changed = asyncio.Event()
        """Set by a write and by resuming reading."""

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.changed.clear()
            await self.changed.wait()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data
        self.changed.set()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True
        self.changed.set()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def get_write_buffer_size(self) -> int:
        return 0


async def _later(body: bytes) -> LeanAnswer:
    await asyncio.sleep(0.001)
    return LeanAnswer(body=b"lean-later:" + body)


def _lean(body: bytes) -> LeanAnswer | Awaitable[LeanAnswer]:
    if body.startswith(b"wait"):
        return _later(body)
    return LeanAnswer(body=b"lean:" + body)


async def _aiohttp(request: web.Request) -> web.Response:
    body = await request.read()
    return web.Response(body=b"aiohttp:" + body, content_type="application/json", charset="utf-8")


def mount_echo(app: web.Application) -> None:
    """``POST /echo`` on both lanes; the answer says which lane wrote it."""
    app.router.add_post("/echo", _aiohttp)
    routes = lean_routes(app)
    assert routes is not None
    routes.add_post("/echo", _lean, content_type="application/json")


def request_bytes(kind: str, payload: bytes) -> bytes:
    """``lean`` and ``wait``: the lean shape (``wait`` answered after an await); ``chunked``:
    the same route, a chunked body, which only aiohttp takes."""
    if kind == "chunked":
        return (
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload)
        )
    body = (b"wait-" if kind == "wait" else b"") + payload
    return (
        b"POST /echo?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def expected_bodies(requests: list[tuple[str, bytes]]) -> list[bytes]:
    answers = []
    with_aiohttp = False
    for kind, payload in requests:
        with_aiohttp = with_aiohttp or kind == "chunked"
        body = (b"wait-" if kind == "wait" else b"") + payload
        if with_aiohttp:
            answers.append(b"aiohttp:" + body)
        else:
            answers.append((b"lean-later:" if kind == "wait" else b"lean:") + body)
    return answers


def parse_answers(data: bytes) -> list[bytes]:
    """The bodies of the whole HTTP/1.1 answers in ``data`` (each with a Content-Length)."""
    bodies = []
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n"), head
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        if len(rest) < length:
            break  # the rest of this answer is not written yet
        bodies.append(rest[:length])
        data = rest[length:]
    return bodies


async def exchange(chunks: list[bytes], answers: int) -> bytes:
    """Feed ``chunks`` one read at a time to a fresh connection; what it wrote once ``answers``
    answers are out (or after 2 s)."""
    app = make_https_app()
    mount_echo(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    assert runner.server is not None
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    try:
        handler = GuardedRequestHandler(
            runner.server,
            loop=loop,
            limits=ServerLimits(),
            slot=ConnectionSlot(loop.time(), sock, "127.0.0.1"),
            on_close=lambda slot, reason: None,
            lean=lean_routes(app),
        )
        transport = MemoryTransport()
        handler.connection_made(transport)
        try:
            async with asyncio.timeout(2.0):
                for chunk in chunks:
                    # as a real transport: nothing is read while reading is paused
                    await transport.until(lambda: transport.reading)
                    handler.data_received(chunk)
                    await asyncio.sleep(0)
                await transport.until(
                    lambda: len(parse_answers(bytes(transport.written))) >= answers
                )
        except TimeoutError:
            pass  # the comparison shows what is missing
        handler.connection_lost(None)
        return bytes(transport.written)
    finally:
        sock.close()
        await runner.cleanup()


_requests = st.lists(
    st.tuples(
        st.sampled_from(["lean", "lean", "wait", "chunked"]),
        st.binary(min_size=1, max_size=40).map(lambda b: b.hex().encode()),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(requests=_requests, data=st.data())
def test_however_the_bytes_are_split_each_request_is_answered_once_in_order(
    requests: list[tuple[str, bytes]], data: st.DataObject
) -> None:
    stream = b"".join(request_bytes(kind, payload) for kind, payload in requests)
    # cuts anywhere, and often inside a blank line ending a head (the header search's edge)
    inside_blank_lines = [
        at + offset
        for at in range(len(stream))
        if stream.startswith(b"\r\n\r\n", at)
        for offset in (1, 2, 3)
    ]
    anywhere = st.integers(min_value=1, max_value=len(stream) - 1)
    cuts = sorted(
        data.draw(st.sets(st.one_of(anywhere, st.sampled_from(inside_blank_lines)), max_size=12))
    )
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    written = asyncio.run(exchange(chunks, len(requests)))
    assert parse_answers(written) == expected_bodies(requests)
