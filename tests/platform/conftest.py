"""Tests of the TLS listener run on both loops ``kubescale serve`` may run on: a module with
``BOTH_EVENT_LOOPS = True`` runs each test under asyncio's loop and under uvloop (the listener
uses uvloop's TLS there, asyncio's TLS protocol on the standard loop); every other test here
runs on asyncio's loop (:mod:`tests.platform.event_loops`)."""

from __future__ import annotations

from tests.platform.event_loops import loop_factories as pytest_asyncio_loop_factories

__all__ = ["pytest_asyncio_loop_factories"]
