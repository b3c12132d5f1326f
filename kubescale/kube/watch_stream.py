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
``Node`` with many images) is not limited by aiohttp's line-size cap.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from kubescale.kube.errors import KubeTransportError

WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


class WatchBroken(KubeTransportError):
    """The stream was cut or carried something that is not a watch event."""


class WatchInactive(KubeTransportError):
    """Nothing arrived, not even a BOOKMARK, within the inactivity timeout."""


class WatchStream:
    """The events of one open watch response, read one at a time."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._buffer = bytearray()
        self._ended = False
        self.events_read = 0

    async def next_event(self) -> dict[str, Any] | None:
        """The next event, or ``None`` when the server ended the stream cleanly."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if line.strip():
                    return self._decode(line)
                continue
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
            event = json.loads(line)
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
