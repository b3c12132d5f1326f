"""The Prometheus HTTP query API, called the way VPA's recommender calls it.

Upstream's history provider (``pkg/recommender/input/history/history_provider.go``) talks to
Prometheus through ``github.com/prometheus/client_golang`` (``api`` + ``api/prometheus/v1``).
This module is that client's behaviour for the two calls the provider makes, so a Prometheus
(or a proxy in front of one) sees the same requests; answers are decoded by
:mod:`kubescale.prometheus.query_values`.

* ``QueryRange(ctx, query, Range{Start, End, Step})`` is ``POST <address>/api/v1/query_range``
  with the form ``end, query, start, step``; ``Query(ctx, query, ts)`` is
  ``POST <address>/api/v1/query`` with ``query, time`` (``url.Values.Encode``: keys sorted,
  ``application/x-www-form-urlencoded``). Times are ``formatTime``, the step its seconds as
  the shortest decimal. A ``405``/``501`` answer repeats the call as a GET with the form in the
  URL (``DoGetFallback``).
* The address keeps its path prefix (trailing ``/`` dropped, endpoint joined with
  ``path.Join``) and its query string, which is carried into every form (``u.Query()``).
* Transport: ``Authorization`` from ``PrometheusBearerTokenAuthTransport`` (``Bearer <token>``)
  or ``PrometheusBasicAuthTransport``; ``--prometheus-insecure`` turns TLS verification off;
  each call runs under its own deadline (``context.WithTimeout(queryTimeout)``), measured on
  the injectable :class:`~kubescale.base.clock.Clock` (a timer raced against the call, as
  other deadlines of the codebase are: tests move a virtual clock, not real time), and a missed
  one reads ``Post "<url>": context deadline exceeded``; a refused connection
  ``Post "<url>": dial tcp <host>:<port>: connect: connection refused``.
* Metrics (``metrics_recommender.NewPrometheusRoundTripperCounter/Duration``, promhttp's
  round-tripper instrumentation): every HTTP answer counts in
  ``vpa_recommender_prometheus_client_api_requests_count{code,method}`` and
  ``vpa_recommender_prometheus_client_api_requests_duration_seconds{code,method}`` with the
  numeric status and the lower-case method; transport failures are not counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final
from urllib.parse import parse_qsl, quote_plus, urlencode, urlsplit, urlunsplit

import aiohttp
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from kubescale.base.clock import Clock, RealClock
from kubescale.base.tasks import cancel_and_wait
from kubescale.prometheus.client_settings import PrometheusAuth, check_prometheus_address
from kubescale.prometheus.query_values import (
    PrometheusAPIError,
    QueryValue,
    decode_answer,
    format_go_float,
    format_time,
)

__all__ = [
    "PrometheusClientMetrics",
    "PrometheusQueryClient",
]

_FALLBACK_CODES: Final = frozenset({405, 501})  # DoGetFallback: MethodNotAllowed, NotImplemented
_UNKNOWN_AUTHORITY_CODES: Final = frozenset({2, 18, 19, 20, 21})  # OpenSSL X509_V_ERR_*


class _RequestCounts(Collector):
    """A counter exposed under upstream's exact name.

    Go's client exposes ``vpa_recommender_prometheus_client_api_requests_count`` as a counter
    without a ``_total`` suffix; prometheus_client's Counter always adds one, so this exposes
    the same samples as an untyped family (the sample name, not the TYPE line, is what queries
    and dashboards use).
    """

    def __init__(self, name: str, documentation: str) -> None:
        self._name = name
        self._documentation = documentation
        self._counts: dict[tuple[str, str], float] = {}

    def inc(self, *, code: str, method: str) -> None:
        self._counts[(code, method)] = self._counts.get((code, method), 0.0) + 1.0

    def value(self, *, code: str, method: str) -> float:
        return self._counts.get((code, method), 0.0)

    def collect(self) -> Iterable[Metric]:
        family = UnknownMetricFamily(self._name, self._documentation, labels=["code", "method"])
        for (code, method), count in sorted(self._counts.items()):
            family.add_metric([code, method], count)
        yield family


class PrometheusClientMetrics:
    """Upstream's Prometheus-client request metrics, on the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = _RequestCounts(
            "vpa_recommender_prometheus_client_api_requests_count",
            "Number of requests to a Prometheus API.",
        )
        registry.register(self.requests)
        self.duration = Histogram(
            "vpa_recommender_prometheus_client_api_requests_duration_seconds",
            "Duration of requests to a Prometheus API.",
            ["code", "method"],
            registry=registry,
        )

    def observe(self, *, code: int, method: str, seconds: float) -> None:
        labels = {"code": str(code), "method": method.lower()}
        self.requests.inc(**labels)
        self.duration.labels(**labels).observe(seconds)


def _go_url_error(method: str, url: str, reason: str) -> str:
    """``url.Error.Error()``: ``Post "<url>": <reason>``."""
    return f"{method[:1].upper()}{method[1:].lower()} {json.dumps(url)}: {reason}"


def _transport_reason(err: BaseException) -> str:
    """The Go transport's words for a failed request (after ``Post "<url>": ``)."""
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        certificate_error = err.certificate_error
        code = getattr(certificate_error, "verify_code", None)
        if code in _UNKNOWN_AUTHORITY_CODES:
            detail = "certificate signed by unknown authority"
        else:
            detail = getattr(certificate_error, "verify_message", None) or str(certificate_error)
        return f"tls: failed to verify certificate: x509: {detail}"
    if isinstance(err, aiohttp.ClientConnectorError):
        code = err.os_error.errno
        reason = os.strerror(code).lower() if code else str(err.os_error)
        return f"dial tcp {err.host}:{err.port}: connect: {reason}"
    return str(err) or type(err).__name__


@dataclass(kw_only=True)
class _Attempt:
    """One HTTP request of a call, and whether its answer's headers are in."""

    method: str
    url: str
    reading_body: bool = False


class PrometheusQueryClient:
    """``prometheusv1.NewAPI(promapi.NewClient(...))`` reduced to ``QueryRange`` and ``Query``."""

    def __init__(
        self,
        *,
        address: str,
        auth: PrometheusAuth,
        insecure: bool = False,
        timeout: float,
        metrics: PrometheusClientMetrics | None = None,
        session: aiohttp.ClientSession | None = None,
        clock: Clock | None = None,
    ) -> None:
        check_prometheus_address(address)
        parts = urlsplit(address)
        self._scheme, self._netloc = parts.scheme, parts.netloc
        self._prefix = parts.path.rstrip("/")  # promapi.NewClient: TrimRight(u.Path, "/")
        self._address_query = parse_qsl(parts.query, keep_blank_values=True)
        self._authorization = auth.authorization()
        self._insecure = insecure
        self._timeout = timeout
        self._metrics = metrics
        self._session = session
        self._owns_session = session is None
        self._clock: Clock = clock if clock is not None else RealClock()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def endpoint_url(self, endpoint: str, *, query: str = "") -> str:
        """``httpClient.URL``: ``path.Join(prefix, endpoint)`` on the address."""
        path = posixpath.normpath(posixpath.join(self._prefix or "/", endpoint.lstrip("/")))
        return urlunsplit((self._scheme, self._netloc, path, query, ""))

    def form(self, params: Mapping[str, str]) -> str:
        """``url.Values.Encode`` of the address's query with ``params`` set over it."""
        values: dict[str, list[str]] = {}
        for key, value in self._address_query:
            values.setdefault(key, []).append(value)
        for key, value in params.items():
            values[key] = [value]
        pairs = [(key, value) for key in sorted(values) for value in values[key]]
        return urlencode(pairs, quote_via=quote_plus)

    async def query_range(
        self, query: str, *, start: datetime, end: datetime, step: timedelta
    ) -> QueryValue:
        """``QueryRange``: a range query evaluated every ``step`` from ``start`` to ``end``."""
        params = {
            "query": query,
            "start": format_time(start),
            "end": format_time(end),
            "step": format_go_float(step.total_seconds()),
        }
        return await self._call("/api/v1/query_range", params)

    async def query(self, query: str, *, at: datetime) -> QueryValue:
        """``Query``: an instant query evaluated at ``at``."""
        return await self._call("/api/v1/query", {"query": query, "time": format_time(at)})

    async def _call(self, endpoint: str, params: Mapping[str, str]) -> QueryValue:
        address_query = urlencode(self._address_query, quote_via=quote_plus)
        body = self.form(params)
        attempt = _Attempt(method="POST", url=self.endpoint_url(endpoint, query=address_query))
        attempts = [attempt]
        if self._timeout > 0:  # context.WithTimeout(0): already past its deadline
            exchange = asyncio.ensure_future(self._exchange(endpoint, body, attempts))
            timer = asyncio.ensure_future(self._clock.sleep(self._timeout))
            try:
                await asyncio.wait({exchange, timer}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                await cancel_and_wait(exchange, timer)  # the caller is cancelled: so is the call
                raise
            if exchange.done():
                await cancel_and_wait(timer)
                code, payload = exchange.result()
                return decode_answer(code, payload)
            await cancel_and_wait(exchange)
        # http.Client.Do wraps the context's error in a url.Error; httpClient.Do returns it
        # bare when the deadline passes while the body is being read.
        attempt = attempts[-1]
        reason = "context deadline exceeded"
        if not attempt.reading_body:
            reason = _go_url_error(attempt.method, attempt.url, reason)
        raise PrometheusAPIError(reason)

    async def _exchange(
        self, endpoint: str, body: str, attempts: list[_Attempt]
    ) -> tuple[int, bytes]:
        """The call's requests: the POST, and the GET fallback (``DoGetFallback``) on 405/501;
        each appended to ``attempts`` as it is sent (the deadline's error names the last)."""
        code, payload = await self._request(attempts[-1], body)
        if code in _FALLBACK_CODES:
            attempts.append(_Attempt(method="GET", url=self.endpoint_url(endpoint, query=body)))
            code, payload = await self._request(attempts[-1], None)
        return code, payload

    async def _request(self, attempt: _Attempt, body: str | None) -> tuple[int, bytes]:
        headers: dict[str, str] = {}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        session = self._session
        if session is None:
            session = self._session = aiohttp.ClientSession()
        started = self._clock.monotonic()
        try:
            async with session.request(
                attempt.method,
                attempt.url,
                data=body,
                headers=headers,
                ssl=not self._insecure,
                allow_redirects=True,
            ) as response:
                code = response.status
                if self._metrics is not None:  # promhttp times the round trip: up to headers
                    elapsed = self._clock.monotonic() - started
                    self._metrics.observe(code=code, method=attempt.method, seconds=elapsed)
                attempt.reading_body = True
                payload = await response.read()
        except aiohttp.ClientError as err:
            reason = _transport_reason(err)
            if not attempt.reading_body:
                reason = _go_url_error(attempt.method, attempt.url, reason)
            raise PrometheusAPIError(reason) from None
        return code, payload
