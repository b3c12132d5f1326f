"""Real node usage for LowNodeUtilization's ``metricsUtilization`` (upstream
``metricscollector`` and the plugin's usage clients).

**KubernetesMetrics** (:class:`NodeMetricsCollector`): upstream's collector reads every node's
``NodeMetrics`` (metrics.k8s.io) every 5 s and smooths it, per node, with an exponentially
weighted average (:func:`smooth`): the first reading as it is, then ``round(0.9 × previous + 0.1
× reading)`` — cpu in millicores, memory in bytes, Go's ``math.Round`` (halves away from zero).
A node without metrics keeps its previous value. Here the collector reads all NodeMetrics with
one list (upstream: one get per node) each time :meth:`NodeMetricsCollector.collect` runs — at
the start of each cycle, and as often as its own loop runs (``name`` ``descheduler-metrics``,
every 5 s like upstream's). A pod's usage, which an eviction frees, is the sum of its
containers' usage in its ``PodMetrics`` (:func:`list_pod_usage`; upstream gets it pod by pod at
eviction time, here one list per cycle).

**Prometheus** (:class:`PrometheusNodeValues`): the plugin's instant query, evaluated now, must
answer a vector; each sample's ``instance`` label names a node and its value (in [0, 1]) is the
node's utilization. The server is the policy's ``metricsProviders`` Prometheus ``url``; its
bearer token, when ``authToken.secretReference`` is given, is the ``prometheusAuthToken`` key of
that Secret.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeError
from kubescale.kube.resources import NODE_METRICS, POD_METRICS, SECRETS
from kubescale.objects.views import Meta
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.prometheus.query_values import PrometheusAPIError
from kubescale.scheduling.pod_resources import Amounts, amounts_of

__all__ = [
    "COLLECTOR_INTERVAL",
    "NodeMetricsCollector",
    "PrometheusNodeValues",
    "UsageError",
    "list_pod_usage",
    "prometheus_token",
    "smooth",
]

log = component_logger("descheduler")

COLLECTOR_INTERVAL: Final = 5.0
BETA: Final = 0.9
TOKEN_KEY: Final = "prometheusAuthToken"
PROMETHEUS_TIMEOUT: Final = 30.0


class UsageError(Exception):
    """Usage could not be read; the plugins that need it fail this cycle."""


def _go_round(value: float) -> int:
    """``math.Round``: half away from zero."""
    return math.floor(abs(value) + 0.5) * (1 if value >= 0 else -1)


def smooth(previous: int | None, reading: int) -> int:
    """``weightedAverage``: ``round(0.9 × previous + 0.1 × reading)``; the first reading as it
    is."""
    if previous is None:
        return reading
    return _go_round(BETA * float(previous) + 0.1 * float(reading))


def _usage_of(obj: Mapping[str, Any]) -> Amounts:
    return amounts_of(obj.get("usage"))


class NodeMetricsCollector:
    """Upstream's ``MetricsCollector`` (module docstring)."""

    name = "descheduler-metrics"

    def __init__(
        self, client: KubeClient, *, node_names: Callable[[], Iterable[str]] | None = None
    ) -> None:
        """``node_names`` lists the nodes to collect for when the collector runs as its own
        loop (the nodes matching the policy's nodeSelector)."""
        self.client = client
        self.node_names = node_names or (lambda: list(self.nodes))
        self.nodes: dict[str, dict[str, int]] = {}
        self.synced = False

    async def collect(self, nodes: Iterable[str]) -> None:
        """Read NodeMetrics and fold them into the smoothed values of ``nodes``."""
        try:
            listed = await self.client.list(NODE_METRICS)
        except KubeError as err:
            log.error("cannot read node metrics", extra={"fields": {"error": str(err)}})
            return
        readings = {
            str(Meta(item).raw.get("name", "")): _usage_of(item)
            for item in listed.get("items") or ()
        }
        for name in nodes:
            reading = readings.get(name)
            if reading is None:
                continue  # no entry: the previous value stands
            previous = self.nodes.get(name, {})
            self.nodes[name] = {
                "cpu": smooth(previous.get("cpu"), reading.get("cpu", 0)),
                "memory": smooth(previous.get("memory"), reading.get("memory", 0)),
            }
        self.synced = True

    async def run_once(self, now: datetime) -> None:
        await self.collect(self.node_names())

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {name: dict(values) for name, values in self.nodes.items()}


async def list_pod_usage(client: KubeClient) -> dict[tuple[str, str], Amounts]:
    """Every pod's usage (sum of its containers) from one PodMetrics list."""
    try:
        listed = await client.list(POD_METRICS)
    except KubeError as err:
        raise UsageError(f"cannot read pod metrics: {err}") from err
    usage: dict[tuple[str, str], Amounts] = {}
    for item in listed.get("items") or ():
        meta = Meta(item).raw
        total: Amounts = {}
        for container in item.get("containers") or ():
            for name, amount in _usage_of(container).items():
                total[name] = total.get(name, 0) + amount
        usage[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = total
    return usage


async def prometheus_token(client: KubeClient, secret: tuple[str, str] | None) -> str:
    """The bearer token in the Secret's ``prometheusAuthToken`` key; ``""`` without one."""
    if secret is None:
        return ""
    namespace, name = secret
    try:
        obj = await client.get(SECRETS, name, namespace=namespace)
    except KubeError as err:
        raise UsageError(
            f"cannot read the Prometheus token Secret {namespace}/{name}: {err}"
        ) from err
    encoded = (obj.get("data") or {}).get(TOKEN_KEY)
    if not encoded:
        raise UsageError(f"Secret {namespace}/{name} has no {TOKEN_KEY} key")
    return base64.b64decode(str(encoded)).decode().strip()


class PrometheusNodeValues:
    """One Prometheus server's answers to the plugins' queries (module docstring)."""

    def __init__(self, client: PrometheusQueryClient) -> None:
        self.client = client

    @classmethod
    def connect(cls, *, url: str, token: str) -> PrometheusNodeValues:
        """A client for ``url``; a :class:`UsageError` if it cannot be one (the policy loader
        refuses such a URL at start; this keeps a bad one to the plugins that query it)."""
        try:
            client = PrometheusQueryClient(
                address=url, auth=PrometheusAuth(bearer_token=token), timeout=PROMETHEUS_TIMEOUT
            )
        except ValueError as err:
            raise UsageError(str(err)) from None
        return cls(client)

    async def values(self, query: str, now: datetime) -> dict[str, float]:
        """``instance`` → value of the query's vector at ``now``."""
        try:
            answer = await self.client.query(query, at=now)
        except PrometheusAPIError as err:
            raise UsageError(f"unable to capture prometheus metrics: {err}") from err
        if answer.result_type != "vector":
            raise UsageError(
                f'expected query results to be of type "vector", got "{answer.result_type}" instead'
            )
        found: dict[str, float] = {}
        for sample in answer.vector:
            instance = sample.metric.get("instance")
            if instance is None:
                raise UsageError("The collected metrics sample is missing 'instance' key")
            found[instance] = sample.value
        return found

    async def close(self) -> None:
        await self.client.close()
