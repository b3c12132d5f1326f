"""``kubescale serve``: wiring of the TLS server, the health/metrics server and the loop runner.

Start-up order: logging → settings → serving certificate (a bad one ends the process with one
line naming the file) → Kubernetes client (when loops are gated or a component needs it) and
leader elector (when there are loops to gate) → components attach their routes and checks →
both listeners → components start (the VPA admission webhook: informers, registration, status
Lease) → certificate watcher and loops. The loops run only while this replica holds the
Lease (``--leader-elect``, on by default); the TLS server serves on every replica. On SIGTERM or
SIGINT the loops finish their iteration in progress (up to ``--graceful-shutdown-timeout``), the
Lease is released, the components stop, then the listeners close gracefully and the process
exits 0.

The VPA admission webhook (:mod:`kubescale.webhook.component`) is such a component; ``--webhook``
(``auto``: when in a cluster or given ``--kubeconfig``) decides whether :func:`run` adds it.
The VPA recommender (:mod:`kubescale.controllers.vpa.recommender.component`) is another, behind
``--vpa-recommender`` with the same ``auto`` rule, and so is the VPA updater
(:mod:`kubescale.controllers.vpa.updater.component`, ``--vpa-updater``); a component with
``loop_specs()`` adds its loops to the runner, gated on leadership like the others.
``Server.leadership_terms`` counts the terms this replica has led (a loop that keeps state
starts over in a new term).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.base.clock import Clock, RealClock
from kubescale.base.logs import component_logger, configure_logging
from kubescale.certs.authority import CertificateError
from kubescale.certs.reloading import ServerTLS
from kubescale.cli.serve_config import (
    ConfigError,
    ServeConfig,
    add_serve_arguments,
    serve_config_from_args,
)
from kubescale.controllers.vpa.recommender.component import RecommenderComponent
from kubescale.controllers.vpa.updater.component import UpdaterComponent
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.config_loading import SERVICE_HOST_ENV
from kubescale.kube.config_loading import ConfigError as KubeConfigError
from kubescale.kube.errors import KubeError
from kubescale.kube.leader_election import LeaderElector
from kubescale.runtime.health import HealthChecks, make_health_app, new_process_registry
from kubescale.runtime.https_server import make_https_app
from kubescale.runtime.loop_runner import Loop, LoopRunner
from kubescale.webhook.component import WebhookComponent

log = component_logger("serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_serve_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        config = serve_config_from_args(args)
    except ConfigError as exc:
        sys.stderr.write(f"kubescale serve: error: {exc}\n")
        return 2
    configure_logging(level=config.log_level, fmt=config.log_format)
    return asyncio.run(serve(config, clock=RealClock(), components=default_components(config)))


def default_components(
    config: ServeConfig, *, environ: Mapping[str, str] | None = None
) -> list[ServeComponent]:
    """The components ``kubescale serve`` runs: the VPA webhook, recommender and updater, each
    unless its flag (``--webhook``, ``--vpa-recommender``, ``--vpa-updater``) says no
    (``auto``: only in a cluster — ``$KUBERNETES_SERVICE_HOST`` set — or with
    ``--kubeconfig``)."""
    env = os.environ if environ is None else environ
    in_cluster = config.kubeconfig is not None or bool(env.get(SERVICE_HOST_ENV))

    def wanted(mode: str, what: str) -> bool:
        if mode == "auto" and not in_cluster:
            log.info("not in a cluster and no --kubeconfig: %s is off", what)
        return mode == "true" or (mode == "auto" and in_cluster)

    components: list[ServeComponent] = []
    if wanted(config.webhook.mode, "the VPA admission webhook"):
        components.append(WebhookComponent(config.webhook))
    if wanted(config.recommender.mode, "the VPA recommender"):
        components.append(RecommenderComponent(config.recommender))
    if wanted(config.updater.mode, "the VPA updater"):
        components.append(UpdaterComponent(config.updater))
    return components


@dataclass(frozen=True, kw_only=True)
class LoopSpec:
    """A loop and how often the runner runs it."""

    loop: Loop
    interval: float


@runtime_checkable
class LoopComponent(Protocol):
    """A component that also runs control loops (gated on leadership with the others)."""

    def loop_specs(self) -> Sequence[LoopSpec]: ...


class ServeComponent(Protocol):
    """A part of the process with routes, checks and background work (the VPA webhook).

    ``attach`` runs before the listeners open (mount routes, add health checks); ``start`` once
    they are up (``server.kube`` is connected when ``needs_kube``); ``stop`` after the loops
    have finished on shutdown.
    """

    @property
    def needs_kube(self) -> bool: ...

    def attach(self, server: Server) -> None: ...

    async def start(self, server: Server) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class Server:
    """The running process: its components, for tests and for routes added by later parts."""

    config: ServeConfig
    clock: Clock
    registry: CollectorRegistry
    checks: HealthChecks
    tls: ServerTLS
    runner: LoopRunner
    https_app: web.Application
    health_app: web.Application
    stop_event: asyncio.Event
    kube: KubeClient | None = None
    elector: LeaderElector | None = None
    https_port: int = 0
    health_port: int = 0
    leadership_terms: int = 0
    """Terms of leadership this replica has started (the loops run once per term)."""


async def serve(
    config: ServeConfig,
    *,
    clock: Clock,
    loops: Sequence[LoopSpec] = (),
    mounts: Sequence[Callable[[web.Application], None]] = (),
    components: Sequence[ServeComponent] = (),
    registry: CollectorRegistry | None = None,
    started: asyncio.Future[Server] | None = None,
    install_signal_handlers: bool = True,
) -> int:
    """Run until SIGTERM/SIGINT (or ``Server.stop_event``); returns the exit code.

    ``mounts`` add routes to the TLS application (the extender mounts its own); ``components``
    (the webhook) are attached, started and stopped with the server; ``started`` is resolved
    with the running :class:`Server` once both listeners are up and the components started.
    """
    registry = registry if registry is not None else new_process_registry()
    tls = ServerTLS(
        cert_file=config.tls_cert_file,
        key_file=config.tls_private_key,
        client_ca_file=config.client_ca_file if config.require_client_cert else None,
        require_client_cert=config.require_client_cert,
        min_version=config.min_tls_version,
        ciphers=config.tls_ciphers,
        registry=registry,
        logger=component_logger("tls"),
    )
    try:
        tls.load()
    except CertificateError as exc:
        log.error("cannot load the serving certificate: %s", exc)
        if started is not None and not started.done():
            started.set_exception(exc)
        return 1

    checks = HealthChecks()
    checks.add_readiness("certificates", lambda: None if tls.loaded else "not loaded")
    runner = LoopRunner(clock=clock, registry=registry)
    loops = [
        *loops,
        *(spec for c in components if isinstance(c, LoopComponent) for spec in c.loop_specs()),
    ]
    for spec in loops:
        runner.add(spec.loop, interval=spec.interval)

    server = Server(
        config=config,
        clock=clock,
        registry=registry,
        checks=checks,
        tls=tls,
        runner=runner,
        https_app=make_https_app(),
        health_app=make_health_app(checks=checks, registry=registry),
        stop_event=asyncio.Event(),
    )
    gate_loops = bool(loops) and config.leader_elect
    if gate_loops or any(component.needs_kube for component in components):
        try:
            server.kube = await connect(
                kubeconfig=config.kubeconfig, clock=clock, registry=registry
            )
        except (KubeConfigError, KubeError, OSError) as exc:
            log.error("cannot connect to Kubernetes: %s", exc)
            if started is not None and not started.done():
                started.set_exception(exc)
            return 1
    if gate_loops and server.kube is not None:
        elector = _elector(config, client=server.kube, clock=clock, registry=registry)
        server.elector = elector
        checks.add_liveness("leader-election", elector.healthz_check)
        # A standby replica's loops do not run: they are not stalled.
        checks.add_liveness("loops", lambda: runner.liveness_check() if elector.is_leader else None)
    else:
        checks.add_liveness("loops", runner.liveness_check)
    for mount in mounts:
        mount(server.https_app)
    for component in components:
        component.attach(server)
    https_runner = web.AppRunner(server.https_app, access_log=None)
    health_runner = web.AppRunner(server.health_app, access_log=None)
    await https_runner.setup()
    await health_runner.setup()
    started_components: list[ServeComponent] = []
    try:
        https_site = web.TCPSite(
            https_runner, config.bind_address, config.port, ssl_context=tls.listener_context()
        )
        health_site = web.TCPSite(health_runner, config.metrics_host, config.metrics_port)
        try:
            await https_site.start()
            await health_site.start()
        except OSError as exc:
            log.error("cannot listen: %s", exc)
            if started is not None and not started.done():
                started.set_exception(exc)
            return 1
        server.https_port = _bound_port(https_runner)
        server.health_port = _bound_port(health_runner)
        log.info(
            "serving",
            extra={"fields": {"https_port": server.https_port, "health_port": server.health_port}},
        )
        for component in components:
            await component.start(server)
            started_components.append(component)
        return await _run_until_stopped(
            server, started=started, install_signal_handlers=install_signal_handlers
        )
    finally:
        for component in reversed(started_components):
            await component.stop()
        await https_runner.cleanup()
        await health_runner.cleanup()
        if server.kube is not None:
            await server.kube.close()
        log.info("stopped")


def _elector(
    config: ServeConfig, *, client: KubeClient, clock: Clock, registry: CollectorRegistry
) -> LeaderElector:
    return LeaderElector(
        client=client,
        clock=clock,
        namespace=config.leader_elect_resource_namespace,
        name=config.leader_elect_resource_name,
        lease_duration=config.leader_elect_lease_duration,
        renew_deadline=config.leader_elect_renew_deadline,
        retry_period=config.leader_elect_retry_period,
        registry=registry,
        logger=component_logger("leader-election"),
    )


async def _run_until_stopped(
    server: Server, *, started: asyncio.Future[Server] | None, install_signal_handlers: bool
) -> int:
    loop = asyncio.get_running_loop()
    if install_signal_handlers:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, server.stop_event.set)
    watcher: asyncio.Task[None] | None = None
    if server.config.reload_cert:
        watcher = asyncio.create_task(
            server.tls.watch(
                clock=server.clock,
                interval=server.config.cert_reload_interval,
                stop=server.stop_event,
            )
        )
    elector_stop = asyncio.Event()
    if server.elector is not None:
        # Loops run only while this replica holds the Lease; on stop the elector waits for the
        # iteration in progress to finish, then releases the Lease for the next replica.

        async def lead() -> None:
            server.leadership_terms += 1
            await server.runner.run()

        loops = asyncio.create_task(server.elector.run(on_started_leading=lead, stop=elector_stop))
    else:
        loops = asyncio.create_task(server.runner.run())
    if started is not None and not started.done():
        started.set_result(server)
    try:
        await server.stop_event.wait()
        log.info("stopping: letting loops finish their iteration")
        server.runner.stop()
        elector_stop.set()
        try:
            await asyncio.wait_for(
                asyncio.shield(loops), timeout=server.config.graceful_shutdown_timeout
            )
        except TimeoutError:
            log.warning(
                "loops did not finish within %.0fs; cancelling them",
                server.config.graceful_shutdown_timeout,
            )
            loops.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loops
        return 0
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if install_signal_handlers:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            port: int = address[1]
            return port
    raise RuntimeError("listener has no address")
