"""Where the HPA's metric values come from: the three metrics APIs, and PromQL without an adapter.

The API clients read as upstream's ``metrics/client.go`` does (reference §1.8, §3.2), through
:class:`kubescale.kube.client.KubeClient` (so retries and request metrics are the access
layer's):

* **resource** — ``GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods`` (see
  :class:`MetricsApiClient` for the per-namespace list); a
  pod's value is the sum over its containers (a pod whose containers lack the resource, or
  that has none, is dropped and so counts as missing); a named container absent from a pod's
  metrics is an error; an empty list is an error.
* **custom (Pods)** — ``GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/*/{metric}``
  with ``labelSelector`` and ``metricLabelSelector``; window ``windowSeconds``, default 1 m.
* **custom (Object)** — ``.../namespaces/{ns}/{resource.group}/{name}/{metric}`` (a Namespace:
  ``.../namespaces/{ns}/metrics/{metric}``); exactly one item expected.
* **external** — ``GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}`` with the
  metric selector as ``labelSelector``; the values of every series (the HPA sums them).

Each call returns the values or a :class:`~.metric_proposals.FetchError` with upstream's text
("unable to fetch metrics from ... API: <err>", "no metrics returned from ... API").

**PromQL** (kubescale's addition, :class:`PromQLSource`): an External metric of an HPA that
maps the metric's name to a query in the annotation ``hpa.kubescale.io/promql`` (a JSON object
``{"<metric name>": "<PromQL>"}``) is answered by an instant query at ``now`` against
``--prometheus-address``: each sample of the resulting vector is one series (a scalar is one
series), converted to milli-units as prometheus-adapter does (``int64(value*1000)``). No
external-metrics APIService is involved, so it works next to KEDA or any other adapter.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final, cast

from kubescale.base.go_time import parse_duration
from kubescale.base.times import parse_time
from kubescale.controllers.hpa.hpa_spec import MetricSpec
from kubescale.controllers.hpa.metric_proposals import (
    ExternalValues,
    Fetched,
    FetchError,
    ObjectValue,
)
from kubescale.controllers.hpa.pod_selection import LabelIndex
from kubescale.controllers.hpa.replica_calculator import PodMetric
from kubescale.kube.api_paths import ApiPath, InvalidPathSegment, metrics_api_path
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.resources import ResourceType, by_kind
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.meta import CrossVersionObjectReference, LabelSelectorObject
from kubescale.objects.metrics_api import ExternalMetricValue, MetricValue, PodMetrics
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.selectors import (
    SelectorError,
    label_selector_from_dict,
    parse_label_selector,
)
from kubescale.objects.views import Meta
from kubescale.prometheus.query_api import PrometheusQueryClient
from kubescale.prometheus.query_values import PrometheusAPIError

__all__ = [
    "PROMQL_ANNOTATION",
    "MetricFetcher",
    "MetricsApiClient",
    "PromQLSource",
    "fetch_timed_out",
    "promql_queries",
]

PROMQL_ANNOTATION: Final = "hpa.kubescale.io/promql"
_DEFAULT_CUSTOM_WINDOW: Final = timedelta(minutes=1)


def _api(group: str, version: str, kind: str) -> ResourceType:
    """A placeholder type for the request metrics' labels (the path is built here)."""
    return ResourceType(group=group, version=version, kind=kind, plural="", namespaced=True)


_RESOURCE_API: Final = _api("metrics.k8s.io", "v1beta1", "PodMetrics")
_CUSTOM_API: Final = _api("custom.metrics.k8s.io", "v1beta2", "MetricValueList")
_EXTERNAL_API: Final = _api("external.metrics.k8s.io", "v1beta1", "ExternalMetricValueList")


def _custom_path(namespace: str, segments: list[str]) -> ApiPath:
    """A path of the custom metrics API (v1beta2, upstream's preferred version)."""
    return metrics_api_path(
        group="custom.metrics.k8s.io", version="v1beta2", namespace=namespace, segments=segments
    )


_MAX_INT64: Final = 2**63 - 1


class _BadAnswer(Exception):
    """A metrics API answered 200 with something its types cannot decode: upstream's client
    fails the whole decode (one bad value fails the list), so the fetch fails."""


def _decoded_milli(value: object) -> int:
    """A value of an answer's item in milli; an unparseable one fails the answer, as
    ``resource.Quantity``'s ``UnmarshalJSON`` fails upstream's decode (``"NaN"``, garbage), and
    so does one beyond ``MilliValue``'s int64 (``1e400``). An absent or ``null`` value decodes
    to Go's zero Quantity: 0."""
    if value is None:
        return 0
    try:
        milli = Quantity.from_json(value).milli_value()
    except QuantityError as err:
        raise _BadAnswer(str(err)) from err
    if not -_MAX_INT64 - 1 <= milli <= _MAX_INT64:
        raise _BadAnswer(f"quantity {value!r} does not fit in int64 milli-units")
    return milli


def _items(answer: Mapping[str, object], kind: str) -> list[dict[str, object]]:
    """A list answer's ``items``: ``null`` is an empty list (Go decodes it so); anything else
    that is not a list of objects fails the decode. The callers type the checked items with
    :mod:`kubescale.objects.metrics_api` (one cast each)."""
    items = answer.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise _BadAnswer(
            f"json: cannot unmarshal {_json_kind(items)} into Go struct field {kind}.items"
        )
    for item in items:
        if not isinstance(item, dict):
            raise _BadAnswer(
                f"json: cannot unmarshal {_json_kind(item)} into Go struct field {kind}.items "
                "of type object"
            )
    return items


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _error_text(err: KubeError) -> str:
    return err.message if isinstance(err, KubeApiError) else str(err)


def _selector_text(selector: LabelSelectorObject | None) -> str:
    return str(label_selector_from_dict(selector)) if selector else ""


class MetricsApiClient:
    """The three aggregated metrics APIs (module docstring).

    Resource metrics are listed once per namespace per pass (:meth:`begin_pass`) and matched
    against each HPA's selector here, by the pods' labels metrics-server puts on every
    ``PodMetrics`` — the same items a ``labelSelector`` list returns, in one request per
    namespace instead of one per HPA.
    """

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._pod_metrics: dict[
            str, asyncio.Future[LabelIndex[PodMetrics] | FetchError | None]
        ] = {}

    def begin_pass(self) -> None:
        """Forget the resource metrics listed by the previous pass."""
        self._pod_metrics = {}

    async def _namespace_pod_metrics(self, namespace: str) -> LabelIndex[PodMetrics] | FetchError:
        """The namespace's list, made once per pass: the first reconcile that needs it lists,
        the others wait for that answer. When the lister is cancelled (its own deadline, the
        loop stopping) the answer is ``None`` and the next waiter lists in its place, so one
        HPA's deadline never becomes another's error or cancellation."""
        while True:
            pending = self._pod_metrics.get(namespace)
            if pending is None:
                break
            listed_before = await asyncio.shield(pending)
            if listed_before is not None:
                return listed_before
            if self._pod_metrics.get(namespace) is pending:
                del self._pod_metrics[namespace]
        pending = asyncio.get_running_loop().create_future()
        self._pod_metrics[namespace] = pending
        listed: LabelIndex[PodMetrics] | FetchError
        try:
            path = metrics_api_path(
                group="metrics.k8s.io", version="v1beta1", namespace=namespace, segments=["pods"]
            )
            answer = await self._get(_RESOURCE_API, path, [])
            listed = LabelIndex(cast(list[PodMetrics], _items(answer, "PodMetricsList")))
        except _BadAnswer as err:
            listed = FetchError(f"unable to fetch metrics from resource metrics API: {err}")
        except KubeError as err:
            listed = FetchError(
                f"unable to fetch metrics from resource metrics API: {_error_text(err)}"
            )
        except InvalidPathSegment as err:
            listed = FetchError(f"unable to fetch metrics from resource metrics API: {err}")
        except BaseException:
            if self._pod_metrics.get(namespace) is pending:
                del self._pod_metrics[namespace]
            pending.set_result(None)  # abandoned: a waiter lists in its place
            raise
        pending.set_result(listed)
        return listed

    async def _get(
        self, resource: ResourceType, path: ApiPath, query: list[tuple[str, str]]
    ) -> dict[str, object]:
        """The answer as an object; :class:`_BadAnswer` when the 200's body is not one."""
        try:
            answer: object = await self.client.request(
                verb="get", method="GET", resource=resource, path=path, query=query
            )
        except ValueError as err:  # the body of a 200 is not JSON
            raise _BadAnswer(f"the server answered a body that is not JSON: {err}") from err
        if not isinstance(answer, dict):
            raise _BadAnswer(f"json: cannot unmarshal {_json_kind(answer)} into {resource.kind}")
        return answer

    async def resource_metrics(
        self, *, namespace: str, resource: str, selector: str, container: str
    ) -> dict[str, PodMetric] | FetchError:
        """``GetResourceMetric``: milli usage per pod name."""
        listed = await self._namespace_pod_metrics(namespace)
        if isinstance(listed, FetchError):
            return listed
        try:
            wanted = parse_label_selector(selector)
        except SelectorError as err:
            return FetchError(f"unable to fetch metrics from resource metrics API: {err}")
        items = listed.select(wanted)
        if not items:
            return FetchError("no metrics returned from resource metrics API")
        try:
            return self._pod_usages(
                items, namespace=namespace, resource=resource, container=container
            )
        except _BadAnswer as err:
            return FetchError(f"unable to fetch metrics from resource metrics API: {err}")

    @staticmethod
    def _pod_usages(
        items: list[PodMetrics], *, namespace: str, resource: str, container: str
    ) -> dict[str, PodMetric] | FetchError:
        result: dict[str, PodMetric] = {}
        for item in items:
            meta = Meta(item).raw
            name = str(meta.get("name") or "")
            timestamp = parse_time(item.get("timestamp"))
            try:
                window = timedelta(seconds=parse_duration(str(item.get("window") or "0")))
            except ValueError:
                window = timedelta(0)
            containers = item.get("containers") or []
            total = 0
            complete = bool(containers)
            found = False
            for c in containers:
                if container and c.get("name") != container:
                    continue
                found = True
                raw = (c.get("usage") or {}).get(resource)
                if raw is None:  # the container lacks the resource: the pod counts as missing
                    complete = False
                    break
                total += _decoded_milli(raw)
            if container:
                if not found:
                    return FetchError(
                        f"failed to get container metrics: container {container} not present "
                        f"in metrics for pod {meta.get('namespace', namespace)}/{name}"
                    )
                complete = complete and found
            if complete and timestamp is not None:
                result[name] = PodMetric(value=total, timestamp=timestamp, window=window)
        return result

    async def pod_metrics(
        self,
        *,
        namespace: str,
        metric: str,
        selector: str,
        metric_selector: LabelSelectorObject | None,
    ) -> dict[str, PodMetric] | FetchError:
        """``GetRawMetric``: a per-pod custom metric."""
        query = [("labelSelector", selector)]
        metric_labels = _selector_text(metric_selector)
        if metric_labels:
            query.append(("metricLabelSelector", metric_labels))
        try:
            path = _custom_path(namespace, ["pods", "*", metric])
            answer = await self._get(_CUSTOM_API, path, query)
            items = cast(list[MetricValue], _items(answer, "MetricValueList"))
            values = [_decoded_milli(item.get("value")) for item in items]
        except _BadAnswer as err:
            return FetchError(f"unable to fetch metrics from custom metrics API: {err}")
        except KubeError as err:
            return FetchError(
                f"unable to fetch metrics from custom metrics API: {_error_text(err)}"
            )
        except InvalidPathSegment as err:
            return FetchError(f"unable to fetch metrics from custom metrics API: {err}")
        if not items:
            return FetchError("no metrics returned from custom metrics API")
        result: dict[str, PodMetric] = {}
        for item, value in zip(items, values, strict=True):
            name = str((item.get("describedObject") or {}).get("name") or "")
            timestamp = parse_time(item.get("timestamp"))
            if timestamp is None:
                continue
            seconds = item.get("windowSeconds")
            window = (
                timedelta(seconds=seconds) if isinstance(seconds, int) else _DEFAULT_CUSTOM_WINDOW
            )
            result[name] = PodMetric(value=value, timestamp=timestamp, window=window)
        return result

    async def object_metric(
        self,
        *,
        namespace: str,
        described: CrossVersionObjectReference,
        metric: str,
        metric_selector: LabelSelectorObject | None,
    ) -> ObjectValue | FetchError:
        """``GetObjectMetric``: one object's value."""
        kind = str(described.get("kind") or "")
        name = str(described.get("name") or "")
        if kind == "Namespace":
            segments = ["metrics", metric]
        else:
            rt = by_kind(str(described.get("apiVersion") or ""), kind)
            if rt is not None:
                resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            else:  # not in the catalogue: the lower-case plural guess the RESTMapper would make
                group = str(described.get("apiVersion") or "").rpartition("/")[0]
                plural = kind.lower() + "s"
                resource = f"{plural}.{group}" if group else plural
            segments = [resource, name, metric]
        query: list[tuple[str, str]] = []
        metric_labels = _selector_text(metric_selector)
        if metric_labels:
            query.append(("metricLabelSelector", metric_labels))
        try:
            path = _custom_path(namespace, segments)
            answer = await self._get(_CUSTOM_API, path, query)
            items = cast(list[MetricValue], _items(answer, "MetricValueList"))
            values = [_decoded_milli(item.get("value")) for item in items]
        except _BadAnswer as err:
            return FetchError(f"unable to fetch metrics from custom metrics API: {err}")
        except KubeError as err:
            return FetchError(
                f"unable to fetch metrics from custom metrics API: {_error_text(err)}"
            )
        except InvalidPathSegment as err:
            return FetchError(f"unable to fetch metrics from custom metrics API: {err}")
        if len(values) != 1:
            return FetchError(
                "unable to fetch metrics from custom metrics API: the custom metrics API server "
                f"returned {len(values)} results when we asked for exactly one"
            )
        return ObjectValue(values[0])

    async def external_metric(
        self, *, namespace: str, metric: str, metric_selector: LabelSelectorObject | None
    ) -> ExternalValues | FetchError:
        """``GetExternalMetric``: the value of every series."""
        try:
            labels = _selector_text(metric_selector)
        except SelectorError as err:
            return FetchError(str(err))
        query = [("labelSelector", labels)] if labels else []
        try:
            path = metrics_api_path(
                group="external.metrics.k8s.io", version="v1beta1", namespace=namespace,
                segments=[metric],
            )  # fmt: skip
            answer = await self._get(_EXTERNAL_API, path, query)
            # one unparseable value ("NaN") fails the whole answer, as upstream's decode does
            # (FailedGetExternalMetric, no scaling); dropping it could sum the rest to 0
            values = [
                _decoded_milli(item.get("value"))
                for item in cast(
                    list[ExternalMetricValue], _items(answer, "ExternalMetricValueList")
                )
            ]
        except _BadAnswer as err:
            return FetchError(f"unable to fetch metrics from external metrics API: {err}")
        except KubeError as err:
            return FetchError(
                f"unable to fetch metrics from external metrics API: {_error_text(err)}"
            )
        except InvalidPathSegment as err:
            return FetchError(f"unable to fetch metrics from external metrics API: {err}")
        if not values:
            return FetchError("no metrics returned from external metrics API")
        return ExternalValues(tuple(values))


def promql_queries(hpa: HorizontalPodAutoscaler) -> dict[str, str]:
    """The HPA's ``hpa.kubescale.io/promql`` annotation: metric name → PromQL (invalid: none)."""
    text = (Meta(hpa).raw.get("annotations") or {}).get(PROMQL_ANNOTATION)
    if not isinstance(text, str):
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str) and v.strip()}


def _to_milli(value: float) -> int | None:
    if math.isnan(value) or math.isinf(value):
        return None
    return int(value * 1000.0)


class PromQLSource:
    """External metrics answered by PromQL instant queries (module docstring)."""

    def __init__(self, client: PrometheusQueryClient | None) -> None:
        self.client = client

    async def external_metric(self, query: str, *, now: datetime) -> ExternalValues | FetchError:
        if self.client is None:
            return FetchError(
                "unable to fetch metrics from Prometheus: no --prometheus-address configured"
            )
        try:
            answer = await self.client.query(query, at=now)
        except PrometheusAPIError as err:
            return FetchError(f"unable to fetch metrics from Prometheus: {err}")
        if answer.result_type == "scalar" and answer.scalar is not None:
            raw = [answer.scalar]
        elif answer.result_type == "vector":
            raw = [sample.value for sample in answer.vector]
        else:
            return FetchError(
                f"unable to fetch metrics from Prometheus: query returned a {answer.result_type}, "
                "not an instant vector or scalar"
            )
        values = [m for m in (_to_milli(v) for v in raw) if m is not None]
        if not values:
            return FetchError("no metrics returned from Prometheus")
        return ExternalValues(tuple(values))


def fetch_timed_out(metric: MetricSpec, queries: Mapping[str, str], error: str) -> FetchError:
    """The fetch error of a metric whose read outlived the reconcile's deadline, in the words
    the API it was reading uses for its other errors."""
    if metric.type in ("Resource", "ContainerResource"):
        return FetchError(f"unable to fetch metrics from resource metrics API: {error}")
    if metric.type in ("Pods", "Object"):
        return FetchError(f"unable to fetch metrics from custom metrics API: {error}")
    if metric.metric_name in queries:
        return FetchError(f"unable to fetch metrics from Prometheus: {error}")
    return FetchError(f"unable to fetch metrics from external metrics API: {error}")


class MetricFetcher:
    """What one metric spec of an HPA reads: the metrics APIs, or PromQL for an External metric
    the HPA maps to a query (module docstring)."""

    def __init__(self, api: MetricsApiClient, promql: PromQLSource) -> None:
        self.api = api
        self.promql = promql

    async def fetch(
        self,
        metric: MetricSpec,
        *,
        namespace: str,
        selector: str,
        queries: Mapping[str, str],
        now: datetime,
    ) -> Fetched | None:
        """The values, a :class:`FetchError`, or None for a metric type nothing answers."""
        try:
            if metric.type in ("Resource", "ContainerResource"):
                return await self.api.resource_metrics(
                    namespace=namespace,
                    resource=metric.resource_name,
                    selector=selector,
                    container=metric.container if metric.type == "ContainerResource" else "",
                )
            if metric.type == "Pods":
                return await self.api.pod_metrics(
                    namespace=namespace,
                    metric=metric.metric_name,
                    selector=selector,
                    metric_selector=metric.metric_selector,
                )
            if metric.type == "Object":
                return await self.api.object_metric(
                    namespace=namespace,
                    described=metric.described_object or {},
                    metric=metric.metric_name,
                    metric_selector=metric.metric_selector,
                )
            if metric.type == "External":
                query = queries.get(metric.metric_name)
                if query is not None:
                    return await self.promql.external_metric(query, now=now)
                return await self.api.external_metric(
                    namespace=namespace,
                    metric=metric.metric_name,
                    metric_selector=metric.metric_selector,
                )
        except SelectorError as err:
            return FetchError(str(err))
        return None
