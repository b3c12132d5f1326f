"""The admission controller's status Lease: "the webhook is up", renewed every 10 s.

Upstream's ``pkg/utils/status`` (``status_object.go``, ``status_updater.go``): every
``--status-lease-update-interval`` (a ticker, so the first renewal is one interval after start)
the Lease ``--status-lease-namespace``/``--status-lease-name`` is read; if absent it is created
with ``holderIdentity`` and ``leaseDurationSeconds`` = the interval in whole seconds (no
``renewTime``: its creationTimestamp counts as the first renewal), else ``renewTime`` is set to
now and ``holderIdentity`` to this replica and the Lease updated. A conflict (another replica
renewed it first) and an AlreadyExists (another replica created it) are success. The updater
evicts only while ``renewTime`` (or the creationTimestamp) is less than a minute old
(``IsStatusValid``).

Time is the injected clock's: the renewal interval is slept on it, ``renewTime`` is its
``now()`` (a ``MicroTime``). Retries of transient errors (5xx, 429, transport) happen in the
access layer; a renewal that still fails is logged and counted, and the next tick tries again.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from kubescale.base.clock import Clock, sleep_or_stop
from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.lease_record import format_micro_time
from kubescale.kube.resources import LEASES

__all__ = ["StatusLease"]

log = component_logger("webhook.status-lease")


class StatusLease:
    """Renews one Lease on an interval (see the module docstring)."""

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
        self.name = name
        self.interval = interval
        self.identity = identity
        self.renewals = 0
        self.failures = 0

    def _new_lease(self) -> dict[str, Any]:
        return {
            "apiVersion": LEASES.group_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                # int32(leaseDuration.Seconds()): truncated to whole seconds
                "leaseDurationSeconds": max(1, math.floor(self.interval)),
            },
        }

    async def update_status(self) -> None:
        """One renewal (``Client.UpdateStatus``); API errors other than the benign ones raise."""
        try:
            lease = await self._client.get(LEASES, self.name, namespace=self.namespace)
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
        spec = dict(lease.get("spec") or {})
        spec["renewTime"] = format_micro_time(self._clock.now())
        spec["holderIdentity"] = self.identity
        try:
            await self._client.update(LEASES, {**lease, "spec": spec})
        except KubeApiError as err:
            if not err.conflict:
                raise
        self.renewals += 1

    async def run(self, stop: asyncio.Event) -> None:
        """Renew every ``interval`` until ``stop`` is set; never raises."""
        while not await sleep_or_stop(self._clock, self.interval, stop):
            try:
                await self.update_status()
            except KubeError as exc:
                self.failures += 1
                log.error(
                    "status update failed",
                    extra={"fields": {"holderIdentity": self.identity, "error": str(exc)}},
                )
            except Exception:
                self.failures += 1
                log.exception("unexpected error while renewing the status lease")
