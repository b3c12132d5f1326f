"""The event loop ``kubescale serve`` runs on: uvloop when it is installed, else asyncio's.

uvloop (libuv, with TLS records in Cython) roughly halves what a TLS keep-alive request costs
the loop — the webhook answers every pod CREATE of the cluster, so its per-request cost is the
ceiling of a scale-out. It is optional: where it cannot be installed (another platform or
interpreter) or when ``KUBESCALE_EVENT_LOOP=asyncio`` is set, the standard loop runs the same
code. Tests run on the standard loop (pytest-asyncio's); ``serve`` in a child process runs on
this one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from types import ModuleType
from typing import Any, Final, TypeVar

_uvloop: ModuleType | None
try:
    import uvloop as _uvloop
except ImportError:  # pragma: no cover - uvloop is installed wherever it can be
    _uvloop = None

__all__ = ["EVENT_LOOP_ENV", "loop_factory", "run"]

EVENT_LOOP_ENV: Final = "KUBESCALE_EVENT_LOOP"

T = TypeVar("T")


def loop_factory(
    environ: Mapping[str, str] | None = None,
) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when installed and not turned off; ``None`` for asyncio's."""
    env = os.environ if environ is None else environ
    if _uvloop is None or env.get(EVENT_LOOP_ENV, "").strip().lower() == "asyncio":
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = _uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
