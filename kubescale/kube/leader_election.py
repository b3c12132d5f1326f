"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Only the controller loops are gated on leadership; the webhook and the scheduler extender serve
on every replica. The rules mirror ``k8s.io/client-go/tools/leaderelection/leaderelection.go``:

- Timing: ``lease_duration`` (15 s) is how long a candidate waits, *measured from the last change
  of the record it observed*, before taking the Lease over; ``renew_deadline`` (10 s) is how long
  the leader keeps retrying a renewal before it gives up; ``retry_period`` (2 s) is the wait
  between tries. ``NewLeaderElector`` requires ``LeaseDuration > RenewDeadline >
  JitterFactor·RetryPeriod > 0`` with ``JitterFactor = 1.2``; a violation is a ``ValueError``
  naming the setting.
- ``tryAcquireOrRenew``: a leader that still holds a valid lease first updates optimistically
  with its cached object (``resourceVersion`` of its last read or write). Otherwise GET (404 →
  CREATE); when the record differs from the one last observed, ``observedTime`` becomes *now on
  the local monotonic clock* (the Lease's own timestamps are never compared with local time, so
  clock skew between replicas does not matter); a lease held by someone else with
  ``observedTime + leaseDurationSeconds > now`` is left alone; else UPDATE carrying the read
  ``resourceVersion``, so of two racing candidates one gets 409 Conflict and loses. The leader
  keeps ``acquireTime`` and ``leaseTransitions``; a new holder sets ``acquireTime`` and
  increments ``leaseTransitions``. The record's encoding (``MicroTime`` from the injected
  clock) and the timing checks are :mod:`kubescale.kube.lease_record`'s.
- Acquire: a try at once, then every ``retry_period · [1, 2.2)`` (``wait.JitterUntil``, factor
  1.2). Renew: a renewal is due ``retry_period`` after the last success and is retried every
  ``retry_period``; leadership is given up when ``renew_deadline`` passes from the due time
  without success (``wait.Until`` + ``PollUntilContextTimeout``). Beyond client-go: each try is
  *bounded* by the time left (a hung request cannot stretch the deadline; the bound is kept on
  the injected clock, i.e. ``asyncio.timeout`` on a real one); a renewal that reads a record
  naming another holder gives up at once; and :attr:`LeaderElector.is_leader` lapses by itself
  at the renew deadline, so a gate consulted by a process that was frozen past it says no even
  before the renew loop has run again. A candidate can take over no earlier than
  ``lease_duration`` after the last renewal it saw, which is later than that deadline.
- Release on clean shutdown (``ReleaseOnCancel``): once the gated work has stopped, the Lease is
  written with an empty ``holderIdentity``, ``leaseDurationSeconds: 1`` and ``acquireTime`` /
  ``renewTime`` now, so a candidate takes over at its next try instead of waiting out the lease.
- After losing the lease the elector campaigns again (client-go components exit instead; this
  process keeps serving its webhook and extender, so it stays a candidate).
- ``healthz_check`` is client-go's ``HealthzAdaptor`` watchdog: it fails when this replica
  believes it leads but has not renewed for ``lease_duration`` + a tolerance (20 s as in
  kube-controller-manager), i.e. its renew loop is wedged.
- There is no fencing, as in client-go: work already past its leadership check when the process
  froze may still finish its step after another replica has taken over.

Requests go through the access layer (:class:`kubescale.kube.client.KubeClient`) as raw JSON.
Retries the client makes happen inside one try, so they stay within the try's deadline.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.base.per_key import PerKey
from kubescale.base.tasks import cancel_and_wait
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError, failure_log_level
from kubescale.kube.lease_record import (
    JITTER_FACTOR,
    RELEASED_LEASE_SECONDS,
    format_micro_time,
    holder_record,
    lease_spec,
    new_lease,
    released_record,
    spec_int,
    validate_timing,
    with_record,
)
from kubescale.kube.resources import LEASES

__all__ = [
    "DEFAULT_HEALTHZ_TOLERANCE",
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "RELEASED_LEASE_SECONDS",
    "LeaderElector",
    "default_identity",
    "format_micro_time",
    "validate_timing",
]

DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
DEFAULT_HEALTHZ_TOLERANCE = 20.0
"""kube-controller-manager's ``NewLeaderHealthzAdaptor(20 * time.Second)``."""


def default_identity() -> str:
    """``<hostname>_<uuid4>``: unique even when two processes share a pod name."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # Name, help and label as client-go's leaderelection metrics provider registers them.
        self.master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=registry,
        )


_metrics_for: PerKey[CollectorRegistry, _Metrics] = PerKey(_Metrics)
"""One gauge per registry, shared by every elector (one per Lease) reporting to it."""


class _LeaseRequests:
    """GET (404 → ``None``), POST and PUT of one Lease through the access layer."""

    def __init__(self, *, client: KubeClient, namespace: str, name: str) -> None:
        self._client = client
        self._namespace = namespace
        self._name = name

    async def get(self) -> dict[str, Any] | None:
        try:
            return await self._client.get(LEASES, self._name, namespace=self._namespace)
        except KubeApiError as err:
            if err.not_found:
                return None
            raise

    async def create(self, lease: dict[str, Any]) -> dict[str, Any]:
        return await self._client.create(LEASES, lease, namespace=self._namespace)

    async def update(self, lease: dict[str, Any]) -> dict[str, Any]:
        return await self._client.update(LEASES, lease)


class LeaderElector:
    """Campaigns for one Lease and runs the gated work while it holds it.

    Either hand the gated work to :meth:`run` (``on_started_leading`` is started as a task when
    leadership is acquired and cancelled when it is lost), or run it with no work and gate on
    :attr:`is_leader` / :meth:`wait_until_leading`. The gauge ``leader_election_master_status``
    is 1 from acquiring the Lease until the elector steps down.
    """

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        rng: random.Random | None = None,
        registry: CollectorRegistry,
        on_new_leader: Callable[[str], None] | None = None,
        release_on_cancel: bool = True,
        healthz_tolerance: float = DEFAULT_HEALTHZ_TOLERANCE,
        logger: logging.Logger | None = None,
    ) -> None:
        validate_timing(
            lease_duration=lease_duration, renew_deadline=renew_deadline, retry_period=retry_period
        )
        if not namespace:
            raise ValueError("namespace must not be empty")
        if not name:
            raise ValueError("name must not be empty")
        identity = default_identity() if identity is None else identity
        if not identity:
            raise ValueError("identity must not be empty")
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.healthz_tolerance = healthz_tolerance
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._on_new_leader = on_new_leader
        self._log = logger or component_logger("leader_election")
        self._requests = _LeaseRequests(client=client, namespace=namespace, name=name)
        self._status = _metrics_for(registry).master_status.labels(name)
        self._status.set(0)
        self._cached: dict[str, Any] | None = None  # last object read or written (its RV)
        self._observed: dict[str, Any] = {}  # spec of the last observed record
        self._observed_time = -math.inf  # local monotonic time that record was first seen
        self._reported_leader = ""
        self._leading = asyncio.Event()
        self._last_renew = -math.inf
        self.renewals = 0
        """Successful renewals while leading (read from another thread by tests and benches)."""
        self._in_flight = 0
        self._campaigning = False
        self._last_try = -math.inf
        self._wedged_since: float | None = None

    # ---- state ---------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True while this replica leads: acquired, not given up, and renewed in time.

        Besides the state the loops maintain, leadership lapses on its own once the renew
        deadline of the last renewal has passed, so a gate consulted after the process was
        frozen (and before the renew loop ran again) does not act on a lease another replica
        may be about to take (it can only do so ``lease_duration`` after its last observation,
        which is later than this deadline).
        """
        return self._leading.is_set() and self._clock.monotonic() < (
            self._last_renew + self.retry_period + self.renew_deadline
        )

    @property
    def may_write(self) -> bool:
        """True while a leader-only write may be sent: leading, and within ``renew_deadline``
        of the last successful renewal.

        A candidate takes the Lease over no earlier than ``lease_duration`` after it observed
        that renewal, so every write sent under this gate has at least ``lease_duration -
        renew_deadline`` (5 s by default) to reach the API server before another replica can
        lead: kube-apiserver offers no fencing token, this margin is the fence.
        """
        return self._leading.is_set() and (
            self._clock.monotonic() < self._last_renew + self.renew_deadline
        )

    async def wait_until_leading(self) -> None:
        await self._leading.wait()

    @property
    def leader_identity(self) -> str | None:
        """The holder in the last observed record (``None`` if none observed or released)."""
        holder = self._observed.get("holderIdentity")
        return holder if isinstance(holder, str) and holder else None

    @property
    def observed_time(self) -> float:
        """Local monotonic time at which the current record was first observed."""
        return self._observed_time

    @property
    def in_flight(self) -> bool:
        """A Lease request of this elector is in progress (for drivers of virtual time)."""
        return self._in_flight > 0

    def healthz_check(self) -> str | None:
        """client-go ``LeaderElector.Check`` (leading with a stale renewal), and beyond it: the
        gated work did not stop when leadership was lost, or the elector stopped campaigning —
        a replica wedged in either state would never lead again, so it should be restarted."""
        now = self._clock.monotonic()
        if self._wedged_since is not None:
            return (
                f"work gated on lease {self.namespace}/{self.name} has not stopped "
                f"{now - self._wedged_since:.1f}s after leadership was lost"
            )
        if not self._leading.is_set():
            stalled = now - self._last_try
            limit = self.renew_deadline + self.retry_period * (1.0 + JITTER_FACTOR)
            if self._campaigning and stalled > limit + self.healthz_tolerance:
                return (
                    f"candidate for lease {self.namespace}/{self.name} has not tried to acquire "
                    f"it for {stalled:.1f}s"
                )
            return None  # a hot standby is healthy
        since = now - self._last_renew
        if since > self.lease_duration + self.healthz_tolerance:
            return (
                f"leader of lease {self.namespace}/{self.name} has not renewed for {since:.1f}s "
                f"(lease duration {self.lease_duration}s + tolerance {self.healthz_tolerance}s)"
            )
        return None

    # ---- one attempt -----------------------------------------------------------------------

    def _holds_record(self) -> bool:
        """client-go ``IsLeader``: the observed record names this replica."""
        return self._observed.get("holderIdentity") == self.identity

    def _lease_valid(self, now: float) -> bool:
        # client-go isLeaseValid: observedTime + observed leaseDurationSeconds > now.
        return self._observed_time + spec_int(self._observed, "leaseDurationSeconds") > now

    def _observe(self, lease: dict[str, Any]) -> None:
        self._cached = lease
        spec = lease_spec(lease)
        if spec != self._observed:
            self._observed = spec
            self._observed_time = self._clock.monotonic()

    def _record(self, *, acquire_time: str | None, transitions: int) -> dict[str, Any]:
        return holder_record(
            identity=self.identity,
            lease_duration=self.lease_duration,
            now=self._clock.now(),
            acquire_time=acquire_time,
            transitions=transitions,
        )

    async def try_acquire_or_renew(self) -> bool:
        """One client-go ``tryAcquireOrRenew``; True when this replica holds the Lease after it.

        Errors (API or transport) are logged and count as a failed try.
        """
        self._in_flight += 1
        try:
            return await self._try_acquire_or_renew()
        except KubeError as err:
            # A connection failure is reported by the transport once per backoff step.
            self._log.log(
                failure_log_level(err, logging.WARNING),
                "lease request failed",
                extra={"fields": {"lease": f"{self.namespace}/{self.name}", "error": str(err)}},
            )
            return False
        except Exception:
            self._log.exception("lease try failed unexpectedly")
            return False
        finally:
            self._in_flight -= 1

    async def _try_acquire_or_renew(self) -> bool:
        # 1. Fast path: the leader updates its cached object, assuming nobody else wrote it.
        cached = self._cached
        if (
            cached is not None
            and self._holds_record()
            and self._lease_valid(self._clock.monotonic())
        ):
            record = self._record(
                acquire_time=self._observed.get("acquireTime"),
                transitions=spec_int(self._observed, "leaseTransitions"),
            )
            try:
                self._observe(await self._requests.update(with_record(cached, record)))
                return True
            except KubeError as err:
                self._log.info(
                    "optimistic lease renewal failed, falling back to a fresh read",
                    extra={"fields": {"lease": self.name, "error": str(err)}},
                )

        # 2. Read the record, or create it.
        current = await self._requests.get()
        if current is None:
            record = self._record(acquire_time=None, transitions=0)
            try:
                lease = new_lease(namespace=self.namespace, name=self.name, record=record)
                self._observe(await self._requests.create(lease))
            except KubeApiError as err:
                if err.code == 409:  # another candidate created it first
                    self._log.info(
                        "lease creation lost the race (conflict)",
                        extra={"fields": {"lease": self.name}},
                    )
                    return False
                raise
            return True

        # 3. A changed record restarts the local expiry clock; a valid foreign lease is left.
        self._observe(current)
        holder = self._observed.get("holderIdentity")
        if holder and not self._holds_record() and self._lease_valid(self._clock.monotonic()):
            return False

        # 4. Take over (or renew through the slow path) with the read resourceVersion.
        old = self._observed
        if self._holds_record():
            record = self._record(
                acquire_time=old.get("acquireTime"),
                transitions=spec_int(old, "leaseTransitions"),
            )
        else:
            record = self._record(
                acquire_time=None, transitions=spec_int(old, "leaseTransitions") + 1
            )
        try:
            self._observe(await self._requests.update(with_record(current, record)))
        except KubeApiError as err:
            if err.code == 409:
                self._log.info(
                    "lease update lost the race (conflict)", extra={"fields": {"lease": self.name}}
                )
                return False
            raise
        return True

    async def _bounded_try(self, limit: float) -> bool:
        """A try that is abandoned (and fails) when ``limit`` seconds pass on the clock."""
        if limit <= 0:
            return False
        attempt, _ = await _first_done(self.try_acquire_or_renew(), self._clock.sleep(limit))
        if attempt.cancelled():
            self._log.warning(
                "lease request abandoned at its deadline",
                extra={"fields": {"lease": self.name, "deadline_seconds": round(limit, 3)}},
            )
            return False
        return bool(attempt.result())

    def _report_transition(self) -> None:
        # client-go maybeReportTransition: tell OnNewLeader when the observed holder changes.
        holder = self._observed.get("holderIdentity") or ""
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder:
            self._log.info("new leader observed", extra={"fields": {"leader": holder}})
            if self._on_new_leader is not None:
                try:
                    self._on_new_leader(holder)
                except Exception:
                    self._log.exception("on_new_leader callback failed")

    # ---- loops -------------------------------------------------------------------------------

    async def run(
        self,
        *,
        on_started_leading: Callable[[], Awaitable[None]] | None = None,
        on_stopped_leading: Callable[[], Awaitable[None]] | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Campaign, lead, and campaign again after a loss, until ``stop`` is set.

        ``on_started_leading()`` runs as a task while leading; when the lease is lost the task
        is cancelled (client-go cancels the leader's context). On ``stop`` the elector keeps
        renewing until that task has returned by itself (the caller stops the gated work, e.g.
        ``LoopRunner.stop()``, so iterations finish), then releases the Lease.
        ``on_stopped_leading`` is awaited after every period of leadership. Cancelling
        :meth:`run` cancels the work, releases and re-raises.
        """
        stop = stop if stop is not None else asyncio.Event()
        self._campaigning = True
        self._last_try = self._clock.monotonic()
        try:
            while not stop.is_set():
                if not await self._acquire(stop):
                    return
                campaign_again = await self._lead(stop, on_started_leading, on_stopped_leading)
                if not campaign_again:
                    return
                self._last_try = self._clock.monotonic()
        finally:
            self._campaigning = False

    async def _acquire(self, stop: asyncio.Event) -> bool:
        self._log.info(
            "attempting to acquire leader lease",
            extra={"fields": {"lease": f"{self.namespace}/{self.name}", "id": self.identity}},
        )
        while not stop.is_set():
            # A hung request must not stall candidacy either: bound it like a renewal.
            self._last_try = self._clock.monotonic()
            acquired = await self._bounded_try(self.renew_deadline)
            self._report_transition()
            if acquired:
                # Counted from when the request was sent, not answered: the record was written
                # at some moment in between, and another replica may take over lease_duration
                # after it saw that record. An answer read late (the process was frozen in
                # between) must not extend the time this replica believes it may write.
                self._last_renew = self._last_try
                self._leading.set()
                self._status.set(1)
                self._log.info(
                    "successfully acquired lease",
                    extra={"fields": {"lease": f"{self.namespace}/{self.name}"}},
                )
                return True
            gap = self.retry_period * (1.0 + self._rng.uniform(0.0, JITTER_FACTOR))
            await self._sleep_unless_set(gap, stop)
        return False

    async def _renew_until_lost(self) -> None:
        """Returns when ``renew_deadline`` passes without a successful renewal."""
        while True:
            # A renewal is due retry_period after the last one and must succeed within
            # renew_deadline of that (client-go: Until(RetryPeriod) + PollUntil(RenewDeadline)).
            # Counting from the last success, not from when this task got to run, makes a
            # process that was frozen past the deadline give up at once instead of renewing.
            due = self._last_renew + self.retry_period
            deadline = due + self.renew_deadline
            await self._clock.sleep(due - self._clock.monotonic())
            while True:
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    self._log.warning(
                        "failed to renew lease within the renew deadline; leadership lost",
                        extra={"fields": {"lease": f"{self.namespace}/{self.name}"}},
                    )
                    return
                sent = self._clock.monotonic()
                renewed = await self._bounded_try(remaining)
                self._report_transition()
                if renewed:
                    self._last_renew = sent  # from when it was sent (see _acquire)
                    self.renewals += 1
                    break
                holder = self.leader_identity
                if holder is not None and holder != self.identity:
                    # Not in client-go: a record naming someone else means we do not lead.
                    self._log.warning(
                        "lease is held by another replica; leadership lost",
                        extra={"fields": {"lease": self.name, "holder": holder}},
                    )
                    return
                left = deadline - self._clock.monotonic()
                await self._clock.sleep(min(self.retry_period, left))

    async def _lead(
        self,
        stop: asyncio.Event,
        on_started_leading: Callable[[], Awaitable[None]] | None,
        on_stopped_leading: Callable[[], Awaitable[None]] | None,
    ) -> bool:
        """Lead until lost (True: campaign again) or until stopped and released (False)."""
        # Acquired just as shutdown began: hold nothing up, go straight to release.
        work = asyncio.ensure_future(self._guarded(None if stop.is_set() else on_started_leading))
        renewer = asyncio.ensure_future(self._renew_until_lost())
        shutdown = asyncio.ensure_future(self._work_done_after(stop, work))
        try:
            await asyncio.wait({renewer, shutdown}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await self._step_down(work=work, tasks=(renewer, shutdown))
            await self._release_bounded()
            await self._stopped(on_stopped_leading)
            raise
        lost = renewer.done()
        await self._step_down(work=work, tasks=(renewer, shutdown))
        if stop.is_set():
            await self._release_bounded()
        await self._stopped(on_stopped_leading)
        return lost and not stop.is_set()

    async def _guarded(self, work: Callable[[], Awaitable[None]] | None) -> None:
        if work is None:
            return
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception("work under leadership failed; still holding the lease")

    @staticmethod
    async def _work_done_after(stop: asyncio.Event, work: asyncio.Future[None]) -> None:
        await stop.wait()
        await asyncio.wait({work})

    async def _step_down(
        self, *, work: asyncio.Future[None], tasks: tuple[asyncio.Future[None], ...]
    ) -> None:
        """Stop leading: the flag and gauge drop first, then the work and renewals end.

        Waiting for them never swallows a cancellation of the elector itself
        (:func:`~kubescale.base.tasks.cancel_and_wait`). Work that is still running
        ``renew_deadline`` seconds after it was cancelled is wedged: ``healthz_check``
        fails from then on (so the replica is restarted), and the elector does not campaign
        until it has stopped — a replica never runs two generations of gated work.
        """
        self._leading.clear()
        self._status.set(0)
        pending = [task for task in (work, *tasks) if not task.done()]
        for task in pending:
            task.cancel()
        if not pending:
            return
        await _first_done(asyncio.wait(pending), self._clock.sleep(self.renew_deadline))
        still_running = [task for task in pending if not task.done()]
        if still_running:
            self._wedged_since = self._clock.monotonic()
            self._log.error(
                "work under leadership did not stop when leadership was lost",
                extra={"fields": {"lease": f"{self.namespace}/{self.name}"}},
            )
            await cancel_and_wait(*still_running)
            self._wedged_since = None

    async def _stopped(self, on_stopped_leading: Callable[[], Awaitable[None]] | None) -> None:
        self._log.info("stopped leading", extra={"fields": {"lease": self.name}})
        if on_stopped_leading is None:
            return
        try:
            await on_stopped_leading()
        except Exception:
            self._log.exception("on_stopped_leading callback failed")

    async def _release_bounded(self) -> None:
        if self.release_on_cancel:
            # client-go release() runs under context.WithTimeout(RenewDeadline).
            await _first_done(self._release(), self._clock.sleep(self.renew_deadline))

    async def _release(self) -> None:
        """client-go ``release()``: re-read, and if still the holder write an empty holder."""
        self._in_flight += 1
        try:
            current = await self._requests.get()
            if current is None:
                return
            self._observe(current)
            if not self._holds_record():
                return
            record = released_record(
                now=self._clock.now(),
                transitions=spec_int(self._observed, "leaseTransitions"),
            )
            self._observe(await self._requests.update(with_record(current, record)))
            self._log.info("released lease", extra={"fields": {"lease": self.name}})
        except KubeError as err:
            self._log.warning(
                "failed to release lease", extra={"fields": {"lease": self.name, "error": str(err)}}
            )
        finally:
            self._in_flight -= 1

    async def _sleep_unless_set(self, seconds: float, event: asyncio.Event) -> None:
        if seconds > 0 and not event.is_set():
            await _first_done(self._clock.sleep(seconds), event.wait())


async def _first_done(*awaitables: Awaitable[Any]) -> list[asyncio.Future[Any]]:
    """Run ``awaitables`` until the first finishes; cancel and reap the rest; their futures."""
    tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(*tasks)
    return tasks
