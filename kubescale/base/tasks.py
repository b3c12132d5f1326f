"""Stopping helper tasks without losing the caller's own cancellation.

The pattern ``task.cancel(); with suppress(CancelledError): await task`` is wrong in a task that
may itself be cancelled: when the caller's cancellation is delivered at that ``await`` (both fire
in one tick), the ``suppress`` swallows it and the caller runs on as if nothing happened — a
loop that should have stopped keeps running (and writing). :func:`cancel_and_wait` cancels the
helpers and waits for them through :func:`asyncio.gather` with ``return_exceptions=True``: the
helpers' own ``CancelledError`` comes back as a value, while a cancellation aimed at the caller
still raises in the caller.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel the unfinished ``tasks`` and wait until all have finished (never swallows a
    cancellation of the calling task; exceptions of the tasks themselves are dropped)."""
    pending = [task for task in tasks if task is not None]
    for task in pending:
        if not task.done():
            task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
