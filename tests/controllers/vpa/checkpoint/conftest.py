"""A module with ``BOTH_EVENT_LOOPS = True`` runs each test under asyncio's loop and under
uvloop (``simulate --event-loop uvloop``, what ``serve`` runs on): the checkpoint order must be
the same on both (issue 30). Every other test here runs on asyncio's loop
(:mod:`tests.platform.event_loops`, the hook ``tests/platform/conftest.py`` installs for the TLS
listener)."""

from __future__ import annotations

from tests.platform.event_loops import loop_factories as pytest_asyncio_loop_factories

__all__ = ["pytest_asyncio_loop_factories"]
