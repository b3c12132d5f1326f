"""Usage history from Prometheus, loaded into the model at start-up (``--storage=prometheus``).

Upstream: ``pkg/recommender/input/history/history_provider.go`` (``GetClusterHistory``) and
``input/cluster_feeder.go`` (``InitFromHistoryProvider``), VPA 1.7.1+ (the release that made
``--history-cpu-metric``/``--history-memory-metric`` reach the queries). Contract:

* Selector: ``job="<--prometheus-cadvisor-job-name>"`` (left out when the name is empty),
  ``<--container-pod-name-label>=~".+"``, ``<--container-name-label>!="POD"``,
  ``<--container-name-label>!=""`` and, with ``--vpa-object-namespace``,
  ``<--container-namespace-label>="<namespace>"``, joined by ``", "``.
* CPU: ``rate(<--history-cpu-metric>{selector}[<--history-resolution>])``; memory:
  ``<--history-memory-metric>{selector}``. Both are range queries from ``now -
  --history-length`` to ``now`` with ``step = --history-resolution`` (durations in
  Prometheus' ``model.ParseDuration`` syntax: ``8d``, ``1h``, ``1w2d``, ``90s``, ``500ms``),
  each under ``--prometheus-query-timeout``. So the model sees, per container and step, the
  mean CPU rate over the preceding resolution window and the working set at the step.
* Every series must carry the container namespace/pod/name labels, else the whole history
  fails. A value becomes a ``ResourceAmount`` as ``CPUAmountFromCores`` (cores × 1000) /
  ``MemoryAmountFromBytes``: negative → 0, above 1e14 → 1e14, else Go ``int64()`` truncation
  (NaN gives Go's ``-2**63``, which the model then rejects as an invalid sample). Each
  container's CPU and memory samples are merged and sorted by time (stable: a CPU sample stays
  before a memory sample of the same step; Go's unstable ``sort.Slice`` leaves that order
  unspecified).
* Pod labels: ``--metric-for-pod-labels`` is sent verbatim as an instant query at ``now``. It
  must return a matrix — the upstream default ``up{job="kubernetes-pods"}`` is an instant
  vector and fails the whole history exactly as upstream does; give it a range such as
  ``up{job="kubernetes-pods"}[8d]``. Per series the pod comes from
  ``--pod-namespace-label``/``--pod-name-label`` and the labels from every label starting
  with ``--pod-label-prefix`` (prefix stripped); the series whose last sample is the latest
  wins (a strictly later one replaces an earlier one).
* Authentication: ``--prometheus-bearer-token`` (or the trimmed content of
  ``--prometheus-bearer-token-file``, read at start-up) wins; else ``--username`` and
  ``--password`` (or the trimmed content of ``--password-file``, kubescale's addition, so the
  password need not be on the command line) when both are set; else
  ``PROMETHEUS_USERNAME``/``PROMETHEUS_PASSWORD`` from the environment when both are set;
  else none.
* Loading (:func:`load_history`): a failed history is logged (``Cannot get cluster history``)
  and nothing is loaded; otherwise every pod is added in phase ``Unknown`` with its last
  labels and its containers without requests, then every sample is added with request 0.
  Upstream walks a Go map (random order); this walks pods by ``(namespace, name)`` and
  containers by name, so repeated loads build identical histograms. New aggregates are
  stamped with ``now`` as their creation time (upstream's ``time.Now()``). In memory-saver
  mode :class:`~kubescale.controllers.vpa.model.cluster_state.ClusterState` keeps only pods some VPA
  matches, so the VPAs must be loaded first (upstream's history path bypasses memory saver, and its
  next ``LoadPods`` drops the unmatched pods anyway, leaving their aggregates to GC).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

import aiohttp

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.model.go_math import go_float_to_int64
from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    PrometheusHistoryConfig,
    history_queries,
    parse_prometheus_duration,
)
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.prometheus.query_api import PrometheusClientMetrics, PrometheusQueryClient
from kubescale.prometheus.query_values import (
    PrometheusAPIError,
    QueryValue,
    SampleStream,
    labels_text,
)

__all__ = [
    "MAX_RESOURCE_AMOUNT",
    "POD_PHASE_UNKNOWN",
    "HistoryLoadResult",
    "HistoryProvider",
    "HistorySample",
    "HistorySink",
    "PodHistory",
    "PrometheusHistoryError",
    "PrometheusHistoryProvider",
    "load_history",
    "resource_amount_from_value",
]

log = component_logger("vpa-recommender")

MAX_RESOURCE_AMOUNT: Final = 10**14  # model.MaxResourceAmount
POD_PHASE_UNKNOWN: Final = "Unknown"  # apiv1.PodUnknown, the phase history pods are added with


class PrometheusHistoryError(Exception):
    """The history could not be read; the message is upstream's error chain."""


def resource_amount_from_value(value: float, resource: str) -> int:
    """``resourceAmountFromValue``: cores → millicores, bytes → bytes, clamped, truncated."""
    amount = value * 1000.0 if resource == "cpu" else value
    if amount < 0:
        return 0
    if amount > float(MAX_RESOURCE_AMOUNT):
        return MAX_RESOURCE_AMOUNT
    return go_float_to_int64(amount)


@dataclass(frozen=True, kw_only=True)
class HistorySample:
    """``model.ContainerUsageSample`` as the provider makes it (no request)."""

    measure_start: datetime
    usage: int
    resource: str  # "cpu" | "memory"


@dataclass(kw_only=True)
class PodHistory:
    """``history.PodHistory``: the pod's last known labels and its containers' samples."""

    last_labels: dict[str, str] = field(default_factory=dict)
    last_seen: datetime | None = None  # None is Go's zero time.Time
    samples: dict[str, list[HistorySample]] = field(default_factory=dict)


PodKey = tuple[str, str]
"""``model.PodID``: ``(namespace, pod name)``."""


class HistoryProvider(Protocol):
    """``history.HistoryProvider``."""

    async def get_cluster_history(self, *, now: datetime) -> dict[PodKey, PodHistory]: ...


class HistorySink(Protocol):
    """The part of :class:`kubescale.controllers.vpa.model.cluster_state.ClusterState` history
    feeds."""

    def add_or_update_pod(
        self,
        *,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        phase: str,
        containers: Mapping[str, Mapping[str, int]],
        now: datetime | None = None,
    ) -> None: ...

    def add_sample(
        self,
        *,
        namespace: str,
        pod: str,
        container: str,
        resource: str,
        usage: int | float,
        request: int | float,
        measure_start: datetime,
    ) -> bool: ...


class PrometheusHistoryProvider:
    """``prometheusHistoryProvider``: reads the cluster's usage history from Prometheus."""

    def __init__(
        self,
        config: PrometheusHistoryConfig,
        *,
        auth: PrometheusAuth,
        metrics: PrometheusClientMetrics | None = None,
        session: aiohttp.ClientSession | None = None,
        clock: Clock | None = None,
    ) -> None:
        try:
            self.history_length = parse_prometheus_duration(config.history_length)
        except ValueError as err:
            raise ValueError(
                f"history length {config.history_length} is not a valid Prometheus duration: {err}"
            ) from None
        try:
            self.history_resolution = parse_prometheus_duration(config.history_resolution)
        except ValueError as err:
            raise ValueError(
                f"history resolution {config.history_resolution} is not a valid Prometheus "
                f"duration: {err}"
            ) from None
        self.config = config
        self.queries = history_queries(config)
        self._client = PrometheusQueryClient(
            address=config.address,
            auth=auth,
            insecure=config.insecure,
            timeout=config.query_timeout.total_seconds(),
            metrics=metrics,
            session=session,
            clock=clock,
        )

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> PrometheusHistoryProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def get_cluster_history(self, *, now: datetime) -> dict[PodKey, PodHistory]:
        """``GetClusterHistory`` with ``time.Now()`` = ``now``."""
        history: dict[PodKey, PodHistory] = {}
        log.debug("Historical CPU usage query", extra={"fields": {"query": self.queries.cpu}})
        await self._read_resource_history(history, self.queries.cpu, "cpu", now=now)
        log.debug("Historical memory usage query", extra={"fields": {"query": self.queries.memory}})
        await self._read_resource_history(history, self.queries.memory, "memory", now=now)
        for pod in history.values():
            for samples in pod.samples.values():
                samples.sort(key=lambda sample: sample.measure_start)
        try:
            await self._read_last_labels(history, now=now)
        except PrometheusHistoryError as err:
            raise PrometheusHistoryError(f"cannot read last labels: {err}") from None
        return history

    async def _read_resource_history(
        self, history: dict[PodKey, PodHistory], query: str, resource: str, *, now: datetime
    ) -> None:
        try:
            value = await self._client.query_range(
                query, start=now - self.history_length, end=now, step=self.history_resolution
            )
        except PrometheusAPIError as err:
            raise PrometheusHistoryError(
                f"cannot get usage history: cannot get timeseries for {resource}: {err}"
            ) from None
        for series in self._matrix(value, prefix="cannot get usage history: "):
            key, container = self._container_id(series.metric)
            pod = history.setdefault(key, PodHistory())
            pod.samples.setdefault(container, []).extend(
                HistorySample(
                    measure_start=moment,
                    usage=resource_amount_from_value(sample, resource),
                    resource=resource,
                )
                for moment, sample in series.values
            )

    def _container_id(self, metric: Mapping[str, str]) -> tuple[PodKey, str]:
        config = self.config
        for label in (
            config.container_namespace_label,
            config.container_pod_name_label,
            config.container_name_label,
        ):
            if label not in metric:
                raise PrometheusHistoryError(
                    f"cannot get usage history: cannot get container ID from labels: "
                    f"{labels_text(metric)}"
                )
        namespace = metric[config.container_namespace_label]
        pod = metric[config.container_pod_name_label]
        return (namespace, pod), metric[config.container_name_label]

    async def _read_last_labels(self, history: dict[PodKey, PodHistory], *, now: datetime) -> None:
        try:
            value = await self._client.query(self.queries.pod_labels, at=now)
        except PrometheusAPIError as err:
            raise PrometheusHistoryError(f"cannot get timeseries for labels: {err}") from None
        config = self.config
        for series in self._matrix(value, prefix=""):
            if not series.values:
                continue  # Prometheus never sends an empty series (upstream would panic)
            missing = next(
                (
                    label
                    for label in (config.pod_namespace_label, config.pod_name_label)
                    if label not in series.metric
                ),
                None,
            )
            if missing is not None:
                raise PrometheusHistoryError(
                    f"cannot get container ID from labels {labels_text(series.metric)}: "
                    f"no {missing} label"
                )
            key = (series.metric[config.pod_namespace_label], series.metric[config.pod_name_label])
            pod = history.setdefault(key, PodHistory())
            prefix = config.pod_label_prefix
            labels = {
                name[len(prefix) :]: text
                for name, text in series.metric.items()
                if prefix and name.startswith(prefix)
            }
            last_seen = series.values[-1][0]
            if pod.last_seen is None or last_seen > pod.last_seen:
                pod.last_seen = last_seen
                pod.last_labels = labels

    @staticmethod
    def _matrix(value: QueryValue, *, prefix: str) -> tuple[SampleStream, ...]:
        if value.result_type != "matrix":
            raise PrometheusHistoryError(
                f"{prefix}expected query to return a matrix; got result type {value.go_type}"
            )
        return value.matrix


@dataclass(frozen=True, kw_only=True)
class HistoryLoadResult:
    """What :func:`load_history` put into the model."""

    pods: int = 0
    containers: int = 0
    samples_added: int = 0
    samples_rejected: int = 0
    error: str | None = None
    """The history error when nothing could be loaded (upstream logs it and carries on)."""


async def load_history(
    provider: HistoryProvider, cluster_state: HistorySink, *, now: datetime
) -> HistoryLoadResult:
    """``InitFromHistoryProvider``: feed the cluster's history into the model."""
    log.info("Initializing VPA from history provider")
    try:
        history = await provider.get_cluster_history(now=now)
    except PrometheusHistoryError as err:
        log.error("Cannot get cluster history", extra={"fields": {"error": str(err)}})
        return HistoryLoadResult(error=str(err))
    if not history:
        log.warning("history provider returned no pods")
    containers = added = rejected = 0
    for namespace, pod_name in sorted(history):
        pod = history[(namespace, pod_name)]
        names = sorted(pod.samples)
        cluster_state.add_or_update_pod(
            namespace=namespace,
            name=pod_name,
            labels=pod.last_labels,
            phase=POD_PHASE_UNKNOWN,
            containers={name: {} for name in names},
            now=now,  # new aggregates' creation time: upstream's time.Now()
        )
        for name in names:
            containers += 1
            for sample in pod.samples[name]:
                if cluster_state.add_sample(
                    namespace=namespace,
                    pod=pod_name,
                    container=name,
                    resource=sample.resource,
                    usage=sample.usage,
                    request=0,
                    measure_start=sample.measure_start,
                ):
                    added += 1
                else:
                    rejected += 1
    log.info(
        "Loaded usage history",
        extra={
            "fields": {
                "pods": len(history),
                "containers": containers,
                "samples": added,
                "rejected": rejected,
            }
        },
    )
    return HistoryLoadResult(
        pods=len(history), containers=containers, samples_added=added, samples_rejected=rejected
    )
