"""The process: TLS server, health/metrics server, components and their loops, until stopped.

:func:`serve` is what ``kubescale serve`` runs (:mod:`kubescale.cli.serve` parses the flags and
picks the components) and what a simulated run uses to serve its components' routes.

Start-up order: serving certificate (a bad one ends the process with one line naming the file;
none at all when no component serves HTTPS — below) → Kubernetes client (when a component or
a gated loop needs it) → the one :class:`~kubescale.kube.shared_cache.SharedCache` → each
enabled component is built (declaring the collections it reads, its routes, loops and
metrics; :mod:`kubescale.runtime.component`)
→ discovery: a component needing a resource the server does not serve (Cluster API on a
cluster without it) is not started — one warning line naming the component and the
resources, a ``[+]<component>-api`` note in ``/readyz?verbose``, the
``kubescale_component_api_not_served`` gauge — and its own collections are dropped
→ one log line (and the ``kubescale_cache_watched_collections`` gauge) lists the collections
watched and who asked for them → leader elector (when there are leader-only loops) → routes →
both listeners → caches start → components start → certificate watcher and loops.

The TLS server (and its certificate, self-managed or mounted) exists only for routes: when
components are given and none of them serves HTTPS (neither the webhook nor the scheduler
extender runs) and no routes are mounted, a loops-only replica loads no certificate and opens
no HTTPS listener; its health and metrics are served on plain HTTP at ``--address``, as
upstream's VPA recommender and updater serve theirs (``--address`` ``:8942``/``:8943``, no TLS
flags at all). A bare process (no components: tests) always serves HTTPS.

Each component's loops wait until its own collections have synced
(:mod:`kubescale.runtime.cache_gate`; again after a re-list), and its ``/readyz`` check
``<component>-caches`` names those still loading: one component's caches never hold another.

Loops run on two runners: leader-only loops (the control loops) only while this replica holds
the Lease (``--leader-elect``, on by default); every-replica loops (status Leases,
registration, the ``/scale`` lookups) always. The TLS server serves on every replica. On SIGTERM
or SIGINT the loops finish their iteration in progress (up to ``--graceful-shutdown-timeout``;
then they are cancelled without waiting for a decision still computing on a worker thread:
:func:`kubescale.runtime.off_loop.abandon_computing`), the Lease is released, the components
stop, then the listeners close gracefully and the function returns 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge

from kubescale.base.clock import Clock, RealClock
from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.certs.authority import CertificateError, service_dns_names
from kubescale.certs.reloading import ServerTLS
from kubescale.kube.client import ClientSettings, KubeClient, connect
from kubescale.kube.config_loading import ConfigError as KubeConfigError
from kubescale.kube.errors import KubeError
from kubescale.kube.informer import Informer
from kubescale.kube.leader_election import LeaderElector
from kubescale.kube.served_resources import api_name, unserved
from kubescale.kube.shared_cache import SharedCache
from kubescale.runtime import event_loop
from kubescale.runtime.cache_gate import CacheGate
from kubescale.runtime.cache_loops import scale_lookups_loop
from kubescale.runtime.component import (
    Component,
    EnabledComponent,
    LoopSpec,
    NeedsApis,
    Runtime,
    ServerCertificates,
)
from kubescale.runtime.election_thread import ElectionThread
from kubescale.runtime.guarded_listener import GuardedListener
from kubescale.runtime.health import HealthChecks, make_health_app, new_process_registry
from kubescale.runtime.https_server import BodyBudget, lean_routes, make_https_app
from kubescale.runtime.loop_runner import LoopMetrics, LoopRunner
from kubescale.runtime.off_loop import abandon_computing
from kubescale.runtime.process_config import ProcessConfig
from kubescale.runtime.tls_secret import SelfManagedTLS, TLSSecretError

__all__ = ["LoopSpec", "Server", "serve"]

log = component_logger("serve")


@dataclass
class _LeadershipOf:
    """:class:`kubescale.runtime.component.Leadership` of a ``serve`` process: its elector's
    (always leading without one)."""

    server: Server | None = None

    @property
    def is_leader(self) -> bool:
        elector = self.server.elector if self.server is not None else None
        return elector.is_leader if elector is not None else True

    @property
    def may_write(self) -> bool:
        elector = self.server.elector if self.server is not None else None
        return elector.may_write if elector is not None else True

    @property
    def term(self) -> int:
        return self.server.leadership_terms if self.server is not None else 0


@dataclass
class Server:
    """The running process, for tests and for routes added by later parts."""

    config: ProcessConfig
    clock: Clock
    registry: CollectorRegistry
    checks: HealthChecks
    tls: ServerTLS | None
    """The serving certificate; ``None`` when no HTTPS server runs (module docstring)."""
    runner: LoopRunner
    """Leader-only loops (every loop when nothing is elected)."""
    replica_runner: LoopRunner
    """Loops of every replica."""
    https_app: web.Application
    health_app: web.Application
    stop_event: asyncio.Event
    kube: KubeClient | None = None
    cache: SharedCache | None = None
    runtime: Runtime | None = None
    components: list[Component] = field(default_factory=list)
    gates: dict[str, CacheGate] = field(default_factory=dict)
    """Each started component's collections (what its loops wait for), by component name."""
    not_started: dict[str, list[str]] = field(default_factory=dict)
    """Components not started because the server does not serve these resources of theirs."""
    elector: LeaderElector | None = None
    election: ElectionThread | None = None
    """The thread the elector campaigns on (real clock), else ``None``: it runs on this loop."""
    https_port: int = 0
    """The HTTPS listener's port; 0 when no HTTPS server runs."""
    health_port: int = 0
    leadership_terms: int = 0
    """Terms of leadership this replica has started (the loops run once per term)."""


def _watched_collections_gauge(registry: CollectorRegistry) -> Gauge:
    return Gauge(
        "kubescale_cache_watched_collections",
        "Collections the process lists and watches once for every component (1 each), with "
        "the components that read them.",
        ["collection", "components"],
        registry=registry,
    )


@dataclass
class _Stopping:
    """How a signal stops the process: during start-up by cancelling the start-up (connecting,
    discovery, building and starting components: whatever it waits on), once running by
    setting the running server's ``stop_event`` (loops finish their iteration)."""

    stop_event: asyncio.Event | None = None
    """The running server's, once start-up is over."""
    interrupted: str = ""
    """The signal that cancelled the start-up."""


async def serve(
    config: ProcessConfig,
    *,
    clock: Clock,
    loops: Sequence[LoopSpec] = (),
    mounts: Sequence[Callable[[web.Application], None]] = (),
    components: Sequence[EnabledComponent] = (),
    registry: CollectorRegistry | None = None,
    started: asyncio.Future[Server] | None = None,
    install_signal_handlers: bool = True,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run until SIGTERM/SIGINT (or ``Server.stop_event``); returns the exit code.

    ``components`` are built on this process's runtime, started and stopped with it; ``loops``
    and ``mounts`` add loops and routes of their own (tests, the simulator's TLS server);
    ``started`` is resolved with the running :class:`Server` once both listeners are up and the
    components started.

    A signal during start-up (an API server that does not answer can hold it for long) is
    logged and cancels the start-up, which releases what it opened; the process then exits 0
    (issue 32.6: it used to die of the signal, 143, with no log line).
    """
    stopping = _Stopping()
    work = asyncio.create_task(
        _serve(
            config,
            clock=clock,
            loops=loops,
            mounts=mounts,
            components=components,
            registry=registry,
            started=started,
            stopping=stopping,
            environ=environ,
        )
    )
    loop = asyncio.get_running_loop()

    def on_signal(signum: signal.Signals) -> None:
        if stopping.stop_event is not None:
            stopping.stop_event.set()
        elif not work.done() and not stopping.interrupted:
            stopping.interrupted = signum.name
            log.warning("%s during start-up: stopping", signum.name)
            work.cancel()

    if install_signal_handlers:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal, signum)
    try:
        return await work
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not stopping.interrupted or (current is not None and current.cancelling()):
            raise  # aimed at this task, not the start-up a signal cancelled
        if started is not None and not started.done():
            started.cancel()
        log.info("stopped")
        return 0
    finally:
        if install_signal_handlers:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)


async def _serve(
    config: ProcessConfig,
    *,
    clock: Clock,
    loops: Sequence[LoopSpec],
    mounts: Sequence[Callable[[web.Application], None]],
    components: Sequence[EnabledComponent],
    registry: CollectorRegistry | None,
    started: asyncio.Future[Server] | None,
    stopping: _Stopping,
    environ: Mapping[str, str] | None,
) -> int:
    registry = registry if registry is not None else new_process_registry()

    def fail(exc: BaseException) -> int:
        if started is not None and not started.done():
            started.set_exception(exc)
        return 1

    kube: KubeClient | None = None
    self_managed: SelfManagedTLS | None = None
    https = serves_https(components, mounts=bool(mounts))
    if not https:
        log.info(
            "no HTTPS server: neither the webhook nor the scheduler extender runs; "
            "no serving certificate needed"
        )
    if https and config.tls_secret_name:
        # Self-managed certificates: the Secret is read (or created) before the first load.
        try:
            kube = await _connect(config, clock=clock, registry=registry)
        except (KubeConfigError, KubeError, OSError) as exc:
            log.error("cannot connect to Kubernetes: %s", exc)
            return fail(exc)
        self_managed = SelfManagedTLS(
            client=kube,
            clock=clock,
            namespace=config.leader_elect_resource_namespace,
            name=config.tls_secret_name,
            names=service_dns_names(
                config.tls_secret_service, config.leader_elect_resource_namespace
            ),
            cert_file=config.tls_cert_file,
            key_file=config.tls_private_key,
            ca_file=config.client_ca_file,
            logger=component_logger("tls-secret"),
        )
        try:
            await self_managed.sync()
        except (TLSSecretError, CertificateError, OSError) as exc:
            await kube.close()
            log.error("cannot set up the self-managed certificates: %s", exc)
            return fail(exc)
    tls: ServerTLS | None = None
    checks = HealthChecks()
    if https:
        tls = ServerTLS(
            cert_file=config.tls_cert_file,
            key_file=config.tls_private_key,
            client_ca_file=config.client_ca_file if config.require_client_cert else None,
            require_client_cert=config.require_client_cert,
            optional_client_ca_file=config.extender_client_ca_file,
            min_version=config.min_tls_version,
            ciphers=config.tls_ciphers,
            registry=registry,
            logger=component_logger("tls"),
        )
        try:
            tls.load()
        except CertificateError as exc:
            if kube is not None:
                await kube.close()
            log.error("cannot load the serving certificate: %s", exc)
            return fail(exc)
        loaded = tls
        checks.add_readiness("certificates", lambda: None if loaded.loaded else "not loaded")
    loop_metrics = LoopMetrics(registry)
    leadership = _LeadershipOf()
    server = Server(
        config=config,
        clock=clock,
        registry=registry,
        checks=checks,
        tls=tls,
        runner=LoopRunner(
            clock=clock,
            registry=registry,
            metrics=loop_metrics,
            gate=lambda: leadership.is_leader,
        ),
        replica_runner=LoopRunner(clock=clock, registry=registry, metrics=loop_metrics),
        https_app=make_https_app(
            budget=BodyBudget(config.limits.max_in_flight_body_bytes, registry=registry)
        ),
        health_app=make_health_app(checks=checks, registry=registry),
        stop_event=asyncio.Event(),
        kube=kube,
    )
    leadership.server = server
    specs: list[tuple[LoopSpec, CacheGate | None]] = [(spec, None) for spec in loops]
    if self_managed is not None:
        # Every replica follows the Secret (and renews it when due: conflict-safe writes).
        specs.append(
            (
                LoopSpec(
                    loop=self_managed, interval=config.cert_reload_interval, leader_only=False
                ),
                None,
            )
        )
    if server.kube is None and (components or (specs and config.leader_elect)):
        try:
            server.kube = await _connect(config, clock=clock, registry=registry)
        except (KubeConfigError, KubeError, OSError) as exc:
            log.error("cannot connect to Kubernetes: %s", exc)
            return fail(exc)
    try:
        if components and server.kube is not None:
            specs += await _build_components(server, components, environ=environ)
        for spec, caches in specs:
            runner = server.runner if spec.leader_only else server.replica_runner
            runner.add(spec.loop, interval=spec.interval, wake=spec.wake, caches=caches)
        _add_liveness(server, gated=any(s.leader_only for s, _ in specs) and config.leader_elect)
        for mount in mounts:
            mount(server.https_app)
        for component in server.components:
            component.mount(server.https_app)
        return await _listen_and_run(server, started=started, fail=fail, stopping=stopping)
    finally:
        if server.kube is not None:
            await server.kube.close()
        if not stopping.interrupted:
            log.info("stopped")


def serves_https(components: Sequence[EnabledComponent], *, mounts: bool) -> bool:
    """Whether the process runs the TLS server (module docstring): routes are mounted, a
    component serving HTTPS runs, or no component is given at all."""
    return mounts or not components or any(c.spec.serves_https for c in components)


async def _connect(
    config: ProcessConfig, *, clock: Clock, registry: CollectorRegistry
) -> KubeClient:
    return await connect(
        kubeconfig=config.kubeconfig,
        clock=clock,
        registry=registry,
        settings=ClientSettings(qps=config.kube_api_qps, burst=config.kube_api_burst),
    )


async def _build_components(
    server: Server, components: Sequence[EnabledComponent], *, environ: Mapping[str, str] | None
) -> list[tuple[LoopSpec, CacheGate | None]]:
    """Build the components on one runtime; start none whose API the server does not serve;
    their loops, each with its component's caches (plus the /scale lookups loop)."""
    client = server.kube
    assert client is not None
    config = server.config
    cache = SharedCache(client=client, clock=server.clock, coordination=config.coordination)
    server.cache = cache
    leadership = _LeadershipOf(server)
    runtime = Runtime(
        client=client,
        # Leader-only loops write through this: a write is refused unless the replica holds
        # the Lease at the moment it is sent (an iteration may outlive the leadership).
        leader_client=client.gated(lambda: leadership.may_write),
        cache=cache,
        clock=server.clock,
        registry=server.registry,
        leadership=leadership,
        identity=socket.gethostname(),
        certificates=ServerCertificates(
            client_ca_file=config.client_ca_file,
            reload=config.reload_cert,
            reload_interval=config.cert_reload_interval,
            extender_client_ca_file=config.extender_client_ca_file,
        ),
        environ=dict(os.environ if environ is None else environ),
        coordination=config.coordination,
    )
    server.runtime = runtime
    built: list[tuple[EnabledComponent, Component]] = []
    for enabled in components:
        with cache.informers.requested_by(enabled.name):
            built.append((enabled, enabled.build(runtime)))
    built = await _with_their_apis(server, cache, built)
    specs: list[tuple[LoopSpec, CacheGate | None]] = []
    for enabled, component in built:
        gate = CacheGate(
            enabled.name,
            cache.informers.requested(enabled.name, optional=False),
            cache.informers.requested(enabled.name, optional=True),
        )
        server.gates[enabled.name] = gate
        server.components.append(component)
        specs.extend((spec, gate) for spec in component.loops())
        server.checks.add_readiness(f"{enabled.name}-caches", gate.readiness_check)
        for name, check in component.checks().items():
            server.checks.add_readiness(f"{enabled.name}-{name}", check)
    specs.append((scale_lookups_loop(cache), None))
    collections = cache.collections()
    gauge = _watched_collections_gauge(server.registry)
    for collection, requesters in collections.items():
        gauge.labels(collection, ",".join(requesters)).set(1)
    _collection_state_gauges(server.registry, cache)
    log.info(
        "watching collections",
        extra={
            "fields": {
                "components": [c.name for c, _ in built],
                "collections": {name: list(who) for name, who in collections.items()},
            }
        },
    )
    return specs


async def _with_their_apis(
    server: Server, cache: SharedCache, built: list[tuple[EnabledComponent, Component]]
) -> list[tuple[EnabledComponent, Component]]:
    """The components whose needed collections the server serves; the others are not started
    (module docstring)."""
    client = server.kube
    assert client is not None
    needed = {
        enabled.name: cache.informers.requested(enabled.name, optional=False)
        for enabled, _ in built
    }
    missing = await unserved(
        client, {informer.resource for informers in needed.values() for informer in informers}
    )
    beyond: dict[str, list[str]] = {}
    for enabled, component in built:
        if isinstance(component, NeedsApis):
            reasons = list(await component.unserved_apis())
            if reasons:
                beyond[enabled.name] = reasons
    if not missing and not beyond:
        return built
    gauge = Gauge(
        "kubescale_component_api_not_served",
        "1 for each resource a component needs that the API server does not serve (its "
        "CRD is not installed): the component was not started.",
        ["component", "resource"],
        registry=server.registry,
    )
    kept: list[tuple[EnabledComponent, Component]] = []
    for enabled, component in built:
        absent = sorted(
            {api_name(i.resource) for i in needed[enabled.name] if i.resource in missing}
        ) + beyond.get(enabled.name, [])
        if not absent:
            kept.append((enabled, component))
            continue
        server.not_started[enabled.name] = absent
        cache.informers.discard(enabled.name)
        for resource in absent:
            gauge.labels(enabled.name, resource).set(1)
        reason = f"not started: the API server does not serve {', '.join(absent)}"
        server.checks.add_readiness_note(f"{enabled.name}-api", reason)
        log.warning(
            "%s not started: the API server does not serve its API",
            enabled.spec.title,
            extra={"fields": {"component": enabled.name, "not_served": absent}},
        )
        await component.stop()  # built, never started: release what it opened
    return kept


def _collection_state_gauges(registry: CollectorRegistry, cache: SharedCache) -> None:
    synced = Gauge(
        "kubescale_cache_collection_synced",
        "1 while the collection's cache reflects a complete list (0 before the first list and "
        "during a re-list after 410 Gone).",
        ["collection"],
        registry=registry,
    )
    absent = Gauge(
        "kubescale_cache_collection_absent",
        "1 while the API server answers the collection's list with 404 (not served).",
        ["collection"],
        registry=registry,
    )
    for informer in cache.informers.informers:
        synced.labels(informer.name).set_function(_reading(informer, "synced"))
        absent.labels(informer.name).set_function(_reading(informer, "absent"))


def _reading(informer: Informer[Any], state: str) -> Callable[[], float]:
    def read() -> float:
        return float(informer.synced if state == "synced" else informer.absent)

    return read


def _add_liveness(server: Server, *, gated: bool) -> None:
    runner, replica_runner = server.runner, server.replica_runner
    server.checks.add_liveness("replica-loops", replica_runner.liveness_check)
    if not gated:
        server.checks.add_liveness("loops", runner.liveness_check)
        return
    # A standby replica's leader-only loops do not run: they are not stalled.
    server.checks.add_liveness(
        "loops",
        lambda: (
            runner.liveness_check()
            if server.elector is not None and server.elector.is_leader
            else None
        ),
    )


async def _listen_and_run(
    server: Server,
    *,
    started: asyncio.Future[Server] | None,
    fail: Callable[[BaseException], int],
    stopping: _Stopping,
) -> int:
    config = server.config
    if server.runner.loop_names and config.leader_elect and server.kube is not None:
        if isinstance(server.clock, RealClock):
            # Renewal on a thread and loop of its own: CPU work on this loop (a flood of
            # extender filters, a heavy loop iteration) cannot make the leader miss its renew
            # deadline (issue 27 item 11; module kubescale.runtime.election_thread).
            server.election = _election_thread(config, server)
            try:
                elector = await server.election.start()
            except (KubeConfigError, KubeError, OSError) as exc:
                log.error("cannot connect to Kubernetes for leader election: %s", exc)
                return fail(exc)
        else:
            elector = _elector(
                config, client=server.kube, clock=server.clock, registry=server.registry
            )
        server.elector = elector
        server.checks.add_liveness("leader-election", elector.healthz_check)
    https_runner = web.AppRunner(server.https_app, access_log=None)
    health_runner = web.AppRunner(server.health_app, access_log=None)
    await https_runner.setup()
    await health_runner.setup()
    assert https_runner.server is not None
    https_listener = (
        GuardedListener(
            server=https_runner.server,
            ssl_context=server.tls.listener_context(),
            limits=config.limits,
            host=config.bind_address,
            port=config.port,
            registry=server.registry,
            logger=component_logger("https"),
            lean=lean_routes(server.https_app),
        )
        if server.tls is not None
        else None
    )
    started_components: list[Component] = []
    try:
        health_site = web.TCPSite(health_runner, config.metrics_host, config.metrics_port)
        try:
            if https_listener is not None:
                await https_listener.start()
            await health_site.start()
        except OSError as exc:
            log.error("cannot listen: %s", exc)
            return fail(exc)
        server.https_port = https_listener.port if https_listener is not None else 0
        server.health_port = _bound_port(health_runner)
        log.info(
            "serving",
            extra={"fields": {"https_port": server.https_port, "health_port": server.health_port}},
        )
        if server.cache is not None:
            server.cache.start()
        for component in server.components:
            await component.start()
            started_components.append(component)
        return await _run_until_stopped(server, started=started, stopping=stopping)
    finally:
        if server.election is not None:
            await server.election.close()
        for component in reversed(started_components):
            await component.stop()
        if server.cache is not None:
            await server.cache.stop()
        if https_listener is not None:
            await https_listener.stop()
        await https_runner.cleanup()
        await health_runner.cleanup()


def _elector(
    config: ProcessConfig, *, client: KubeClient, clock: Clock, registry: CollectorRegistry
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


def _election_thread(config: ProcessConfig, server: Server) -> ElectionThread:
    clock = server.clock
    registry = server.registry

    async def lease_client() -> KubeClient:
        # Its own client: an aiohttp session belongs to the loop that made it. Its request
        # metrics stay off the process registry (the main client registers them there).
        return await connect(
            kubeconfig=config.kubeconfig,
            clock=clock,
            settings=ClientSettings(qps=config.kube_api_qps, burst=config.kube_api_burst),
        )

    return ElectionThread(
        connect=lease_client,
        make_elector=lambda client: _elector(config, client=client, clock=clock, registry=registry),
        loop_factory=event_loop.loop_factory(),
        logger=component_logger("leader-election"),
    )


async def _run_until_stopped(
    server: Server, *, started: asyncio.Future[Server] | None, stopping: _Stopping
) -> int:
    stopping.stop_event = server.stop_event  # a signal from now on lets the loops finish
    watcher: asyncio.Task[None] | None = None
    if server.config.reload_cert and server.tls is not None:
        watcher = asyncio.create_task(
            server.tls.watch(
                clock=server.clock,
                interval=server.config.cert_reload_interval,
                stop=server.stop_event,
            )
        )
    elector_stop = asyncio.Event()
    replica_loops = asyncio.create_task(server.replica_runner.run())
    if server.election is not None:

        async def lead_here() -> None:
            server.leadership_terms += 1
            await server.runner.run()

        loops = asyncio.create_task(server.election.run(work=lead_here, stop=elector_stop))
    elif server.elector is not None:
        # Loops run only while this replica holds the Lease; on stop the elector waits for the
        # iteration in progress to finish, then releases the Lease for the next replica.

        async def lead() -> None:
            server.leadership_terms += 1
            await server.runner.run()

        loops = asyncio.create_task(server.elector.run(on_started_leading=lead, stop=elector_stop))
    else:
        server.leadership_terms = 1
        loops = asyncio.create_task(server.runner.run())
    if started is not None and not started.done():
        started.set_result(server)
    try:
        await server.stop_event.wait()
        log.info("stopping: letting loops finish their iteration")
        server.runner.stop()
        server.replica_runner.stop()
        elector_stop.set()
        both = asyncio.gather(loops, replica_loops)
        try:
            await asyncio.wait_for(
                asyncio.shield(both), timeout=server.config.graceful_shutdown_timeout
            )
        except TimeoutError:
            log.warning(
                "loops did not finish within %.0fs; cancelling them",
                server.config.graceful_shutdown_timeout,
            )
            # A decision computing on a worker thread cannot be interrupted: the loops stop
            # waiting for it (its result is dropped), so their tasks end now and the elector
            # releases the Lease at once, as client-go's ReleaseOnCancel does on cancel without
            # waiting for the leader's work (bench 27.11: released 35.6 s after SIGTERM).
            abandon_computing(asyncio.get_running_loop())
            await cancel_and_wait(loops, replica_loops)
            # the loops' expected CancelledError ends the gather too: retrieved, not logged
            both.add_done_callback(_retrieve)
        return 0
    finally:
        await cancel_and_wait(watcher)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            port: int = address[1]
            return port
    raise RuntimeError("listener has no address")
