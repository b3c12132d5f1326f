"""Reading one watch response: newline-delimited JSON ``{"type", "object"}`` events.

The API server streams a watch as chunked JSON lines (``ADDED``, ``MODIFIED``, ``DELETED``,
``BOOKMARK``, ``ERROR``). This module turns the body of an open watch response into raw event
dicts and classifies how the stream ended, because the informer reacts differently to each:

- a clean end of the body (the server's ``timeoutSeconds`` elapsed) → ``None``: watch again from
  the last resourceVersion at once;
- no byte for longer than the inactivity timeout (the response was opened with an aiohttp
  ``sock_read`` timeout; a healthy server sends at least a BOOKMARK every minute) →
  :class:`WatchInactive`: the connection is presumed dead;
- the connection cut mid-body, or a line that is not a watch event → :class:`WatchBroken`.

Lines are split here rather than with ``StreamReader.readline`` so a very large object (a
``Node`` with many images) is not limited by aiohttp's line-size cap. A line is still bounded,
by :data:`MAX_WATCH_EVENT_BYTES` (issue 29: client-go has no such cap, but nothing kube-apiserver
can store comes near it): a longer one raises :class:`WatchEventTooLarge` rather than buffering
without end, and the informer starts over from a list.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from kubescale.base.json_decoding import decode_json
from kubescale.kube.errors import KubeTransportError

WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})

MAX_WATCH_EVENT_BYTES = 8 * 1024 * 1024
"""The longest watch line read (8 MiB). etcd stores a request of at most 1.5 MiB
(``--max-request-bytes`` default 1,572,864) and kube-apiserver reads write bodies of at most
3 MiB (``MaxRequestBodyBytes``, twice etcd's limit, for JSON's larger encoding), so no stored
object's event comes near 8 MiB; a longer line is a broken or hostile server."""


class WatchEventTooLarge(KubeTransportError):
    """A watch line grew past the stream's ``max_event_bytes`` without ending."""

    def __init__(self, received: int, limit: int) -> None:
        super().__init__(f"watch event over {limit} bytes ({received} received without a newline)")
        self.received = received
        self.limit = limit


class WatchBroken(KubeTransportError):
    """The stream was cut or carried something that is not a watch event."""


class WatchInactive(KubeTransportError):
    """Nothing arrived, not even a BOOKMARK, within the inactivity timeout."""


class WatchStream:
    """The events of one open watch response, read one at a time."""

    def __init__(
        self, response: aiohttp.ClientResponse, *, max_event_bytes: int = MAX_WATCH_EVENT_BYTES
    ) -> None:
        if max_event_bytes <= 0:
            raise ValueError("max_event_bytes must be positive")
        self._response = response
        self._buffer = bytearray()
        self._scanned = 0
        """Bytes of the buffer known to hold no newline (each chunk is scanned once)."""
        self._ended = False
        self.max_event_bytes = max_event_bytes
        self.events_read = 0

    async def next_event(self) -> dict[str, Any] | None:
        """The next event, or ``None`` when the server ended the stream cleanly."""
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline > self.max_event_bytes:
                self._buffer = bytearray()
                self._scanned = 0
                raise WatchEventTooLarge(newline, self.max_event_bytes)
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                self._scanned = 0
                if line.strip():
                    return self._decode(line)
                continue
            self._scanned = len(self._buffer)
            if self._scanned > self.max_event_bytes:
                received = self._scanned
                self._buffer = bytearray()  # released now, not when the stream is closed
                self._scanned = 0
                raise WatchEventTooLarge(received, self.max_event_bytes)
            if self._ended:
                if self._buffer.strip():
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return self._decode(line)
                return None
            await self._fill()

    async def _fill(self) -> None:
        try:
            chunk = await self._response.content.readany()
        except TimeoutError as err:  # aiohttp's sock_read timeout (ServerTimeoutError)
            raise WatchInactive("no data on the watch within the inactivity timeout") from err
        except (aiohttp.ClientError, OSError) as err:
            raise WatchBroken(f"watch stream cut: {err!r}") from err
        if chunk:
            self._buffer.extend(chunk)
        else:
            self._ended = True

    def _decode(self, line: bytes) -> dict[str, Any]:
        try:
            event = decode_json(line)
        except ValueError as err:
            raise WatchBroken(f"undecodable watch line: {line[:80]!r}") from err
        if (
            not isinstance(event, dict)
            or event.get("type") not in WATCH_EVENT_TYPES
            or not isinstance(event.get("object"), dict)
        ):
            raise WatchBroken(f"not a watch event: {line[:80]!r}")
        self.events_read += 1
        return event

    async def close(self) -> None:
        """Drop the connection (a watch is never drained: closing is the only way to stop it)."""
        self._response.close()
        await asyncio.sleep(0)
