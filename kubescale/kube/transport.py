"""The one choke point between kubescale and the API server: send, retry, measure.

:class:`Transport` sends every request kubescale makes, through one
:class:`~kubescale.kube.connection.ApiClient` (an aiohttp session: no client library, issue 29),
with raw JSON in and out, and the same code serves every
:class:`~kubescale.kube.resources.ResourceType`, CRD kinds included. Here, and only here, live:

- retries: ``429 Too Many Requests`` waits the server's ``Retry-After`` (client-go's
  ``checkWait``; a jittered backoff step when the header is absent), ``5xx`` and transport errors
  back off exponentially with jitter, all bounded by ``ClientSettings.max_attempts``. A ``5xx``
  answer to a write is retried only when it carries ``Retry-After`` (client-go's rule): without
  it the server has answered, e.g. an admission webhook failing closed, and sending the write
  again would only call the webhook again; reads are retried after any ``5xx``. A JSON
  patch and a ``generateName`` create are not retried after a 5xx or a transport error (they are
  not idempotent); requests are retried after a 429, which the server sends before doing
  anything, except evictions, whose 429 is a disruption budget's refusal;
- the latency histogram ``kubescale_apiserver_client_request_duration_seconds{verb,resource,code}``
  on an injected registry (``code`` is the HTTP status, or ``error`` when no response came;
  ``resource`` is the plural, ``plural/subresource`` for subresources);
- the conversion of error responses into :class:`~kubescale.kube.errors.KubeApiError`;
- the client-side rate limit (``ClientSettings.qps``/``burst``, ``--kube-api-qps``/
  ``--kube-api-burst``: client-go's token bucket, :mod:`kubescale.kube.rate_limit`), taken
  before every attempt and every watch;
- the report of an unreachable API server (:mod:`kubescale.kube.connection_report`): one
  warning when requests start failing for lack of an answer (or with ``401 Unauthorized``), one
  per backoff step while they go on, one line when the server answers again; each retry itself
  is logged at debug level only.

The connection has no retry layer of its own, so nothing retries twice. Watches are opened here
too (:meth:`Transport.open_watch`) but driven by the informer, with no total timeout and an
aiohttp ``sock_read`` inactivity timeout instead (a total would cut every watch at a fixed
duration). Retry sleeps use the injected clock; jitter an injectable ``random.Random``.

Every path sent is an :data:`~kubescale.kube.api_paths.ApiPath`: built, validated and escaped
by :func:`kubescale.kube.api_paths.api_path` (through a
:class:`~kubescale.kube.resources.ResourceType`'s path methods) and by nothing else.
"""

from __future__ import annotations

import contextvars
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, Histogram

from kubescale.base.clock import Clock, RealClock
from kubescale.base.json_decoding import decode_json
from kubescale.base.logs import component_logger
from kubescale.kube.api_paths import ApiPath
from kubescale.kube.backoff import Backoff, BackoffPolicy, parse_retry_after
from kubescale.kube.connection import ApiClient
from kubescale.kube.connection_report import ConnectionReport, describe_cause
from kubescale.kube.errors import KubeApiError, KubeTransportError
from kubescale.kube.rate_limit import TokenBucket
from kubescale.kube.resources import ResourceType
from kubescale.kube.watch_stream import MAX_WATCH_EVENT_BYTES, WatchInactive, WatchStream

log = component_logger("kube.client")

JSON = "application/json"
# client-go's rest_client_request_duration_seconds buckets.
LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)


_SEND_GATE: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "kubescale_send_gate", default=None
)
"""The current request's ``before_send`` check, for :func:`send_gate_trace`."""


def send_gate_trace() -> aiohttp.TraceConfig:
    """A trace that runs the request's ``before_send`` check again once aiohttp holds a
    connection for it, just before the request goes on the wire.

    The check before the attempt is not the last moment: a request can wait for a pooled
    connection, a TLS handshake or the event loop (several concurrent writes, or a process
    frozen by SIGSTOP/GC in between), and a write that passed its leader gate before such a wait
    must not go out after it (the split-brain test counted two stale checkpoint writes with
    8 written at once). Raising here aborts the request before any byte is sent."""

    async def check(*_args: object) -> None:
        gate = _SEND_GATE.get()
        if gate is not None:
            gate()

    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(check)
    trace.on_connection_create_end.append(check)
    return trace


@dataclass(frozen=True, kw_only=True)
class ClientSettings:
    """How requests are timed out and retried."""

    request_timeout: float = 30.0
    """Total seconds for one non-watch request (connect + send + full response)."""
    connect_timeout: float = 10.0
    max_attempts: int = 5
    """Tries per request including the first, for 429, 5xx and transport errors."""
    retry_backoff: BackoffPolicy = field(
        default_factory=lambda: BackoffPolicy(initial=0.2, cap=10.0, jitter=0.5)
    )
    user_agent: str = "kubescale"
    qps: float = 0.0
    """Client-side rate limit, requests a second (client-go ``QPS``); 0: none."""
    burst: int = 0
    """Requests allowed at once above ``qps`` (client-go ``Burst``); at least 1 when ``qps`` is
    set (0 then means ``max(1, ceil(qps))``)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.qps < 0 or self.burst < 0:
            raise ValueError("qps and burst must not be negative")


class ClientMetrics:
    """Request latency by verb, resource and response code."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.request_duration = Histogram(
            "kubescale_apiserver_client_request_duration_seconds",
            "Latency of requests to the API server, by verb, resource and response code.",
            ["verb", "resource", "code"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    def observe(self, *, verb: str, resource: str, code: str, seconds: float) -> None:
        self.request_duration.labels(verb=verb, resource=resource, code=code).observe(
            max(0.0, seconds)
        )


def _resource_label(resource: ResourceType, subresource: str) -> str:
    return f"{resource.plural}/{subresource}" if subresource else resource.plural


class Transport:
    """Requests with retries and metrics over one :class:`ApiClient`."""

    def __init__(
        self,
        *,
        api_client: ApiClient,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        settings: ClientSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.api_client = api_client
        self.clock: Clock = clock or RealClock()
        self.rng = rng or random.Random()
        self.settings = settings or ClientSettings()
        self.metrics = ClientMetrics(registry if registry is not None else CollectorRegistry())
        api_client.user_agent = self.settings.user_agent
        self.connection = ConnectionReport(server=str(api_client.configuration.host or ""))
        self.limiter: TokenBucket | None = None
        if self.settings.qps > 0:
            burst = self.settings.burst or max(1, math.ceil(self.settings.qps))
            self.limiter = TokenBucket(qps=self.settings.qps, burst=burst, clock=self.clock)

    def _failed(self, cause: str) -> None:
        line = self.connection.failure(cause, now=self.clock.monotonic())
        if line is not None:
            log.warning(line)

    def _answered(self, status: int, payload: bytes) -> None:
        if status == 401:
            err = KubeApiError.from_response(code=status, body=payload, retry_after=None)
            self._failed(f"{err.code} {err.reason}: {err.message}")
            return
        line = self.connection.success(now=self.clock.monotonic())
        if line is not None:
            log.info(line)

    async def close(self) -> None:
        await self.api_client.close()

    async def _send(
        self,
        *,
        method: str,
        path: ApiPath,
        query: Sequence[tuple[str, str]],
        body: Any,
        content_type: str,
        client_timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """One HTTP exchange; the aiohttp response, its body unread."""
        headers = {"Accept": JSON, "Content-Type": content_type}
        try:
            return await self.api_client.send(
                method, path, query=query, headers=headers, body=body, client_timeout=client_timeout
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise KubeTransportError(f"{method} {path}: {describe_cause(err)}") from err
        except ValueError as err:  # a body it cannot encode: the request cannot even be built
            raise KubeApiError(code=0, reason="BadRequest", message=str(err)) from err

    async def request(
        self,
        *,
        verb: str,
        method: str,
        resource: ResourceType,
        path: ApiPath,
        subresource: str = "",
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        idempotent: bool = True,
        retry_throttled: bool = True,
        before_send: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send a request, retrying 429/5xx/transport errors; the decoded JSON response body.

        ``before_send`` runs before every attempt and may raise to stop it (a leader-only
        write's gate: a retry after a wait must not go out once the Lease is lost).

        ``idempotent=False`` turns off retries after 5xx and transport errors; writes are
        retried after a 5xx only when it carries ``Retry-After``;
        ``retry_throttled=False`` turns off retries after 429 (evictions: there a 429 is a
        disruption budget's answer, which the caller wants at once).
        """
        label = _resource_label(resource, subresource)
        timeout = aiohttp.ClientTimeout(
            total=self.settings.request_timeout, sock_connect=self.settings.connect_timeout
        )
        backoff = Backoff(self.settings.retry_backoff, clock=self.clock, rng=self.rng)
        attempt = 0
        unanswered = 0  # attempts retried after no answer or a 5xx: they may have been served
        while True:
            attempt += 1
            if before_send is not None:
                before_send()
            if self.limiter is not None:
                await self.limiter.wait()
            started = self.clock.monotonic()
            token = _SEND_GATE.set(before_send)
            try:
                try:
                    response = await self._send(
                        method=method,
                        path=path,
                        query=query,
                        body=body,
                        content_type=content_type,
                        client_timeout=timeout,
                    )
                finally:
                    _SEND_GATE.reset(token)
                try:
                    payload = await response.read()
                except (aiohttp.ClientError, TimeoutError, OSError) as err:
                    raise KubeTransportError(f"{method} {path}: {describe_cause(err)}") from err
                finally:
                    response.release()
            except KubeTransportError as err:
                self.metrics.observe(
                    verb=verb,
                    resource=label,
                    code="error",
                    seconds=self.clock.monotonic() - started,
                )
                self._failed(describe_cause(err))
                if not idempotent or attempt >= self.settings.max_attempts:
                    err.unanswered_attempts = unanswered
                    raise
                unanswered += 1
                delay = await backoff.sleep()
                log.debug(
                    "retrying after a transport error",
                    extra={
                        "fields": {
                            "verb": verb,
                            "resource": label,
                            "error": str(err),
                            "delay": round(delay, 3),
                        }
                    },
                )
                continue
            status = int(response.status)
            self.metrics.observe(
                verb=verb,
                resource=label,
                code=str(status),
                seconds=self.clock.monotonic() - started,
            )
            self._answered(status, payload)
            if 200 <= status < 300:
                return decode_json(payload) if payload else {}
            err_ = KubeApiError.from_response(
                code=status,
                body=payload,
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
            retryable = (status == 429 and retry_throttled) or (
                status >= 500 and idempotent and (method == "GET" or err_.retry_after is not None)
            )
            if not retryable or attempt >= self.settings.max_attempts:
                err_.unanswered_attempts = unanswered
                raise err_
            if status >= 500:
                unanswered += 1
            if err_.retry_after is not None:
                # The server said when: client-go waits exactly Retry-After seconds.
                backoff.next_delay()
                await self.clock.sleep(err_.retry_after)
                delay = err_.retry_after
            else:
                delay = await backoff.sleep()
            log.info(
                "retrying after an error response",
                extra={
                    "fields": {
                        "verb": verb,
                        "resource": label,
                        "code": status,
                        "delay": round(delay, 3),
                    }
                },
            )

    async def open_watch(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        query: Sequence[tuple[str, str]],
        inactivity_timeout: float,
        connect_timeout: float | None = None,
        max_event_bytes: int = MAX_WATCH_EVENT_BYTES,
    ) -> WatchStream:
        """Open a watch (not retried: the informer owns the retry policy of its loop); a line
        longer than ``max_event_bytes`` ends it (:class:`WatchEventTooLarge`)."""
        path = resource.collection_path(namespace)
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=connect_timeout or self.settings.connect_timeout,
            sock_read=inactivity_timeout,
        )
        if self.limiter is not None:
            await self.limiter.wait()
        started = self.clock.monotonic()
        try:
            response = await self._send(
                method="GET",
                path=path,
                query=[*query, ("watch", "true")],
                body=None,
                content_type=JSON,
                client_timeout=timeout,
            )
        except KubeTransportError as err:
            self.metrics.observe(
                verb="watch",
                resource=resource.plural,
                code="error",
                seconds=self.clock.monotonic() - started,
            )
            self._failed(describe_cause(err))
            if isinstance(err.__cause__, TimeoutError):
                raise WatchInactive(f"watch {path}: no response headers in time") from err
            raise
        status = int(response.status)
        self.metrics.observe(
            verb="watch",
            resource=resource.plural,
            code=str(status),
            seconds=self.clock.monotonic() - started,
        )
        if status != 200:
            try:
                payload = await response.read()
            except (aiohttp.ClientError, TimeoutError, OSError):
                payload = b""
            finally:
                response.release()
            self._answered(status, payload)
            raise KubeApiError.from_response(
                code=status,
                body=payload,
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        self._answered(status, b"")
        return WatchStream(response, max_event_bytes=max_event_bytes)
