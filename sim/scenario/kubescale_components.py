"""How kubescale's components join a simulated run: the ``kubescale`` section of a scenario.

A scenario enables components by name with their flags (``kubescale: {vpa-recommender:
{interval: 1m}}``). Each component registers a :class:`KubescaleComponent` in
:data:`COMPONENTS`; it validates its flags and, for a run, returns a :class:`ComponentSetup`:
control loops, routes on kubescale's TLS server (a webhook, the scheduler extender) and the
objects that wire it into the cluster (its MutatingWebhookConfiguration, ...).

The runner builds each loop on a real ``kubernetes.aio``-based :class:`~kube.client.KubeClient`
connected to the simulated API server over HTTPS, and calls ``run_once(now)`` itself when the
loop is due (first at the start, then every ``interval`` of simulated time, checked once per
step) instead of letting :class:`~kubescale.loop_runner.LoopRunner` sleep on the clock, so a run
is the same every time. A loop that reads an informer cache must make sure, at the start of
``run_once``, that its cache has caught up with the store (the runner's actors write between
loop runs).

No component exists yet, so :data:`COMPONENTS` is empty and any name in a scenario's
``kubescale`` section is an error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from aiohttp import web

from kube.client import KubeClient
from kubescale.loop_runner import Loop

__all__ = [
    "COMPONENTS",
    "ComponentContext",
    "ComponentSetup",
    "KubescaleComponent",
    "LoopFactory",
    "SimulatedLoop",
]

LoopFactory = Callable[[KubeClient, contextlib.AsyncExitStack], Awaitable[Loop]]
"""Builds a loop on the run's client; anything to close at the end goes on the exit stack."""


@dataclass(frozen=True, kw_only=True)
class SimulatedLoop:
    """A control loop of a simulated run: ``run_once(now)`` every ``interval`` simulated seconds."""

    name: str
    interval: float
    build: LoopFactory


@dataclass(frozen=True, kw_only=True)
class ComponentContext:
    """Where kubescale's TLS server is, as the cluster sees it (for webhook configurations)."""

    service_namespace: str
    service_name: str
    ca_bundle: str
    """base64 of the CA that signed the serving certificate (a webhook's ``caBundle``)."""


@dataclass(frozen=True, kw_only=True)
class ComponentSetup:
    loops: tuple[SimulatedLoop, ...] = ()
    mounts: tuple[Callable[[web.Application], None], ...] = ()
    """Routes added to kubescale's TLS server (before it starts)."""
    objects: tuple[Mapping[str, Any], ...] = ()
    """Created at start through admission, after the scenario's objects."""
    extenders: tuple[Mapping[str, Any], ...] = ()
    """Scheduler extender entries served by kubescale's TLS server: ``urlPrefix`` is a path on
    it (``/extender``); the runner makes it the server's HTTPS URL and trusts its CA."""


class KubescaleComponent(Protocol):
    def validate(self, flags: Mapping[str, Any], *, path: str) -> list[str]:
        """Problems with ``flags``, each ``"<path>.<flag>: <message>"``."""
        ...

    def setup(self, flags: Mapping[str, Any], *, context: ComponentContext) -> ComponentSetup:
        """What the component adds to a run."""
        ...


COMPONENTS: Final[Mapping[str, KubescaleComponent]] = {}
