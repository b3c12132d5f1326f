"""``kubescale serve``'s event loop: uvloop when installed, asyncio's with
``KUBESCALE_EVENT_LOOP=asyncio`` or without uvloop (the rest of the suite runs on asyncio's loop,
pytest-asyncio's, so every component is tested there)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import uvloop

from kubescale.runtime import event_loop


def _loop_module() -> str:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    return event_loop.run(which())


@pytest.mark.parametrize(
    ("environ", "uses_uvloop"),
    [
        ({}, True),  # installed: the default
        ({"KUBESCALE_EVENT_LOOP": "uvloop"}, True),  # anything but "asyncio" keeps the default
        ({"KUBESCALE_EVENT_LOOP": "asyncio"}, False),
        ({"KUBESCALE_EVENT_LOOP": " AsyncIO "}, False),  # case and spaces do not matter
    ],
)
def test_the_loop_follows_the_environment(environ: dict[str, str], uses_uvloop: bool) -> None:
    factory = event_loop.loop_factory(environ)
    assert (factory is uvloop.new_event_loop) is uses_uvloop
    assert (factory is None) is not uses_uvloop


def test_run_runs_on_the_chosen_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBESCALE_EVENT_LOOP", raising=False)
    assert _loop_module().startswith("uvloop")
    monkeypatch.setenv("KUBESCALE_EVENT_LOOP", "asyncio")
    assert _loop_module().startswith("asyncio")


def test_without_uvloop_installed_the_standard_loop_runs() -> None:
    """A platform where uvloop cannot be installed: importing it fails, serve runs asyncio's."""
    program = (
        "import sys; sys.modules['uvloop'] = None\n"  # makes `import uvloop` raise ImportError
        "import asyncio\n"
        "from kubescale.runtime import event_loop\n"
        "assert event_loop.loop_factory({}) is None\n"
        "async def which():\n"
        "    return type(asyncio.get_running_loop()).__module__\n"
        "print(event_loop.run(which()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("asyncio")
