"""The event loops a test module's async tests run on (pytest-asyncio's
``pytest_asyncio_loop_factories`` hook), for the ``conftest.py`` files that install it: a module
with ``BOTH_EVENT_LOOPS = True`` runs each test under asyncio's loop and under uvloop (what
``kubescale serve`` and ``simulate --event-loop uvloop`` run on); every other module runs on
asyncio's loop, as without the hook (which may not answer ``None``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    module = getattr(item, "module", None)
    if not getattr(module, "BOTH_EVENT_LOOPS", False):
        return {"asyncio": asyncio.new_event_loop}
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
