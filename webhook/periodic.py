"""Waiting on the injected clock while staying responsive to a stop event.

The webhook's background tasks (status Lease renewal, caBundle refresh, scale-subresource
lookups) sleep on :class:`~kubescale.clock.Clock` — virtual in tests and in the simulator — and
must end promptly when the component stops, without leaving a pending sleep behind.
"""

from __future__ import annotations

import asyncio
import contextlib

from kubescale.clock import Clock

__all__ = ["wait_or_stop"]


async def wait_or_stop(clock: Clock, seconds: float, stop: asyncio.Event) -> bool:
    """Sleep ``seconds`` on ``clock`` or until ``stop`` is set; ``True`` if stopped."""
    if stop.is_set():
        return True
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in (sleeper, stopper):
            if not waiter.done():
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
    return stop.is_set()
