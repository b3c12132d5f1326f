"""Running a scenario: the simulated cluster, kubescale, and a VirtualClock stepping them.

:class:`SimulationRun` owns, for one run: a :class:`~kubescale.base.clock.VirtualClock` starting at
the scenario's ``start``; an :class:`~kubescale.sim.apiserver.server.ApiServer` seeded with the
scenario seed (uids and generated names are the same every run); kubescale's TLS server with
generated certificates, registered as the Service ``kube-system/kubescale`` so admission webhooks
reach it over TLS; a ``kubernetes.aio``-based :class:`~kubescale.kube.client.KubeClient` on the API
server's kubeconfig for kubescale's loops; the cluster's actors; and the report's
:class:`~.timeline.Timeline`.

kubescale's components are the registry's (:mod:`kubescale.components`), built exactly as
``kubescale serve`` builds them — the same component objects on a
:class:`~kubescale.runtime.component.Runtime` whose client talks to the simulated API server,
one shared cache for all of them — enabled and configured by the scenario's ``kubescale``
section (:mod:`.scenario_components`). At start the run serves their routes on kubescale's TLS
server, starts the shared cache and waits for it to sync, creates the namespaces and the raw
``objects`` (in order, through admission), starts the components (the webhook registers
itself), then creates the workloads; the scheduler gets the scenario's extenders plus those
the components serve on kubescale's TLS server (the shared cache is settled before each call
to them, as before a loop runs). Each step at ``t`` (``0, step, 2·step, ...`` while
``t < duration``):

1. the events due (``at ≤ t``) are applied in time order (:mod:`.event_application`);
2. the actors step, in the fixed order node groups → workload controllers → scheduler → kubelet;
3. every kubescale loop that is due runs ``run_once(now)`` (first at ``t = 0``, then when
   ``interval`` has passed since its last start; a loop error is logged and counted, the run goes
   on), in the order the loops fell due: one due since before ``t`` — in particular one whose
   interval is shorter than the step, which a real process would have run, maybe several times,
   between the two steps — runs before the loops due at ``t`` that read its effect (the webhook's
   status Lease, renewed every 10 s, before the updater that checks it is less than a minute old),
   and its iterations inside the step are this one. Loops due at the same moment run in the order
   they were built. Every intent a loop's plan executor applies goes to the run's
   :class:`~kubescale.plans.journal.PlanJournal` (the report's ``plans``). Before a loop runs,
   the shared cache is settled if the store changed since it was last settled: the API server
   sends a BOOKMARK at its current resourceVersion on every open watch, and the runner waits
   until every informer has processed it. What a loop reports
   (:class:`~kubescale.runtime.component.ReportingLoop`) joins the step's events;
4. the step is recorded in the timeline (the kubelet's container samples, every pod and node,
   the step's events);
5. the clock advances one step.

Determinism: all time is the VirtualClock's and all randomness comes from the scenario seed; the
actors iterate in sorted order. kubescale's client sees the virtual time, but its waits (retry
back-off) take no simulated time — the simulation moves time only between steps, and a loop
must finish before the step ends, so a run never depends on how fast the machine is. A wait
first lets the informers declared since (the Cluster API caches the cluster autoscaler declares
at its first iteration) list, so what a loop decides does not depend on the event loop's
callback order either (:class:`SimulationClientClock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.resources import (
    HORIZONTAL_POD_AUTOSCALERS,
    NODES,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.plans.executor import observe_plans
from kubescale.plans.journal import PlanJournal
from kubescale.runtime.cache_loops import scale_lookups_loop
from kubescale.runtime.component import (
    AlwaysLeader,
    Component,
    ReportingLoop,
    Runtime,
    ServerCertificates,
    ServiceRef,
)
from kubescale.runtime.loop_runner import Loop
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.trace_replay import Trace
from kubescale.sim.cluster.usage_models import UsageBook

from .autoscaler_records import AutoscalerRecord
from .cluster_actors import ClusterActors, build_cluster_actors
from .cluster_objects import namespace_manifest, workload_manifest
from .event_application import apply_event
from .kubescale_server import SERVICE_NAME, SERVICE_NAMESPACE, KubescaleTLSServer
from .report_assembly import assemble_report
from .scenario_components import enabled_components
from .scenario_format import Scenario, SetLoadEvent
from .time_statistics import rounded
from .timeline import Timeline, TimelineEvent
from .usage_specs import build_usage_model, load_traces

__all__ = [
    "SKIPPED_SUFFIX",
    "LoopState",
    "SimulationClientClock",
    "SimulationError",
    "SimulationRun",
    "run_scenario",
]

log = component_logger("simulation")

_EPSILON: Final = 1e-9
SKIPPED_SUFFIX: Final = "-skipped"
"""A loop report of a kind ending so (``vpa-updater-skipped``) is an iteration that skipped its
work; the run counts them per loop and the report says so."""
_SETTLE_ATTEMPTS: Final = 100
_SETTLE_WAIT: Final = 0.1
"""Event-loop seconds to wait for the informers after each round of bookmarks: a watch being
re-opened at that moment misses a round and gets the next one."""
_CACHE_SYNC_TIMEOUT: Final = 30.0
_INFORMER_TASK: Final = "informer:"
"""How :meth:`kubescale.kube.informer.Informer.start` names an informer's list/watch task."""
IDENTITY: Final = "kubescale-simulated"
"""The simulated replica's name (Leases, event sources)."""


class SimulationError(Exception):
    """A run that cannot start: an object of the scenario the API server refused."""


class SimulationClientClock:
    """kubescale's view of a run's clock: the virtual time, and waits that take no time.

    A loop's request retried after an injected fault would otherwise sleep on the VirtualClock,
    which only moves between steps, while the step waits for the loop: the run would stall.

    A wait takes no simulated time, but it lets the caches catch up first: before it returns,
    :attr:`before_wake` (the run's :meth:`SimulationRun.sync_declared`) waits until the
    collections declared since the last wait have listed. In a real process a wait of seconds
    gives a fresh informer time for its first list (the cluster autoscaler waits up to 10 s for
    the Cluster API caches it declares at its first iteration, upstream's
    ``WaitForCacheSync`` in ``newMachineController``); without this, whether the list answered
    before a zero-time wait ended depended on the event loop's callback order (issue 30).
    """

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self.before_wake: Callable[[], Awaitable[None]] | None = None

    def now(self) -> datetime:
        return self._clock.now()

    def monotonic(self) -> float:
        return self._clock.monotonic()

    async def sleep(self, seconds: float) -> None:
        if self.before_wake is not None:
            await self.before_wake()
        await asyncio.sleep(0)


class LoopState:
    """A built loop of the run and its schedule."""

    def __init__(self, *, loop: Loop, interval: float) -> None:
        self.loop = loop
        self.interval = interval
        self.next_due = 0.0
        self.iterations = 0
        self.failures = 0
        self.skipped = 0
        """Iterations that did not do their work: the loop reported a ``*-skipped`` event."""
        self.skip_reasons: dict[str, int] = {}
        self.started_at: list[float] = []
        """Simulated seconds at which each iteration started."""


class SimulationRun:
    """One run of a scenario; ``async with SimulationRun(scenario) as run: await run.run()``.

    ``extra_components`` are built like the components the scenario enables, after them, on the
    same runtime (tests use them to drive the loop, route, object and extender mechanisms with a
    component of their own).
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        extra_components: Sequence[Callable[[Runtime], Component]] = (),
    ) -> None:
        self.scenario = scenario
        self.clock = VirtualClock(scenario.start)
        self.api = ApiServer(clock=self.clock, seed=scenario.seed)
        self.book = UsageBook(seed=scenario.seed)
        self.timeline = Timeline(
            scenario_name=scenario.name,
            seed=scenario.seed,
            start=scenario.start,
            step=scenario.step,
            node_prices={},  # filled as the node groups register nodes
        )
        self.loops: dict[str, LoopState] = {}
        self.autoscalers = AutoscalerRecord()
        self.journal = PlanJournal(elapsed=lambda: rounded(self.elapsed, "seconds"))
        """The plans the systems executed (every executor on the run's registry tells it each
        intent and its outcome): the report's ``plans``."""
        self.traces: dict[str, Trace] = {}
        self.step_index = 0
        self._extra_components = tuple(extra_components)
        self._stack = contextlib.AsyncExitStack()
        self._actors: ClusterActors | None = None
        self._client: KubeClient | None = None
        self._tls: KubescaleTLSServer | None = None
        self._cache: SharedCache | None = None
        self._runtime: Runtime | None = None
        self.components: list[Component] = []
        self._settled_version: int | None = None
        self._next_event = 0

    # ------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> SimulationRun:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    @property
    def client(self) -> KubeClient:
        """kubescale's client on the simulated API server (started runs only)."""
        if self._client is None:
            raise RuntimeError("the run has not started")
        return self._client

    @property
    def runtime(self) -> Runtime:
        """What the run's components were built on (started runs only)."""
        if self._runtime is None:
            raise RuntimeError("the run has not started")
        return self._runtime

    @property
    def tls_server(self) -> KubescaleTLSServer:
        if self._tls is None:
            raise RuntimeError("the run has not started")
        return self._tls

    @property
    def actors(self) -> ClusterActors:
        if self._actors is None:
            raise RuntimeError("the run has not started")
        return self._actors

    @property
    def elapsed(self) -> float:
        """Simulated seconds since the start."""
        return (self.clock.now() - self.scenario.start).total_seconds()

    @property
    def done(self) -> bool:
        return self.step_index >= self.scenario.steps

    async def _start(self) -> None:
        scenario = self.scenario
        stack = self._stack
        await stack.enter_async_context(self.api)
        specs = [c.usage for w in scenario.workloads for c in w.containers]
        specs += [e.usage for e in scenario.events if isinstance(e, SetLoadEvent)]
        self.traces = load_traces(specs)
        for workload in scenario.workloads:
            for container in workload.containers:
                self.book.set_model(
                    workload=workload.name,
                    container=container.name,
                    model=build_usage_model(container.usage, traces=self.traces),
                )
        self._tls = KubescaleTLSServer(self.api, clock=self.clock)
        stack.push_async_callback(self._tls.stop)
        self._client = await self._connect()
        stack.push_async_callback(self._client.close)
        cache = SharedCache(
            client=self._client, clock=self._client.clock, coordination=scenario.coordination
        )
        self._cache = cache
        runtime = Runtime(
            client=self._client,
            leader_client=self._client,
            cache=cache,
            clock=self._client.clock,
            registry=CollectorRegistry(),
            leadership=AlwaysLeader(),
            identity=IDENTITY,
            certificates=ServerCertificates(
                client_ca_file=self._tls.ca_file, reload=False, reload_interval=10.0
            ),
            service=ServiceRef(namespace=SERVICE_NAMESPACE, name=SERVICE_NAME),
            coordination=scenario.coordination,
        )
        observe_plans(runtime.registry, self.journal)
        self._runtime = runtime
        for enabled in enabled_components(scenario.kubescale):
            with cache.informers.requested_by(enabled.name):
                self.components.append(enabled.build(runtime))
        for i, build in enumerate(self._extra_components):
            with cache.informers.requested_by(f"extra component {i}"):
                self.components.append(build(runtime))
        await self._tls.start(mounts=[component.mount for component in self.components])
        cache.start()
        stack.push_async_callback(cache.stop)
        await asyncio.wait_for(cache.wait_synced(), timeout=_CACHE_SYNC_TIMEOUT)
        for namespace in scenario.namespaces:
            self.api.store.create(namespace_manifest(namespace))
        created = [(f"objects[{i}]", dict(obj)) for i, obj in enumerate(scenario.objects)]
        await self._create(created)
        for component in self.components:
            await component.start()
            stack.push_async_callback(component.stop)
        await self._create(
            [
                (f"workloads[{i}]", workload_manifest(workload, self.traces))
                for i, workload in enumerate(scenario.workloads)
            ]
        )
        served = [
            self._tls.extender(entry)
            for component in self.components
            for entry in component.scheduler_extenders()
        ]
        self._actors = build_cluster_actors(
            scenario, api=self.api, book=self.book, extenders=[*scenario.extenders, *served]
        )
        if served:
            # kubescale's extenders answer from the shared cache: settled before each call,
            # they see the nodes added and the pods bound earlier in the step
            self._actors.scheduler.before_extenders = self.settle
        stack.push_async_callback(self._actors.close)
        loops = [loop for component in self.components for loop in component.loops()]
        loops.append(scale_lookups_loop(cache))
        for loop in loops:
            if loop.loop.name in self.loops:
                raise ValueError(f"two loops are named {loop.loop.name!r}")
            self.loops[loop.loop.name] = LoopState(loop=loop.loop, interval=loop.interval)

    async def _create(self, created: list[tuple[str, dict[str, Any]]]) -> None:
        for where, obj in created:
            try:
                stored = await self.api.create_admitted(obj)
                if "status" in obj and "status" in self.api.store.type_of(obj).subresources:
                    # The starting state: a manifest's status stands in for the controller that
                    # would have written it (a VPA's recommender, a PDB's disruption controller).
                    self.api.store.update_status({**stored, "status": obj["status"]})
            except ApiError as exc:
                meta = obj.get("metadata") or {}
                raise SimulationError(
                    f"{where}: cannot create {obj.get('kind')} {meta.get('name')}: {exc.message}"
                ) from exc

    async def _connect(self) -> KubeClient:
        directory = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        kubeconfig = directory / "kubeconfig"
        self.api.write_kubeconfig(kubeconfig)
        clock = SimulationClientClock(self.clock)
        clock.before_wake = self.sync_declared
        return await connect(
            kubeconfig=kubeconfig,
            clock=clock,
            registry=CollectorRegistry(),
            rng=random.Random(f"client:{self.scenario.seed}"),
        )

    # ----------------------------------------------------------------------------- steps

    async def step(self) -> None:
        """Run one step at the current time, record it, and move the clock to the next one."""
        if self.done:
            raise RuntimeError("the run is over")
        now = self.clock.now()
        t = self.elapsed
        events = await self._apply_due_events(t)
        actors = self.actors
        for actor in actors.in_order():
            await actor.step(now)
        events.extend(await self._run_due_loops(now, t))
        events.extend(actors.events())
        self.autoscalers.record(
            len(self.timeline.times),
            vpas=self.api.store.snapshots(VERTICAL_POD_AUTOSCALERS),
            hpas=self.api.store.snapshots(HORIZONTAL_POD_AUTOSCALERS),
        )
        pods = self.api.store.snapshots(PODS)
        nodes = self.api.store.snapshots(NODES)
        for node, price in actors.node_prices(nodes, known=self.timeline.node_prices):
            self.timeline.add_node_price(node, price)
        self.timeline.record(
            now=now, containers=actors.samples(), pods=pods, nodes=nodes, events=events
        )
        self.step_index += 1
        if not self.done:
            await self.clock.advance(self.scenario.step)

    async def _apply_due_events(self, t: float) -> list[TimelineEvent]:
        applied: list[TimelineEvent] = []
        events = self.scenario.events
        while self._next_event < len(events) and events[self._next_event].at <= t + _EPSILON:
            event = events[self._next_event]
            self._next_event += 1
            applied.append(
                await apply_event(self.api, event, t=t, book=self.book, traces=self.traces)
            )
        return applied

    async def _run_due_loops(self, now: datetime, t: float) -> list[TimelineEvent]:
        reported: list[TimelineEvent] = []
        # In the order the loops fell due (module docstring, step 3); sorted() is stable, so
        # loops due at the same moment keep the order they were built in.
        due = sorted(
            ((name, state) for name, state in self.loops.items() if t + _EPSILON >= state.next_due),
            key=lambda item: item[1].next_due,
        )
        for name, state in due:
            state.started_at.append(t)
            state.next_due = t + state.interval
            try:
                await self.settle()
                await state.loop.run_once(now)
            except Exception:
                state.failures += 1
                log.exception("loop iteration failed", extra={"fields": {"loop": name}})
            finally:
                state.iterations += 1
            if isinstance(state.loop, ReportingLoop):
                for kind, subject, detail in state.loop.drain_reports():
                    if kind.endswith(SKIPPED_SUFFIX):
                        state.skipped += 1
                        state.skip_reasons[detail] = state.skip_reasons.get(detail, 0) + 1
                    reported.append(
                        TimelineEvent(time=t, kind=kind, subject=subject, detail=detail)
                    )
        return reported

    def loop_summaries(self) -> list[dict[str, Any]]:
        """Per loop (by name): interval, iterations, failures and skipped iterations with why."""
        return [
            {
                "name": name,
                "interval": state.interval,
                "iterations": state.iterations,
                "failures": state.failures,
                "skipped": state.skipped,
                "skip_reasons": [
                    {"reason": reason, "count": count}
                    for reason, count in sorted(state.skip_reasons.items())
                ],
            }
            for name, state in sorted(self.loops.items())
        ]

    async def sync_declared(self) -> None:
        """Wait until every informer of the shared cache that has not synced yet — one a loop
        declared during its iteration — has synced, is absent (its resource not served), or
        had its list fail (it retries on its own): what a loop's wait on the client's clock
        does first (:class:`SimulationClientClock`). An informer's own back-off waits for
        nothing (it decides nothing, and two failing lists would wait for each other). A fresh
        informer lists the store as it is, so once synced it is settled."""
        if self._cache is None:
            return
        current = asyncio.current_task()
        if current is not None and current.get_name().startswith(_INFORMER_TASK):
            return
        waiting = [
            informer
            for informer in self._cache.informers.informers
            if not informer.synced and not informer.absent
        ]
        failures = {id(informer): informer.stats.errors for informer in waiting}
        for _ in range(_SETTLE_ATTEMPTS):
            waiting = [
                informer
                for informer in waiting
                if not informer.synced
                and not informer.absent
                and informer.stats.errors == failures[id(informer)]
            ]
            if not waiting:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_SETTLE_WAIT):
                    await asyncio.gather(*(informer.wait_synced() for informer in waiting))
        log.warning(
            "declared caches did not sync; the loop goes on without them",
            extra={"fields": {"informers": sorted(informer.name for informer in waiting)}},
        )

    async def settle(self) -> bool:
        """Make the shared cache reflect the store as it is now (its informers declared since
        the last settle included: they must have listed)."""
        if self._cache is None:
            return True
        await self.sync_declared()
        version = self.api.store.resource_version
        if version == self._settled_version:
            return True
        target = str(version)
        for _ in range(_SETTLE_ATTEMPTS):
            self.api.bookmark_watches()
            if await self._cache.wait_for_resource_version(target, within=_SETTLE_WAIT):
                self._settled_version = version
                return True
        log.warning(
            "the caches did not catch up with the store; the loops run on what they hold",
            extra={"fields": {"resource_version": target}},
        )
        return False

    def report(self) -> dict[str, Any]:
        """The report of the steps run so far."""
        return assemble_report(
            self.timeline,
            components=[component.name for component in self.components],
            loops=self.loop_summaries(),
            autoscalers=self.autoscalers.report(self.timeline.times),
            plans=self.journal.report(),
        )

    async def run(self, *, progress: Callable[[float], None] | None = None) -> dict[str, Any]:
        """Every remaining step; the report."""
        total = self.scenario.steps
        while not self.done:
            await self.step()
            if progress is not None:
                progress(self.step_index / total)
        return self.report()


async def run_scenario(
    scenario: Scenario, *, progress: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """Run ``scenario`` from start to end; the JSON report (see :mod:`.timeline`)."""
    async with SimulationRun(scenario) as run:
        return await run.run(progress=progress)
