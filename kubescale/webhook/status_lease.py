"""The admission controller's status Lease: "the webhook is up", renewed every 10 s.

Upstream's ``pkg/utils/status`` (``status_object.go``, ``status_updater.go``): every
``--status-lease-update-interval`` the Lease ``--status-lease-namespace``/``--status-lease-name``
is read; if absent it is created
with ``holderIdentity`` and ``leaseDurationSeconds`` = the interval in whole seconds (no
``renewTime``: its creationTimestamp counts as the first renewal), else ``renewTime`` is set to
now and ``holderIdentity`` to this replica and the Lease updated. A conflict (another replica
renewed it first) and an AlreadyExists (another replica created it) are success. The updater
evicts only while ``renewTime`` (or the creationTimestamp) is less than a minute old
(``IsStatusValid``).

:class:`StatusLease` is a loop of every replica (:meth:`StatusLease.run_once`), run at once when
the process starts and then every interval — upstream's ticker waits one interval before the
first renewal, which only delays the moment the updater may act. ``renewTime`` is the injected
clock's ``now()`` (a ``MicroTime``). Retries of transient errors (5xx, 429, transport) happen in
the access layer; a renewal that still fails is logged and counted, and the next iteration tries
again.
"""

from __future__ import annotations

import math
from datetime import datetime

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError, failure_log_level
from kubescale.kube.lease_record import format_micro_time
from kubescale.kube.resources import LEASES
from kubescale.objects.lease import Lease
from kubescale.objects.views import spec_of

__all__ = ["StatusLease"]

log = component_logger("webhook.status-lease")


class StatusLease:
    """Renews one Lease on an interval (see the module docstring)."""

    name = "vpa-webhook-status-lease"

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        namespace: str,
        name: str,
        interval: float,
        identity: str,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"status lease update interval must be > 0, got {interval}")
        self._client = client
        self._clock = clock
        self.namespace = namespace
        self.lease_name = name
        self.interval = interval
        self.identity = identity
        self.renewals = 0
        self.failures = 0

    def _new_lease(self) -> Lease:
        return {
            "apiVersion": LEASES.group_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.lease_name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                # int32(leaseDuration.Seconds()): truncated to whole seconds
                "leaseDurationSeconds": max(1, math.floor(self.interval)),
            },
        }

    async def update_status(self) -> None:
        """One renewal (``Client.UpdateStatus``); API errors other than the benign ones raise."""
        try:
            lease = await self._client.get(LEASES, self.lease_name, namespace=self.namespace)
        except KubeApiError as err:
            if not err.not_found:
                raise
            try:
                await self._client.create(LEASES, self._new_lease())
            except KubeApiError as create_err:
                if not create_err.already_exists:
                    raise
            self.renewals += 1
            return
        spec = dict(spec_of(lease))
        spec["renewTime"] = format_micro_time(self._clock.now())
        spec["holderIdentity"] = self.identity
        try:
            await self._client.update(LEASES, {**lease, "spec": spec})
        except KubeApiError as err:
            if not err.conflict:
                raise
        self.renewals += 1

    async def run_once(self, now: datetime) -> None:
        """One renewal as a loop iteration: errors are logged and counted, never raised."""
        try:
            await self.update_status()
        except KubeError as exc:
            self.failures += 1
            log.log(
                failure_log_level(exc),
                "status update failed",
                extra={"fields": {"holderIdentity": self.identity, "error": str(exc)}},
            )
