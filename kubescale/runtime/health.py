"""Liveness, readiness and metrics on the plain (non-TLS) address, ``--address`` (``:8944``).

- ``/healthz`` (also ``/livez`` and upstream VPA's ``/health-check``): liveness. Fails when a
  registered liveness check fails, e.g. a loop has not completed for 5× its interval.
- ``/readyz``: readiness. Fails until the serving certificate is loaded and, once the access
  layer exists, the caches are synced.
- ``/metrics``: Prometheus exposition of the process registry.

Responses follow kube-apiserver's health endpoints: ``200 ok`` when all checks pass; otherwise
``500`` with one ``[+]name ok`` / ``[-]name failed: reason`` line per check. ``?verbose`` shows
the per-check lines on success too. Machines read only the status code.

Readiness *notes* are conditions an operator should see that do not make the process unready
(a component not started because the server does not serve its API): a ``[+]name <note>`` line
among the checks.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.aiohttp import make_aiohttp_handler

Check = Callable[[], str | None]
"""A health check: ``None`` when healthy, else the reason it is not."""


def new_process_registry() -> CollectorRegistry:
    """A registry with the process, platform (Python) and GC collectors on, for ``/metrics``."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class HealthChecks:
    """Named liveness and readiness checks, registered by the parts that own them."""

    def __init__(self) -> None:
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._notes: dict[str, str] = {}

    def add_liveness(self, name: str, check: Check) -> None:
        self._liveness[name] = check

    def add_readiness(self, name: str, check: Check) -> None:
        self._readiness[name] = check

    def add_readiness_note(self, name: str, note: str) -> None:
        """A ``/readyz`` line that does not fail readiness (module docstring)."""
        self._notes[name] = note

    @property
    def readiness_notes(self) -> dict[str, str]:
        return dict(self._notes)

    def liveness(self) -> dict[str, str | None]:
        return _run(self._liveness)

    def readiness(self) -> dict[str, str | None]:
        return _run(self._readiness)


def _run(checks: dict[str, Check]) -> dict[str, str | None]:
    results: dict[str, str | None] = {}
    for name, check in checks.items():
        try:
            results[name] = check()
        except Exception as exc:  # a broken check is a failed check, not a crashed probe
            results[name] = f"check raised {type(exc).__name__}: {exc}"
    return results


def _respond(
    request: web.Request,
    results: dict[str, str | None],
    what: str,
    notes: dict[str, str] | None = None,
) -> web.Response:
    healthy = all(reason is None for reason in results.values())
    if healthy and "verbose" not in request.query:
        return web.Response(text="ok")
    lines = [
        f"[+]{name} ok" if reason is None else f"[-]{name} failed: {reason}"
        for name, reason in results.items()
    ]
    lines += [f"[+]{name} {note}" for name, note in (notes or {}).items()]
    lines.append(f"{what} check {'passed' if healthy else 'failed'}")
    return web.Response(text="\n".join(lines) + "\n", status=200 if healthy else 500)


def make_health_app(*, checks: HealthChecks, registry: CollectorRegistry) -> web.Application:
    """The plain-HTTP application for probes and scraping."""

    async def liveness(request: web.Request) -> web.Response:
        return _respond(request, checks.liveness(), "healthz")

    async def readiness(request: web.Request) -> web.Response:
        return _respond(request, checks.readiness(), "readyz", checks.readiness_notes)

    app = web.Application()
    for path in ("/healthz", "/livez", "/health-check"):
        app.router.add_get(path, liveness)
    app.router.add_get("/readyz", readiness)
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    return app
