"""A module with ``BOTH_EVENT_LOOPS = True`` runs each test under asyncio's loop and under
uvloop (``simulate --event-loop uvloop``, what ``serve`` runs on): the checkpoint order must be
the same on both (issue 30). Every other test here runs on asyncio's loop, as without this
hook (as ``tests/platform/conftest.py`` does for the TLS listener)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    module = getattr(item, "module", None)
    if not getattr(module, "BOTH_EVENT_LOOPS", False):
        return {"asyncio": asyncio.new_event_loop}
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
