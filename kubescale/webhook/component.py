"""The VPA admission webhook as a part of ``kubescale serve``.

Life cycle, driven by :func:`kubescale.cli.serve.serve`:

1. :meth:`WebhookComponent.attach` (before the listeners open): mounts ``POST /`` on the TLS
   application and adds the ``/readyz`` check ``webhook-caches`` (failing until every informer
   has synced).
2. :meth:`WebhookComponent.start` (listeners up, client connected): starts the informers, the
   background scale-subresource lookups (:mod:`kubescale.webhook.scale_lookups`), the status Lease
   renewal (:mod:`kubescale.webhook.status_lease`) and, with ``--register-webhook``, a task that
   waits for the caches to sync and then registers the MutatingWebhookConfiguration with the
   caBundle read from ``--client-ca-file`` (retried every ``REGISTRATION_RETRY`` seconds while the
   API server refuses). With ``--reload-cert`` a change of the CA file re-publishes the caBundle
   (checked every ``--cert-reload-interval``).
3. :meth:`WebhookComponent.stop` (after SIGTERM): stops the background tasks and informers and
   writes the events still queued. The configuration is left in place, as upstream does: the
   next replica or restart replaces it, and ``failurePolicy: Ignore`` keeps pods flowing while
   no replica answers.

Every replica serves, registers and renews the status Lease (upstream runs no leader election
for the admission controller either).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final

from kubescale.base.clock import Clock, sleep_or_stop
from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeError
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.registration import (
    CaBundleError,
    CaBundleRefresher,
    read_ca_bundle,
    register_webhook,
)
from kubescale.webhook.scale_lookups import ScaleLookups
from kubescale.webhook.status_lease import StatusLease
from kubescale.webhook.webhook_caches import WebhookCaches
from kubescale.webhook.webhook_config import WebhookSettings

if TYPE_CHECKING:
    from kubescale.cli.serve import Server

__all__ = ["EVENT_COMPONENT", "REGISTRATION_RETRY", "WebhookComponent", "build_caches"]

log = component_logger("webhook")

EVENT_COMPONENT: Final = "vpa-admission-controller"
REGISTRATION_RETRY: Final = 10.0
"""Seconds between registration attempts the API server refused (upstream exits instead)."""


def build_caches(
    client: KubeClient, settings: WebhookSettings, *, clock: Clock
) -> tuple[InformerSet, WebhookCaches]:
    """The informers (not started) and the caches over them, as the settings ask."""
    informers = InformerSet(client=client)
    caches = WebhookCaches(
        informers=informers,
        scale_lookups=ScaleLookups(client=client, clock=clock),
        vpa_object_namespace=settings.vpa_object_namespace,
        ignored_namespaces=settings.ignored_vpa_object_namespaces,
        watch_hpas=settings.avoid_hpa_conflict,
        watch_nodes=settings.cap_to_largest_node,
    )
    return informers, caches


class WebhookComponent:
    """``kubescale.cli.serve.ServeComponent`` for the VPA admission webhook."""

    needs_kube = True

    def __init__(self, settings: WebhookSettings, *, identity: str | None = None) -> None:
        self.settings = settings
        self.identity = identity or socket.gethostname()
        self.webhook: AdmissionWebhook | None = None
        self.caches: WebhookCaches | None = None
        self.informers: InformerSet | None = None
        self.lease: StatusLease | None = None
        self.ca_refresher: CaBundleRefresher | None = None
        self.recorder: EventRecorder | None = None
        self.registered = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def attach(self, server: Server) -> None:
        self.webhook = AdmissionWebhook(settings=self.settings, registry=server.registry)
        self.webhook.mount(server.https_app)
        server.checks.add_readiness("webhook-caches", self._readiness)

    def _readiness(self) -> str | None:
        if self.caches is None:
            return "caches not started"
        return self.caches.readiness_check()

    async def start(self, server: Server) -> None:
        client = server.kube
        if client is None or self.webhook is None:
            raise RuntimeError("the webhook needs attach() and a Kubernetes client")
        clock = server.clock
        self.informers, self.caches = build_caches(client, self.settings, clock=clock)
        if self.settings.avoid_hpa_conflict:
            self.recorder = EventRecorder(
                client=client, component=EVENT_COMPONENT, host=self.identity
            )
        self.webhook.caches = self.caches
        self.webhook.recorder = self.recorder
        self.informers.start()
        self.lease = StatusLease(
            client=client,
            clock=clock,
            namespace=self.settings.status_lease_namespace,
            name=self.settings.status_lease_name,
            interval=self.settings.status_lease_update_interval,
            identity=self.identity,
        )
        self._spawn(self.caches.scale_lookups.run(self._stop), "webhook:scale-lookups")
        self._spawn(self.lease.run(self._stop), "webhook:status-lease")
        if self.settings.register_webhook:
            self._spawn(self._register(server, client), "webhook:registration")
        log.info(
            "VPA admission webhook started",
            extra={"fields": {"register": self.settings.register_webhook}},
        )

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.create_task(work, name=name))

    async def _register(self, server: Server, client: KubeClient) -> None:
        informers = self.informers
        if informers is None:
            return
        while informers.unsynced() and not self._stop.is_set():
            await informers.wait_synced(within=1.0)
        config = server.config
        ca_bundle: bytes | None = None
        while ca_bundle is None:
            try:
                candidate = read_ca_bundle(config.client_ca_file)
                await register_webhook(client, self.settings, ca_bundle=candidate)
                ca_bundle = candidate
            except (CaBundleError, KubeError) as exc:
                log.error(
                    "self-registration failed; retrying",
                    extra={"fields": {"error": str(exc), "retry_seconds": REGISTRATION_RETRY}},
                )
                if await sleep_or_stop(server.clock, REGISTRATION_RETRY, self._stop):
                    return
        self.registered.set()
        if not config.reload_cert:
            return
        self.ca_refresher = CaBundleRefresher(
            client=client,
            settings=self.settings,
            ca_file=config.client_ca_file,
            clock=server.clock,
            interval=config.cert_reload_interval,
            published=ca_bundle,
        )
        await self.ca_refresher.run(self._stop)

    async def stop(self) -> None:
        self._stop.set()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await asyncio.wait_for(task, timeout=5.0)
                except TimeoutError:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
        if self.informers is not None:
            await self.informers.stop()
        if self.recorder is not None:
            await self.recorder.close()
