"""The VPA admission webhook as a component (:mod:`kubescale.runtime.component`).

* **Caches** (declared when built): VPAs, LimitRanges, the workload controllers (the shared
  controller lookups), HPAs with ``--avoid-hpa-conflict``, nodes with ``--cap-to-largest-node``
  (:class:`~kubescale.controllers.vpa.admission.admission_caches.AdmissionCaches`).
* **Route**: ``POST /`` on the TLS server (:mod:`kubescale.webhook.admission_routes`).
* **Loops**, on every replica (upstream runs no leader election for the admission controller
  either): ``vpa-webhook-status-lease`` renews the status Lease every
  ``--status-lease-update-interval`` (:mod:`kubescale.webhook.status_lease`);
  ``vpa-webhook-registration`` (with ``--register-webhook``) registers the
  MutatingWebhookConfiguration until that succeeds, then re-publishes the caBundle when
  ``--client-ca-file`` changes (every ``--cert-reload-interval`` with ``--reload-cert``).
* **Start**: with ``--register-webhook``, waits up to ``REGISTRATION_SYNC_WAIT`` for its own
  caches to sync (no other system's), then makes the first registration attempt — so
  kube-apiserver calls a webhook that can answer from warm caches (upstream sleeps 10 s for
  the same reason); the registration loop retries if it failed.
* **Stop**: events still queued are written. The configuration is left in place, as upstream
  does: the next replica or restart replaces it, and ``failurePolicy: Ignore`` keeps pods
  flowing while no replica answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from aiohttp import web

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.coordination.brain import brain_of
from kubescale.kube.events import EventRecorder
from kubescale.runtime.component import BaseComponent, LoopSpec, Runtime
from kubescale.runtime.health import Check
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.registration import WebhookRegistration
from kubescale.webhook.status_lease import StatusLease
from kubescale.webhook.webhook_config import (
    WebhookSettings,
)

__all__ = ["EVENT_COMPONENT", "REGISTRATION_RETRY", "WebhookComponent"]

log = component_logger("webhook")

EVENT_COMPONENT: Final = "vpa-admission-controller"
REGISTRATION_RETRY: Final = 10.0
"""Seconds between registration attempts while the API server refuses (upstream exits)."""
REGISTRATION_SYNC_WAIT: Final = 30.0
"""Seconds :meth:`WebhookComponent.start` waits for the caches before the first registration."""


class WebhookComponent(BaseComponent):
    """The VPA admission webhook (module docstring)."""

    name = "webhook"

    def __init__(self, settings: WebhookSettings, runtime: Runtime) -> None:
        if runtime.service is not None:
            settings = replace(
                settings,
                service_name=runtime.service.name,
                service_namespace=runtime.service.namespace,
                register_by_url=False,
            )
        # One brain: a VPA leaves alone the resources an HPA on its workload scales on
        # (docs/coordination.md); --avoid-hpa-conflict is what does it.
        avoid = brain_of(runtime.cache).ownership.vpa_leaves_hpa_resources(
            requested=settings.avoid_hpa_conflict
        )
        if avoid != settings.avoid_hpa_conflict:
            settings = replace(settings, avoid_hpa_conflict=avoid)
        self.settings = settings
        self.runtime = runtime
        self.caches = AdmissionCaches(
            cache=runtime.cache,
            vpa_object_namespace=settings.vpa_object_namespace,
            ignored_namespaces=settings.ignored_vpa_object_namespaces,
            watch_hpas=settings.avoid_hpa_conflict,
            watch_nodes=settings.cap_to_largest_node,
        )
        self.recorder: EventRecorder | None = EventRecorder(
            client=runtime.client, component=EVENT_COMPONENT, host=runtime.identity
        )
        self.webhook = AdmissionWebhook(settings=settings, registry=runtime.registry)
        self.webhook.caches = self.caches
        self.webhook.recorder = self.recorder
        self.lease = StatusLease(
            client=runtime.client,
            clock=runtime.clock,
            namespace=settings.status_lease_namespace,
            name=settings.status_lease_name,
            interval=settings.status_lease_update_interval,
            identity=runtime.identity,
        )
        certificates = runtime.certificates
        self.registration = WebhookRegistration(
            client=runtime.client,
            settings=settings,
            ca_file=certificates.client_ca_file,
            reload=certificates.reload,
        )

    def mount(self, app: web.Application) -> None:
        self.webhook.mount(app)

    def loops(self) -> Sequence[LoopSpec]:
        loops = [
            LoopSpec(
                loop=self.lease,
                interval=self.settings.status_lease_update_interval,
                leader_only=False,
            )
        ]
        if self.settings.register_webhook:
            certificates = self.runtime.certificates
            interval = certificates.reload_interval if certificates.reload else REGISTRATION_RETRY
            loops.append(LoopSpec(loop=self.registration, interval=interval, leader_only=False))
        return loops

    def checks(self) -> Mapping[str, Check]:
        return {}

    async def start(self) -> None:
        if self.settings.register_webhook:
            if await self.caches.wait_synced(within=REGISTRATION_SYNC_WAIT):
                await self.registration.register()
            else:
                log.warning("caches not synced yet: registering the webhook later")
        log.info(
            "VPA admission webhook started",
            extra={"fields": {"register": self.settings.register_webhook}},
        )

    async def stop(self) -> None:
        if self.recorder is not None:
            await self.recorder.close()
