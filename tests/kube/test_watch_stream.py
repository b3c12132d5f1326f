"""Splitting a watch body into events (``kubescale.kube.watch_stream``): however the bytes are
chunked, the events read are the lines written, and a line over the cap ends the stream after
exactly the events before it (issue 29: the buffer is bounded, each byte scanned once)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any, cast

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.kube.watch_stream import WatchEventTooLarge, WatchStream

CAP = 256


class _Body:
    """The part of an aiohttp response the stream reads: ``content.readany()`` chunk by chunk
    (the bytes as they come off the socket; ``b""`` at the end)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self.content = self

    async def readany(self) -> bytes:
        return next(self._chunks, b"")

    def close(self) -> None:
        pass


def _event(name: str, padding: int) -> dict[str, Any]:
    return {"type": "ADDED", "object": {"metadata": {"name": name}, "pad": "x" * padding}}


def _chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


async def _read(stream: WatchStream) -> list[str]:
    names: list[str] = []
    while (event := await stream.next_event()) is not None:
        names.append(event["object"]["metadata"]["name"])
    return names


@given(
    paddings=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=20),
)
def test_any_chunking_yields_the_lines_written_up_to_the_first_over_the_cap(
    paddings: list[int], cuts: list[int]
) -> None:
    lines = [json.dumps(_event(f"e{i}", pad)).encode() for i, pad in enumerate(paddings)]
    data = b"".join(line + b"\n" for line in lines)
    body = _Body(_chunked(data, cuts))
    stream = WatchStream(cast(aiohttp.ClientResponse, body), max_event_bytes=CAP)
    fitting = next((i for i, line in enumerate(lines) if len(line) > CAP), len(lines))
    names: list[str] = []

    async def run() -> None:
        while (event := await stream.next_event()) is not None:
            names.append(event["object"]["metadata"]["name"])

    if fitting == len(lines):
        asyncio.run(run())
    else:
        with pytest.raises(WatchEventTooLarge) as refused:
            asyncio.run(run())
        assert refused.value.limit == CAP
        assert refused.value.received > CAP
    # exactly the events before the first line over the cap, in order
    assert names == [f"e{i}" for i in range(fitting)]
    assert stream.events_read == fitting


def test_a_line_without_end_stops_being_buffered_past_the_cap() -> None:
    # 10 chunks of 100 bytes and never a newline: refused once 300 > 256 bytes are held
    body = _Body([b"x" * 100] * 10)
    stream = WatchStream(cast(aiohttp.ClientResponse, body), max_event_bytes=CAP)
    with pytest.raises(WatchEventTooLarge) as refused:
        asyncio.run(_read(stream))
    assert refused.value.received == 300
    assert str(refused.value) == "watch event over 256 bytes (300 received without a newline)"
