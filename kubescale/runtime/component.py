"""The component contract: how a system of the suite plugs into ``serve`` and ``simulate``.

A *component* is one system — the VPA admission webhook, the VPA recommender, the HPA
controller, the scheduler extender ... . It is declared once, by a :class:`ComponentSpec` in
the registry (:mod:`kubescale.components`), and that one entry is all ``kubescale serve`` and
``kubescale simulate`` need: both drive the very same component objects.

The spec says, before anything runs:

* ``name`` — the component's name: the scenario key (``kubescale: {vpa-updater: {...}}``), the
  label of its log lines, the requester of its caches;
* ``add_arguments`` — its flags (upstream's names and defaults), including its on/off flag
  (``--vpa-updater auto|true|false``: ``auto`` runs it in a cluster or with ``--kubeconfig``).
  Components that read the same flag declare it the same way; the flags are merged
  (:mod:`.component_flags`);
* ``settings`` — its typed settings, validated once, from the parsed flags; a value that parsed
  but makes no sense raises :class:`ComponentConfigError` naming the flag;
* ``serve_only_flags`` — flags a simulated run refuses (a Prometheus address, a Service name:
  things that mean nothing without a real cluster);
* ``build`` — the component object, given its settings and the process's :class:`Runtime`.

The built :class:`Component` then says what it needs and does:

* **caches** — while it is built it asks ``runtime.cache`` for the informers (and indexes) it
  reads; the process's one :class:`~kubescale.kube.shared_cache.SharedCache` lists and watches
  each collection once, and ``/readyz`` waits for all of them;
* **routes** — :meth:`Component.mount` adds its handlers to the TLS server (every replica);
  a scheduler extender also names its KubeSchedulerConfiguration entries
  (:meth:`Component.scheduler_extenders`);
* **loops** — :meth:`Component.loops`: each :class:`LoopSpec` is a ``run_once(now)`` on an
  interval, ``leader_only`` (only the replica holding the Lease runs it, and a leader-only loop
  writes through ``runtime.leader_client``) or not (every replica: status leases,
  registration);
* **metrics** — registered on ``runtime.registry`` while it is built;
* **life cycle** — :meth:`Component.start` once the caches have started (register, load
  state), :meth:`Component.stop` at shutdown (close what it opened).

What the simulator needs to settle a run reproducibly is part of the contract, not a second
protocol: the runner calls the same ``start`` and the same loops' ``run_once`` on a virtual
clock, settles the shared cache before each iteration, and collects what a loop reports
(:class:`ReportingLoop`) for the report's timeline.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.base.clock import Clock
from kubescale.base.coordination import DEFAULT_COORDINATION, Coordination
from kubescale.base.flag_types import FlagValueError
from kubescale.kube.client import KubeClient
from kubescale.kube.shared_cache import SharedCache
from kubescale.runtime.health import Check
from kubescale.runtime.loop_runner import Loop

__all__ = [
    "COMPONENT_MODES",
    "AlwaysLeader",
    "BaseComponent",
    "Component",
    "ComponentConfigError",
    "ComponentSettings",
    "ComponentSpec",
    "EnabledComponent",
    "Leadership",
    "LoopSpec",
    "ReportingLoop",
    "Runtime",
    "ServerCertificates",
    "ServiceRef",
    "TimelineReport",
]

COMPONENT_MODES = ("auto", "true", "false")
"""Values of a component's on/off flag."""


ComponentConfigError = FlagValueError
"""A flag value that parsed but does not make sense; the message names the flag."""


class Leadership(Protocol):
    """Whether this replica leads, and how many terms it has led (state kept by a loop should
    start over in a new term: another replica may have changed the world meanwhile)."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def term(self) -> int: ...


@dataclass
class AlwaysLeader:
    """The leadership of a process that runs alone (no election, or a simulated run)."""

    term: int = 1
    is_leader: bool = True


@dataclass(frozen=True, kw_only=True)
class ServerCertificates:
    """The TLS server's files, for components that publish its CA (webhook registration)."""

    client_ca_file: Path
    reload: bool
    reload_interval: float
    extender_client_ca_file: Path | None = None
    """``--extender-client-ca-file`` (the extender's client authentication), or ``None``."""


@dataclass(frozen=True, kw_only=True)
class ServiceRef:
    """The Service through which the cluster reaches this process's TLS server."""

    namespace: str
    name: str


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """What the process gives every component (``serve`` and ``simulate`` alike)."""

    client: KubeClient
    """The API client (servers and every-replica loops)."""
    leader_client: KubeClient
    """The client leader-only loops write through."""
    cache: SharedCache
    clock: Clock
    registry: CollectorRegistry
    leadership: Leadership
    identity: str
    """This replica's name (hostname), for Leases and event sources."""
    certificates: ServerCertificates
    service: ServiceRef | None = None
    """Where the cluster reaches the TLS server when the process knows it (a simulated run:
    ``kube-system/kubescale``); ``None`` in ``serve``, where components use their own flags
    (``--webhook-service`` ...)."""
    environ: Mapping[str, str] = field(default_factory=dict)
    coordination: Coordination = DEFAULT_COORDINATION
    """How the systems coordinate (``--coordination``, a scenario's ``coordination:``): every
    component reads it here (:mod:`kubescale.base.coordination`)."""


@dataclass(frozen=True, kw_only=True)
class LoopSpec:
    """A loop of a component and how it runs."""

    loop: Loop
    interval: float
    """Seconds between iteration starts (jittered by the runner in ``serve``)."""
    leader_only: bool = True
    """Run only on the replica holding the Lease (control loops); ``False``: every replica."""
    wake: asyncio.Event | None = None
    """Set by whoever wants the loop to run now instead of at its next interval (a cache miss
    that should be resolved at once); the runner clears it when the iteration starts. The
    simulator runs loops on their interval only."""


TimelineReport = tuple[str, str, str]
"""``(kind, subject, detail)`` of something a loop did, for the simulator's timeline."""


@runtime_checkable
class ReportingLoop(Protocol):
    """A loop that keeps a record of what it decided since it was last asked."""

    def drain_reports(self) -> list[TimelineReport]: ...


class Component(Protocol):
    """A built component (module docstring)."""

    @property
    def name(self) -> str: ...

    def mount(self, app: web.Application) -> None:
        """Add routes to the TLS application (before it starts)."""
        ...

    def loops(self) -> Sequence[LoopSpec]: ...

    def checks(self) -> Mapping[str, Check]:
        """Readiness checks beyond the shared cache's sync."""
        ...

    def scheduler_extenders(self) -> Sequence[Mapping[str, Any]]:
        """KubeSchedulerConfiguration ``extenders`` entries for routes this component serves
        (``urlPrefix`` a path on the TLS server). A simulated run points its scheduler at them;
        in a cluster the operator configures kube-scheduler with the same entries."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@runtime_checkable
class NeedsApis(Protocol):
    """A component whose API is not (only) its declared collections: ``serve`` asks it once at
    start-up, before starting it, which APIs it needs that the server does not serve (one line
    each; none: start it). The cluster autoscaler's Cluster API, whose version is discovered."""

    async def unserved_apis(self) -> Sequence[str]: ...


@runtime_checkable
class ConfiguredToRun(Protocol):
    """Settings of a system that ``auto`` runs only when it is configured (it evicts pods or
    deletes nodes): ``auto_off_reason`` says what is missing, ``None`` when configured."""

    @property
    def auto_off_reason(self) -> str | None: ...


class ComponentSettings(Protocol):
    """What every component's settings carry: the value of its on/off flag."""

    @property
    def mode(self) -> str:
        """``auto`` (in a cluster or with ``--kubeconfig``), ``true`` or ``false``."""
        ...


S = TypeVar("S", bound=ComponentSettings)


@dataclass(frozen=True, kw_only=True)
class ComponentSpec(Generic[S]):
    """One entry of the registry (module docstring)."""

    name: str
    title: str
    """What it is, in words (``the VPA updater``)."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    settings: Callable[[argparse.Namespace, Mapping[str, str]], S]
    build: Callable[[S, Runtime], Component]
    serve_only_flags: frozenset[str] = frozenset()
    """Flags a simulated run refuses (besides the on/off flag, which the scenario's
    ``kubescale`` section replaces)."""
    serves_https: bool = False
    """It mounts routes on the TLS server (the webhook, the scheduler extender): ``serve`` loads
    a serving certificate and listens for HTTPS only when a component that does runs."""

    @property
    def mode_flag(self) -> str:
        """The on/off flag, without dashes: the component's name."""
        return self.name


@dataclass(frozen=True)
class EnabledComponent:
    """A registry entry with the settings this process gives it."""

    spec: ComponentSpec[Any]
    settings: Any

    @property
    def name(self) -> str:
        return self.spec.name

    def build(self, runtime: Runtime) -> Component:
        return self.spec.build(self.settings, runtime)


class BaseComponent:
    """Defaults for the optional parts of :class:`Component` (no routes, loops or checks)."""

    name: str = ""

    def mount(self, app: web.Application) -> None:
        return None

    def loops(self) -> Sequence[LoopSpec]:
        return ()

    def checks(self) -> Mapping[str, Check]:
        return {}

    def scheduler_extenders(self) -> Sequence[Mapping[str, Any]]:
        return ()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None
