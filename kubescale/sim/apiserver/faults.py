"""Fault injection: the failures a controller must survive against a real API server.

* ``add(verb=, resource=, status=500)`` fails the next ``count`` matching requests (``None``:
  until cleared) with a real Status of that code — 500 InternalError, 429 TooManyRequests with
  ``Retry-After`` (and ``details.retryAfterSeconds``) when ``retry_after`` is given, 410, 503...
  ``delay`` seconds of real time are waited first; ``status=0`` only delays (a slow server).
  With ``after_commit=True`` (writes only) the request is served first — the write is stored and
  watchers see it — and the error is the answer instead of the result: what kube-apiserver does
  when its request deadline passes after etcd committed the write (``504`` ``Timeout``, "request
  did not complete within requested timeout") or a step after the commit fails (``500``). The
  client cannot tell whether the write happened. ``after_commit=True`` with a ``delay`` waits
  after serving instead of before: the write is stored at once and the answer (the error, or
  with ``status=0`` the result) comes ``delay`` seconds late — past a client's timeout, an
  answer that never arrives although the write committed.
* ``hang=True`` holds each matching request until :meth:`FaultInjector.release` (or ``clear()``,
  or the server stopping): a dependency that never answers, on no clock at all, so a test moves
  its controller's clock past its deadlines instead of waiting.
* ``body="..."`` (with ``status=0``) answers ``200`` with that raw text instead of serving: a
  broken aggregated API (non-JSON, ``"items": null``).
* The metrics APIs consult the same rules, their ``resource`` qualified by the group:
  ``pods.metrics.k8s.io``, ``<metric>.external.metrics.k8s.io``, ``pods.custom.metrics.k8s.io/
  <metric>`` (``<resource>.<group>/<metric>`` as kube-apiserver's RequestInfo splits the path).
* ``drop_watches()`` breaks open watch streams mid-stream (the connection is closed without the
  final chunk).
* ``hold(verb=, resource=)`` makes the next ``count`` matching requests wait until the returned
  :class:`asyncio.Event` is set (then they are served): a list that takes as long as the test
  wants — a large cluster's first list of pods — with no timing in the test.
* ``expire_history()`` forgets the change log, so watches and continue tokens from any older
  resourceVersion get 410 — what an etcd compaction does.

``resource`` is a plural (``pods``: the resource itself, not its subresources) or
``plural/subresource`` (``pods/eviction``, ``deployments/scale``); ``verb`` is one of get, list,
watch, create, update, patch, delete, deletecollection.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from . import errors
from .store import ObjectStore

__all__ = ["VERBS", "WRITE_VERBS", "FaultInjector", "InjectedFault"]

VERBS: Final = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})
TIMEOUT_MESSAGE: Final = (
    "Timeout: request did not complete within requested timeout - context deadline exceeded"
)
"""kube-apiserver's 504 message when a request outlives its deadline (``apierrors.NewTimeoutError``
via the timeout filter)."""


@dataclass(frozen=True, kw_only=True)
class InjectedFault:
    """What to do to one request: wait ``delay`` seconds, then fail with ``error`` if any —
    before serving it, or after serving it when ``after_commit``."""

    delay: float
    error: errors.ApiError | None
    after_commit: bool = False
    hold: asyncio.Event | None = None
    """Set when the request may go on (``hang=True``, or :meth:`FaultInjector.hold`)."""
    body: str | None = None
    """Answer ``200`` with this raw text instead of serving."""

    async def wait(self) -> None:
        """The delay, then the hold."""
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.hold is not None:
            await self.hold.wait()


@dataclass(kw_only=True)
class _Rule:
    verb: str | None
    resource: str | None
    status: int
    remaining: int | None
    retry_after: float | None
    delay: float
    after_commit: bool
    hang: bool = False
    body: str | None = None
    hold: asyncio.Event | None = None

    def applies(self, verb: str, resource: str) -> bool:
        return (self.verb is None or self.verb == verb) and (
            self.resource is None or self.resource == resource
        )


class FaultInjector:
    """Faults consulted by every request before it is served."""

    def __init__(self, *, store: ObjectStore) -> None:
        self._store = store
        self._rules: list[_Rule] = []
        self.dropped_watches = 0
        """How many watch streams :meth:`drop_watches` has broken so far."""
        self._hold = asyncio.Event()

    def add(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        status: int = 500,
        count: int | None = 1,
        retry_after: float | None = None,
        delay: float = 0.0,
        after_commit: bool = False,
        hang: bool = False,
        body: str | None = None,
    ) -> None:
        if body is not None and status != 0:
            raise ValueError("body answers 200: use status=0 with it")
        if verb is not None and verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; one of {', '.join(sorted(VERBS))}")
        if status != 0 and not 400 <= status <= 599:
            raise ValueError(f"status must be 0 (delay only) or an HTTP error code, not {status}")
        if count is not None and count < 1:
            raise ValueError("count must be at least 1 (or None for until cleared)")
        if delay < 0:
            raise ValueError("delay cannot be negative")
        if after_commit and (verb not in WRITE_VERBS or (status == 0 and delay == 0)):
            raise ValueError(
                "after_commit needs a write verb "
                f"({', '.join(sorted(WRITE_VERBS))}) and an error status or a delay"
            )
        self._rules.append(
            _Rule(
                verb=verb,
                resource=resource,
                status=status,
                remaining=count,
                retry_after=retry_after,
                delay=delay,
                after_commit=after_commit,
                hang=hang,
                body=body,
            )
        )

    def hold(
        self, *, verb: str | None = None, resource: str | None = None, count: int | None = 1
    ) -> asyncio.Event:
        """Hold the next ``count`` matching requests (``None``: until cleared) until the
        returned event is set; then they are served as usual."""
        self.add(verb=verb, resource=resource, status=0, count=count)
        released = asyncio.Event()
        self._rules[-1].hold = released
        return released

    def drop_watches(self, resource: str | None = None) -> None:
        """Break every open watch (of ``resource``, a plural, if given)."""
        self.dropped_watches += self._store.events.drop(
            lambda subscription: resource is None or subscription.resource[1] == resource
        )

    def expire_history(self) -> None:
        self._store.expire_history()

    def release(self) -> None:
        """Let every request held by a ``hang=True`` rule go on (later ones are held again)."""
        self._hold.set()
        self._hold = asyncio.Event()

    def clear(self) -> None:
        self._rules.clear()
        self.release()

    def take(self, *, verb: str, resource: str) -> InjectedFault | None:
        """The fault for this request, consuming one use of the first matching rule."""
        for rule in self._rules:
            if not rule.applies(verb, resource):
                continue
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self._rules.remove(rule)
            return InjectedFault(
                delay=rule.delay,
                error=_error_for(rule),
                after_commit=rule.after_commit,
                hold=rule.hold if rule.hold is not None else (self._hold if rule.hang else None),
                body=rule.body,
            )
        return None


def _error_for(rule: _Rule) -> errors.ApiError | None:
    if rule.status == 0:
        return None
    if rule.status == 429:
        return errors.too_many_requests(
            "Too many requests, please try again later.", retry_after=rule.retry_after
        )
    if rule.status == 500:
        return errors.internal_error("injected fault")
    headers = {"Retry-After": str(max(1, round(rule.retry_after)))} if rule.retry_after else None
    message = TIMEOUT_MESSAGE if rule.status == 504 else f"injected fault ({rule.status})"
    return errors.status_error(code=rule.status, message=message, headers=headers)
