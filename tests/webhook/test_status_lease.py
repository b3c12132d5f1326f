"""The status Lease on the virtual clock, against the in-process API server.

Upstream (``pkg/utils/status``): a ticker every ``--status-lease-update-interval`` (10 s); the
first tick creates the Lease (``holderIdentity``, ``leaseDurationSeconds`` = the interval, no
``renewTime``), later ticks set ``renewTime`` = now and ``holderIdentity``. The updater treats
the admission controller as healthy while ``renewTime`` (or the creation time) is less than a
minute old, so a stopped webhook's Lease goes stale after a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import KubeClient
from kubescale.kube.lease_record import format_micro_time
from kubescale.kube.resources import LEASES
from kubescale.runtime.loop_runner import LoopRunner
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.status_lease import StatusLease

from .api_fixtures import api, clock, eventually, kube

__all__ = ["api", "clock", "kube"]  # fixtures, re-exported for pytest

NAMESPACE, NAME = "kube-system", "vpa-admission-controller"


def _lease(kube: KubeClient, clock: VirtualClock, identity: str) -> StatusLease:
    return StatusLease(
        client=kube, clock=clock, namespace=NAMESPACE, name=NAME, interval=10.0, identity=identity
    )


@contextlib.asynccontextmanager
async def _running(lease: StatusLease, clock: VirtualClock) -> AsyncIterator[LoopRunner]:
    """The lease as ``serve`` runs it: a loop of every replica, at once and then every interval."""
    runner = LoopRunner(clock=clock, registry=CollectorRegistry())
    runner.add(lease, interval=lease.interval, jitter=0.0)
    task = asyncio.create_task(runner.run())
    try:
        yield runner
    finally:
        runner.stop()
        await task


async def test_the_lease_is_created_at_start_then_renewed_every_interval(
    kube: KubeClient, api: ApiServer, clock: VirtualClock
) -> None:
    lease = _lease(kube, clock, "kubescale-0")
    start = clock.now()
    async with _running(lease, clock):
        await eventually(lambda: lease.renewals == 1)
        created = api.store.get(LEASES, NAME, NAMESPACE)
        assert created["spec"] == {"holderIdentity": "kubescale-0", "leaseDurationSeconds": 10}
        assert created["metadata"]["creationTimestamp"] == start.strftime("%Y-%m-%dT%H:%M:%SZ")
        for tick in (1, 2, 3):
            await clock.advance(10.0)
            await eventually(lambda tick=tick: lease.renewals == tick + 1)  # type: ignore[misc]
            renewed = api.store.get(LEASES, NAME, NAMESPACE)
            assert renewed["spec"]["renewTime"] == format_micro_time(
                start + timedelta(seconds=10 * tick)
            )
            assert renewed["spec"]["holderIdentity"] == "kubescale-0"
            assert renewed["spec"]["leaseDurationSeconds"] == 10
    # stopped: no more renewals however long the clock runs
    await clock.advance(60.0)
    assert lease.renewals == 4


async def test_two_replicas_share_the_lease_and_each_renewal_wins_or_yields(
    kube: KubeClient, api: ApiServer, clock: VirtualClock
) -> None:
    first, second = _lease(kube, clock, "kubescale-0"), _lease(kube, clock, "kubescale-1")
    await first.update_status()
    await second.update_status()  # the Lease exists: second renews it
    stored = api.store.get(LEASES, NAME, NAMESPACE)
    assert stored["spec"]["holderIdentity"] == "kubescale-1"
    assert stored["spec"]["renewTime"] == format_micro_time(clock.now())
    # another replica created the Lease between our GET (404) and our create: AlreadyExists
    # is success, not an error
    api.faults.add(verb="get", resource="leases", status=404, count=1)
    await first.update_status()
    assert first.renewals == 2
    assert api.store.get(LEASES, NAME, NAMESPACE)["spec"]["holderIdentity"] == "kubescale-1"


async def test_a_failing_api_server_is_logged_and_the_next_tick_tries_again(
    kube: KubeClient, api: ApiServer, clock: VirtualClock
) -> None:
    lease = _lease(kube, clock, "kubescale-0")
    api.faults.add(verb="get", resource="leases", status=403, count=1)
    async with _running(lease, clock):
        await eventually(lambda: lease.failures == 1)
        assert lease.renewals == 0
        await clock.advance(10.0)
        await eventually(lambda: lease.renewals == 1)
        assert api.store.peek(LEASES, NAME, NAMESPACE) is not None


def test_the_interval_must_be_positive(kube: KubeClient, clock: VirtualClock) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        StatusLease(
            client=kube, clock=clock, namespace=NAMESPACE, name=NAME, interval=0, identity="x"
        )
