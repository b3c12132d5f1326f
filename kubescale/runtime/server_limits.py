"""How much the TLS port lets a client hold: time, connections, header and body bytes.

Why: the webhook and extender port faces every client that can reach the Service, and aiohttp
on its own waits forever for request headers (a connection that trickles a header byte now and
then stays open), reads any body up to the 5 MiB limit into memory as it arrives, and accepts
every connection. 220 connections each sending 4.9 MiB and stalling took the process past its
1 GiB memory limit; 800 slowloris connections were all still open after 90 s. The limits here
are what Go's ``http.Server`` offers (``ReadHeaderTimeout``, ``ReadTimeout``, ``IdleTimeout``,
``MaxHeaderBytes``) plus a connection cap (``netutil.LimitListener``) and a process-wide budget
of request-body bytes; :mod:`kubescale.runtime.guarded_connections` enforces them.

Defaults are chosen so that kube-apiserver (which sends an AdmissionReview of a few KiB at once
and waits at most 30 s, ``timeoutSeconds`` ≤ 30) never notices them, while the worst an
attacker can make the process hold stays far below a 1 GiB limit:
``max-connections × (max-header-bytes + 64 KiB of body + TLS buffers) + max-in-flight-body-bytes``.

TLS buffers depend on the event loop (a trade-off of speed for worst-case memory). Under uvloop
(the default when installed) the listener uses uvloop's TLS, records in C, because asyncio's
pure-Python TLS protocol was about a fifth of a webhook request's CPU time; uvloop gives every
connection a 256 KiB read buffer, ``malloc``-ed and never zeroed, so an idle kept-alive
connection keeps resident only what its reads touched — about 31 KiB per idle connection in all
(``bench/tls_idle_memory.py``: 400 connections, one small request each), less than asyncio's
61 KiB — but a client that fills a whole record window can make its 256 KiB resident, so the
worst case is ``max-connections`` × 256 KiB (128 MiB at the default 512) instead of × 32 KiB
(16 MiB) with asyncio's loop (``KUBESCALE_EVENT_LOOP=asyncio``), whose TLS protocol the
listener runs with a 32 KiB buffer.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from kubescale.base.flag_types import positive_duration
from kubescale.objects.quantities import Quantity, QuantityError

__all__ = [
    "MAX_BODY_BYTES",
    "SMALL_BODY_BYTES",
    "LimitsError",
    "ServerLimits",
    "add_server_limit_arguments",
    "server_limits_from_args",
]

MAX_BODY_BYTES = 5 * 1024 * 1024
"""Request bodies over 5 MiB are refused with 413, as upstream's admission server does."""

SMALL_BODY_BYTES = 64 * 1024
"""A body up to this size is read without drawing on the in-flight budget: an AdmissionReview of
an ordinary pod is 2-20 KiB, and at most ``max-connections`` such bodies are in flight, so they
are bounded by the connection cap instead."""


@dataclass(frozen=True, kw_only=True)
class ServerLimits:
    """The TLS server's limits (see the module docstring); Go ``http.Server`` names."""

    read_header_timeout: float = 10.0
    """From the first byte of a request (the end of the TLS handshake for the first one) to
    the end of its headers; also bounds the TLS handshake (Go's ``tlsHandshakeTimeout``)."""
    read_timeout: float = 30.0
    """From the first byte of a request to the end of its body."""
    idle_timeout: float = 120.0
    """How long a kept-alive connection may wait for its next request (longer than Go
    clients' 90 s ``IdleConnTimeout``, so kube-apiserver closes idle connections first)."""
    max_header_bytes: int = 64 * 1024
    """Request line plus headers; more is answered ``431`` and the connection closed."""
    max_connections: int = 512
    """Connections open at once, TLS handshakes included. At the cap the connection that has
    waited longest without a request in progress is closed to make room; when every
    connection is serving a request, the new one is closed instead."""
    max_in_flight_body_bytes: int = 64 * 1024 * 1024
    """Bytes of request bodies over ``SMALL_BODY_BYTES`` being received or handled at once,
    counted by their declared length (the 5 MiB maximum when undeclared); a request that
    would exceed it is refused with ``503`` and ``Retry-After`` before its body is read."""

    def __post_init__(self) -> None:
        for name in ("read_header_timeout", "read_timeout", "idle_timeout"):
            if getattr(self, name) <= 0:
                raise LimitsError(f"--{name.replace('_', '-')}: must be > 0")
        if self.read_header_timeout > self.read_timeout:
            raise LimitsError(
                "--read-header-timeout: must not be longer than --read-timeout "
                f"({self.read_header_timeout:g}s > {self.read_timeout:g}s)"
            )
        if self.max_header_bytes < 4096:
            raise LimitsError("--max-header-bytes: must be at least 4Ki")
        if self.max_connections < 1:
            raise LimitsError("--max-connections: must be at least 1")
        if self.max_in_flight_body_bytes < MAX_BODY_BYTES:
            raise LimitsError(
                "--max-in-flight-body-bytes: must be at least 5Mi (one request of the largest "
                "size accepted)"
            )

    @property
    def tls_handshake_timeout(self) -> float:
        """Go's ``tlsHandshakeTimeout``: the shortest of the read timeouts."""
        return min(self.read_header_timeout, self.read_timeout)


class LimitsError(ValueError):
    """A limit flag that parsed but does not make sense; the message names the flag."""


def _byte_size(text: str) -> int:
    """A byte count as a Kubernetes quantity (``65536``, ``64Ki``, ``64Mi``)."""
    try:
        value = Quantity.parse(text.strip()).value()
    except QuantityError as exc:
        raise argparse.ArgumentTypeError(f"invalid byte size {text!r}: {exc}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"byte size must not be negative, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}") from None


def add_server_limit_arguments(group: argparse._ArgumentGroup) -> None:
    """Declare the limit flags on the TLS server's argument group."""
    defaults = ServerLimits()
    group.add_argument(
        "--read-header-timeout",
        type=positive_duration,
        default=defaults.read_header_timeout,
        metavar="DURATION",
        help="time for a request's headers (and the TLS handshake) to arrive (default: 10s)",
    )
    group.add_argument(
        "--read-timeout",
        type=positive_duration,
        default=defaults.read_timeout,
        metavar="DURATION",
        help="time for a whole request, headers and body, to arrive (default: 30s)",
    )
    group.add_argument(
        "--idle-timeout",
        type=positive_duration,
        default=defaults.idle_timeout,
        metavar="DURATION",
        help="how long a kept-alive connection may wait for its next request (default: 2m)",
    )
    group.add_argument(
        "--max-header-bytes",
        type=_byte_size,
        default=defaults.max_header_bytes,
        metavar="BYTES",
        help="largest request line plus headers; more is answered 431 (default: 64Ki)",
    )
    group.add_argument(
        "--max-connections",
        type=_count,
        default=defaults.max_connections,
        metavar="N",
        help="connections open at once; at the cap the one idle longest is closed "
        "(default: %(default)s)",
    )
    group.add_argument(
        "--max-in-flight-body-bytes",
        type=_byte_size,
        default=defaults.max_in_flight_body_bytes,
        metavar="BYTES",
        help="request-body bytes (of bodies over 64Ki) received or handled at once; more is "
        "answered 503 before the body is read (default: 64Mi)",
    )


def server_limits_from_args(args: argparse.Namespace) -> ServerLimits:
    """The limits from parsed flags; raises :class:`LimitsError` naming the flag."""
    return ServerLimits(
        read_header_timeout=args.read_header_timeout,
        read_timeout=args.read_timeout,
        idle_timeout=args.idle_timeout,
        max_header_bytes=args.max_header_bytes,
        max_connections=args.max_connections,
        max_in_flight_body_bytes=args.max_in_flight_body_bytes,
    )
