"""How kubescale's components join a simulated run: the ``kubescale`` section of a scenario.

A scenario enables components by name with their flags (``kubescale: {vpa-recommender:
{interval: 1m}}``). Each component registers a :class:`KubescaleComponent` in
:data:`COMPONENTS`; it validates its flags and, for a run, returns a :class:`ComponentSetup`:
control loops, routes on kubescale's TLS server (a webhook, the scheduler extender) and the
objects that wire it into the cluster (its MutatingWebhookConfiguration, ...).

The runner builds each loop on a real ``kubernetes.aio``-based
:class:`~kubescale.kube.client.KubeClient` connected to the simulated API server over HTTPS, and
calls ``run_once(now)`` itself when the loop is due (first at the start, then every ``interval`` of
simulated time, checked once per step) instead of letting
:class:`~kubescale.runtime.loop_runner.LoopRunner` sleep on the clock, so a run is the same every
time. A loop that reads an informer cache must make sure, at the start of
``run_once``, that its cache has caught up with the store (the runner's actors write between
loop runs).

Before a loop that reads informers runs (:class:`SettlingLoop`), the runner makes its caches
reflect the store exactly: it sends a BOOKMARK at the store's resourceVersion on every open
watch and waits until the loop's informers have processed it, so what a loop sees never depends
on how fast watch events travelled. A loop may also report what it did for the report's
timeline (:class:`ReportingLoop`).

Components: ``webhook`` — the VPA admission webhook (:class:`WebhookSimulation`);
``vpa-recommender`` — the VPA recommender (:class:`RecommenderSimulation`); ``vpa-updater`` —
the VPA updater (:class:`UpdaterSimulation`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Protocol, runtime_checkable

from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.recommender.recommender_config import (
    RecommenderConfigError,
    RecommenderSettings,
)
from kubescale.controllers.vpa.recommender.recommender_loop import LOOP_NAME as RECOMMENDER_LOOP
from kubescale.controllers.vpa.recommender.recommender_loop import RecommenderLoop
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.controllers.vpa.recommender.simulated_recommender import (
    SimulatedRecommender,
    simulated_recommender_settings,
)
from kubescale.controllers.vpa.updater.simulated_updater import (
    SimulatedUpdater,
    simulated_updater_settings,
)
from kubescale.controllers.vpa.updater.updater_config import UpdaterConfigError, UpdaterSettings
from kubescale.controllers.vpa.updater.updater_loop import LOOP_NAME as UPDATER_LOOP
from kubescale.controllers.vpa.updater.updater_loop import UpdaterLoop
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.kube.client import KubeClient
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.runtime.loop_runner import Loop
from kubescale.sim.scenario.component_flags import parse_component_flags
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.component import EVENT_COMPONENT, build_caches
from kubescale.webhook.registration import webhook_configuration
from kubescale.webhook.status_lease import StatusLease
from kubescale.webhook.webhook_caches import WebhookCaches
from kubescale.webhook.webhook_config import (
    WebhookConfigError,
    WebhookSettings,
    add_webhook_arguments,
    webhook_settings_from_args,
)

__all__ = [
    "COMPONENTS",
    "ComponentContext",
    "ComponentSetup",
    "KubescaleComponent",
    "LoopFactory",
    "RecommenderSimulation",
    "ReportingLoop",
    "SettlingLoop",
    "SimulatedLoop",
    "UpdaterSimulation",
    "WebhookSimulation",
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


@runtime_checkable
class SettlingLoop(Protocol):
    """A loop reading informers: the runner settles them before each of its iterations."""

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        """Whether every informer of the loop reflects ``resource_version`` within ``within``
        event-loop seconds."""
        ...


@runtime_checkable
class ReportingLoop(Protocol):
    """A loop with something to mark on the report's timeline after its iterations."""

    def drain_reports(self) -> list[tuple[str, str, str]]:
        """``(kind, subject, detail)`` of what happened since the last call."""
        ...


class KubescaleComponent(Protocol):
    def validate(self, flags: Mapping[str, Any], *, path: str) -> list[str]:
        """Problems with ``flags``, each ``"<path>.<flag>: <message>"``."""
        ...

    def setup(self, flags: Mapping[str, Any], *, context: ComponentContext) -> ComponentSetup:
        """What the component adds to a run."""
        ...


_SIMULATED_WEBHOOK_FLAGS: Final = frozenset(
    {
        "avoid-hpa-conflict",
        "cap-to-largest-node",
        "feature-gates",
        "ignored-vpa-object-namespaces",
        "status-lease-name",
        "status-lease-namespace",
        "status-lease-update-interval",
        "vpa-object-namespace",
        "webhook-failure-policy-fail",
        "webhook-labels",
        "webhook-timeout-seconds",
    }
)
_CACHE_SYNC_TIMEOUT: Final = 30.0


class WebhookSimulation:
    """``kubescale: {webhook: {...}}``: the VPA admission webhook in a simulated run.

    Flags are ``kubescale serve``'s webhook flags without the dashes (``cap-to-largest-node:
    true``, ``feature-gates: InPlace=true``, ...); the Service and registration flags are not
    accepted — the run serves kubescale as ``kube-system/kubescale`` and creates the
    MutatingWebhookConfiguration self-registration would write, with the run's CA. Two loops:
    ``vpa-webhook-caches`` starts the informers when built (the webhook admits pods unmutated
    until then) and, every step, resolves the controller lookups queued by admissions
    (:mod:`kubescale.webhook.scale_lookups`); ``vpa-webhook-status-lease`` renews the status Lease
    every
    ``status-lease-update-interval``.
    """

    def settings(self, flags: Mapping[str, Any]) -> WebhookSettings:
        args = parse_component_flags(
            flags,
            component="webhook",
            add_arguments=add_webhook_arguments,
            allowed=_SIMULATED_WEBHOOK_FLAGS,
            error=WebhookConfigError,
        )
        return webhook_settings_from_args(args, environ={})

    def validate(self, flags: Mapping[str, Any], *, path: str) -> list[str]:
        try:
            self.settings(flags)
        except WebhookConfigError as exc:
            return [f"{path}: {exc}"]
        return []

    def setup(self, flags: Mapping[str, Any], *, context: ComponentContext) -> ComponentSetup:
        settings = replace(
            self.settings(flags),
            service_name=context.service_name,
            service_namespace=context.service_namespace,
        )
        webhook = AdmissionWebhook(settings=settings, registry=CollectorRegistry())
        configuration = webhook_configuration(
            settings, ca_bundle=base64.b64decode(context.ca_bundle)
        )

        async def caches_loop(client: KubeClient, stack: contextlib.AsyncExitStack) -> Loop:
            informers, caches = build_caches(client, settings, clock=client.clock)
            informers.start()
            stack.push_async_callback(informers.stop)
            await asyncio.wait_for(informers.wait_synced(), timeout=_CACHE_SYNC_TIMEOUT)
            if settings.avoid_hpa_conflict:
                recorder = EventRecorder(client=client, component=EVENT_COMPONENT)
                stack.push_async_callback(recorder.close)
                webhook.recorder = recorder
            webhook.caches = caches
            return _CachesLoop(caches)

        async def lease_loop(client: KubeClient, stack: contextlib.AsyncExitStack) -> Loop:
            lease = StatusLease(
                client=client,
                clock=client.clock,
                namespace=settings.status_lease_namespace,
                name=settings.status_lease_name,
                interval=settings.status_lease_update_interval,
                identity=f"{context.service_name}-simulated",
            )
            return _LeaseLoop(lease)

        return ComponentSetup(
            loops=(
                SimulatedLoop(name="vpa-webhook-caches", interval=1.0, build=caches_loop),
                SimulatedLoop(
                    name="vpa-webhook-status-lease",
                    interval=settings.status_lease_update_interval,
                    build=lease_loop,
                ),
            ),
            mounts=(webhook.mount,),
            objects=(configuration,),
        )


class _CachesLoop:
    name = "vpa-webhook-caches"

    def __init__(self, caches: WebhookCaches) -> None:
        self.caches = caches

    async def run_once(self, now: datetime) -> None:
        await self.caches.scale_lookups.resolve_pending()
        await self.caches.scale_lookups.refresh_stale()


class _LeaseLoop:
    name = "vpa-webhook-status-lease"

    def __init__(self, lease: StatusLease) -> None:
        self.lease = lease

    async def run_once(self, now: datetime) -> None:
        await self.lease.update_status()


class RecommenderSimulation:
    """``kubescale: {vpa-recommender: {...}}``: the VPA recommender in a simulated run.

    Flags: ``simulated_recommender_settings`` (``serve``'s recommender flags without the dashes;
    no Prometheus history). One loop,
    ``vpa-recommender``, every ``recommender-interval``: its informers start (and sync) when it
    is built, the runner settles them before each iteration, and every change of a container's
    target is marked on the report's timeline (kind ``vpa-recommendation``).
    """

    def settings(self, flags: Mapping[str, Any]) -> RecommenderSettings:
        return simulated_recommender_settings(flags)

    def validate(self, flags: Mapping[str, Any], *, path: str) -> list[str]:
        try:
            self.settings(flags)
        except RecommenderConfigError as exc:
            return [f"{path}: {exc}"]
        return []

    def setup(self, flags: Mapping[str, Any], *, context: ComponentContext) -> ComponentSetup:
        settings = self.settings(flags)

        async def build(client: KubeClient, stack: contextlib.AsyncExitStack) -> Loop:
            informers = InformerSet(client=client)
            loop = RecommenderLoop(
                client=client,
                informers=informers,
                settings=settings,
                metrics=RecommenderMetrics(CollectorRegistry()),
            )
            informers.start()
            stack.push_async_callback(informers.stop)
            await asyncio.wait_for(informers.wait_synced(), timeout=_CACHE_SYNC_TIMEOUT)
            return SimulatedRecommender(loop)

        return ComponentSetup(
            loops=(SimulatedLoop(name=RECOMMENDER_LOOP, interval=settings.interval, build=build),)
        )


class UpdaterSimulation:
    """``kubescale: {vpa-updater: {...}}``: the VPA updater in a simulated run.

    Flags: :func:`kubescale.controllers.vpa.updater.simulated_updater.simulated_updater_settings`
    (``serve``'s updater flags without the dashes). One loop, ``vpa-updater``, every
    ``updater-interval``: its informers start (and sync) when it is built, the runner settles them
    before each iteration, and every eviction or in-place resize is marked on the report's timeline.
    It acts only while the webhook's status Lease is fresh (``use-admission-controller-status``),
    so without ``webhook`` it evicts nothing.
    """

    def settings(self, flags: Mapping[str, Any]) -> UpdaterSettings:
        return simulated_updater_settings(flags)

    def validate(self, flags: Mapping[str, Any], *, path: str) -> list[str]:
        try:
            self.settings(flags)
        except UpdaterConfigError as exc:
            return [f"{path}: {exc}"]
        return []

    def setup(self, flags: Mapping[str, Any], *, context: ComponentContext) -> ComponentSetup:
        settings = self.settings(flags)

        async def build(client: KubeClient, stack: contextlib.AsyncExitStack) -> Loop:
            informers = InformerSet(client=client)
            events = EventRecorder(client=client, component="vpa-updater")
            loop = UpdaterLoop(
                client=client,
                informers=informers,
                settings=settings,
                metrics=UpdaterMetrics(CollectorRegistry()),
                events=events,
            )
            informers.start()
            stack.push_async_callback(informers.stop)
            stack.push_async_callback(events.close)
            await asyncio.wait_for(informers.wait_synced(), timeout=_CACHE_SYNC_TIMEOUT)
            return SimulatedUpdater(loop)

        return ComponentSetup(
            loops=(SimulatedLoop(name=UPDATER_LOOP, interval=settings.interval, build=build),)
        )


COMPONENTS: Final[Mapping[str, KubescaleComponent]] = {
    "webhook": WebhookSimulation(),
    "vpa-recommender": RecommenderSimulation(),
    "vpa-updater": UpdaterSimulation(),
}
