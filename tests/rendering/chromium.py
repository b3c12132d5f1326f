"""One headless Chromium (Debian's ``chromium``) for the test session, driven over the DevTools
protocol (issue 32.7: the suite within about 10 minutes on a loaded 2-core machine).

The browser tests each started a Chromium of their own (``--screenshot`` or ``--dump-dom``:
seven browser starts a run). Here one browser is started per test session with
``--remote-debugging-pipe`` (the protocol as NUL-terminated JSON on file descriptors 3 and 4,
https://chromedevtools.github.io/devtools-protocol/) and each test opens its page in a fresh
browser context (nothing shared between tests: no cookies, storage or cache), at the window
size it asks for, and reads back what the command-line modes gave:

- ``dom``: ``document.documentElement.outerHTML`` once the page's load event fired (what
  ``--dump-dom`` prints: the DOM after the page's scripts ran);
- ``screenshot``: the PNG of the viewport (what ``--screenshot`` with ``--window-size`` wrote);
- ``console``: every message the page logged — console calls, uncaught exceptions
  (``Uncaught ReferenceError: …``) and the browser's own log entries about the page (network,
  security, deprecation…; not the ``verbose`` level) — where the command-line modes printed
  ``…:CONSOLE…`` lines to stderr.

Waits are hang guards only (no bound on how fast a loaded machine renders).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
SKIP_REASON = "Debian's chromium is not installed (apt-get install -y chromium; tests/run.sh does)"

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)

HANG_GUARD = 600.0
"""Seconds without a word from the browser after which it is taken as hung (a guard against a
hung browser only: no bound on how fast it renders)."""


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or stopped answering."""


@dataclass(frozen=True)
class Rendered:
    """What the browser made of a page."""

    dom: str
    console: list[str]
    screenshot: bytes | None


@dataclass
class _Pipe:
    """The protocol's two pipes: commands to the browser, answers and events from it."""

    to_browser: int
    from_browser: int
    _buffer: bytes = b""
    _next_id: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self.from_browser], [], [], HANG_GUARD)
            if not ready:
                raise BrowserError(f"no word from the browser in {HANG_GUARD:.0f} s")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its end of the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events read meanwhile are kept."""
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            command["sessionId"] = session
        data = json.dumps(command).encode() + b"\0"
        while data:
            data = data[os.write(self.to_browser, data) :]
        while True:
            message = self._read_message()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, session: str) -> None:
        """Read until the event ``method`` of ``session`` (kept with the others)."""
        seen = len(self.events)
        while True:
            for event in self.events[seen:]:
                if event["method"] == method and event.get("sessionId") == session:
                    return
            seen = len(self.events)
            message = self._read_message()
            if "method" in message:
                self.events.append(message)


def _console_line(event: dict[str, Any]) -> str | None:
    """One console line of a protocol event, or None for an event that is no console message."""
    params = event.get("params", {})
    if event["method"] == "Runtime.consoleAPICalled":
        words = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
        return f"CONSOLE {params.get('type')}: {' '.join(words)}"
    if event["method"] == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        described = details.get("exception", {}).get("description", "")
        return f"{details.get('text', 'Uncaught')} {described}".strip()
    if event["method"] == "Log.entryAdded":
        entry = params.get("entry", {})
        if entry.get("level") == "verbose":
            return None
        return f"CONSOLE {entry.get('source')} {entry.get('level')}: {entry.get('text')}"
    return None


class Chromium:
    """A running headless Chromium; :meth:`render` opens one page in a fresh context."""

    def __init__(self, binary: str, home: Path) -> None:
        commands_read, commands_write = os.pipe()
        answers_read, answers_write = os.pipe()
        # the browser reads commands on fd 3 and writes answers on fd 4: bash puts them there
        # (subprocess keeps passed descriptors at their own numbers; dash's redirections take
        # one-digit descriptors only)
        remap = f'exec "$0" "$@" 3<&{commands_read} 4>&{answers_write}'
        self.log = home / "chromium.log"  # the browser's own log, named in a BrowserError
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                ["/bin/bash", "-c", remap, binary, *FLAGS, f"--user-data-dir={home / 'profile'}"],
                pass_fds=(commands_read, answers_write),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**os.environ, "HOME": str(home)},
            )
        os.close(commands_read)
        os.close(answers_write)
        self._pipe = _Pipe(to_browser=commands_write, from_browser=answers_read)

    def render(self, page: Path, *, width: int, height: int, screenshot: bool = False) -> Rendered:
        """Open ``page`` in a ``width`` x ``height`` window of a new browser context; its DOM
        after the load event, what it logged and, if asked, a PNG screenshot of the window."""
        pipe = self._pipe
        context = pipe.call("Target.createBrowserContext")["browserContextId"]
        try:
            target = pipe.call("Target.createTarget", url="about:blank", browserContextId=context)[
                "targetId"
            ]
            session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                pipe.call(f"{domain}.enable", session)
            pipe.call(
                "Emulation.setDeviceMetricsOverride",
                session,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            start = len(pipe.events)
            pipe.call("Page.navigate", session, url=page.as_uri())
            pipe.wait_for("Page.loadEventFired", session)
            dom = pipe.call(
                "Runtime.evaluate",
                session,
                expression="document.documentElement.outerHTML",
                returnByValue=True,
            )["result"]["value"]
            shot = None
            if screenshot:
                data = pipe.call("Page.captureScreenshot", session, format="png")["data"]
                shot = base64.b64decode(data)
            mine = [e for e in pipe.events[start:] if e.get("sessionId") == session]
            console = [line for line in map(_console_line, mine) if line is not None]
            pipe.events = [e for e in pipe.events if e.get("sessionId") != session]
            return Rendered(dom=str(dom), console=console, screenshot=shot)
        finally:
            pipe.call("Target.disposeBrowserContext", browserContextId=context)

    def close(self) -> None:
        try:
            self._pipe.call("Browser.close")
        except (BrowserError, OSError):
            pass  # already gone: the wait below ends it either way
        finally:
            os.close(self._pipe.to_browser)
            os.close(self._pipe.from_browser)
            try:
                self._process.wait(timeout=HANG_GUARD)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


def session_browser(home: Path) -> Iterator[Chromium]:
    """The body of the session's ``browser`` fixture (tests/conftest.py), which skips where
    :data:`CHROMIUM` is None."""
    assert CHROMIUM is not None
    browser = Chromium(CHROMIUM, home)
    try:
        yield browser
    finally:
        browser.close()
