"""The aggregated metrics APIs (resource, custom, external), served from values tests set.

In a cluster these groups are APIServices backed by metrics-server, a custom-metrics adapter
(prometheus-adapter) and an external-metrics adapter (KEDA). The in-process API server mounts
them itself, answering from a :class:`MetricsValues` that tests and the simulator fill, so the
HPA and VPA loops read metrics through the same URLs and shapes as against a real cluster:

* ``metrics.k8s.io/v1beta1``: ``PodMetrics``/``NodeMetrics`` (get, list, ``labelSelector``,
  ``fieldSelector``); an unknown pod answers 404 ``podmetrics.metrics.k8s.io "<ns>/<name>" not
  found``, as metrics-server does.
* ``custom.metrics.k8s.io/v1beta2``: ``MetricValueList`` for one object
  (``/namespaces/{ns}/{resource}/{name}/{metric}``, root-scoped ``/{resource}/{name}/{metric}``,
  the namespace itself at ``/namespaces/{ns}/metrics/{metric}``) or for ``*`` with a
  ``labelSelector`` over the objects' labels; ``metricLabelSelector`` filters series. Unknown
  metrics answer 404 with custom-metrics-apiserver's ``NewMetricNotFound*`` messages.
* ``external.metrics.k8s.io/v1beta1``: ``ExternalMetricValueList`` of every series of a metric
  in a namespace whose labels match ``labelSelector`` (the HPA sums them).

Shapes: /work/shared/reference/horizontal-pod-autoscaler.md §3.2 (``k8s.io/metrics`` types).
Quantities are passed as strings (``"123456n"``, ``"45Mi"``) or numbers (``0.25`` →
``"250m"``). Timestamps default to the injected clock's now.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from aiohttp import web

from kube.resources import ALL, by_plural
from kube.selectors import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    IN,
    NOT_EQUALS,
    NOT_IN,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from kubescale.clock import Clock, RealClock

__all__ = [
    "CUSTOM_METRICS_GROUP",
    "EXTERNAL_METRICS_GROUP",
    "RESOURCE_METRICS_GROUP",
    "MetricsValues",
    "Quantity",
    "add_metrics_routes",
    "metrics_discovery_groups",
]

Quantity = str | int | float
"""A resource.Quantity as its string, or a number rendered canonically (milli if fractional)."""

RESOURCE_METRICS_GROUP: Final = ("metrics.k8s.io", "v1beta1")
CUSTOM_METRICS_GROUP: Final = ("custom.metrics.k8s.io", "v1beta2")
EXTERNAL_METRICS_GROUP: Final = ("external.metrics.k8s.io", "v1beta1")
DEFAULT_WINDOW_SECONDS: Final = 15.0  # metrics-server's default --metric-resolution


def _quantity(value: Quantity) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise TypeError("a quantity cannot be a bool")
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def _timestamp(moment: datetime) -> str:
    """metav1.Time: RFC 3339 in UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _go_duration(seconds: float) -> str:
    """metav1.Duration's JSON (Go's time.Duration.String) for a window: ``15s``, ``1m30s``."""
    if seconds == 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{sec_text}"
    if minutes:
        return f"{int(minutes)}m{sec_text}"
    return sec_text


def _qualified_resource(resource: str) -> str:
    """``deployments`` → ``deployments.apps`` (schema.GroupResource.String() of the catalogue)."""
    if "." in resource:
        return resource
    for rt in ALL:  # the core group comes first in the catalogue
        if rt.plural == resource:
            return f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return resource


def _described_type(resource: str) -> tuple[str, str]:
    """``(kind, apiVersion)`` of objects of a qualified resource, from the catalogue."""
    plural, _, group = resource.partition(".")
    rt = by_plural(group, plural)
    if rt is not None:
        return rt.kind, rt.group_version
    if (group, plural) == ("", "namespaces"):
        return "Namespace", "v1"
    return plural, group


@dataclass(frozen=True)
class _PodSample:
    labels: Mapping[str, str]
    containers: tuple[tuple[str, Mapping[str, str]], ...]
    timestamp: datetime
    window: float


@dataclass(frozen=True)
class _NodeSample:
    labels: Mapping[str, str]
    usage: Mapping[str, str]
    timestamp: datetime
    window: float


@dataclass(frozen=True)
class _Series:
    """One value of a custom or external metric, with the labels it is selected by."""

    value: str
    metric_labels: Mapping[str, str]
    timestamp: datetime
    window_seconds: int | None
    object_labels: Mapping[str, str] = field(default_factory=dict)
    described_type: tuple[str, str] | None = None  # (kind, apiVersion) when set explicitly


_ObjectKey = tuple[str, str, str]  # qualified resource, namespace ("" if root-scoped), name


class MetricsValues:
    """What the metrics APIs answer; set by tests and the simulator, read per request."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock: Clock = clock if clock is not None else RealClock()
        self._pods: dict[tuple[str, str], _PodSample] = {}
        self._nodes: dict[str, _NodeSample] = {}
        # custom: object → metric → metric-labels → series
        self._custom: dict[_ObjectKey, dict[str, dict[frozenset[tuple[str, str]], _Series]]] = {}
        # external: (namespace, metric) → metric-labels → series
        self._external: dict[tuple[str, str], dict[frozenset[tuple[str, str]], _Series]] = {}

    def _when(self, timestamp: datetime | None) -> datetime:
        return timestamp if timestamp is not None else self.clock.now()

    # --- resource metrics (metrics-server) ---

    def set_pod_metrics(
        self,
        *,
        namespace: str,
        name: str,
        containers: Mapping[str, Mapping[str, Quantity]],
        labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
        window: float = DEFAULT_WINDOW_SECONDS,
    ) -> None:
        """A pod's usage per container, e.g. ``{"app": {"cpu": "250m", "memory": "64Mi"}}``.

        ``labels`` are the pod's labels, which a ``labelSelector`` list is matched against.
        """
        self._pods[(namespace, name)] = _PodSample(
            labels=dict(labels or {}),
            containers=tuple(
                (container, {res: _quantity(q) for res, q in usage.items()})
                for container, usage in containers.items()
            ),
            timestamp=self._when(timestamp),
            window=window,
        )

    def remove_pod_metrics(self, *, namespace: str, name: str) -> None:
        self._pods.pop((namespace, name), None)

    def set_node_metrics(
        self,
        *,
        name: str,
        usage: Mapping[str, Quantity],
        labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
        window: float = DEFAULT_WINDOW_SECONDS,
    ) -> None:
        self._nodes[name] = _NodeSample(
            labels=dict(labels or {}),
            usage={res: _quantity(q) for res, q in usage.items()},
            timestamp=self._when(timestamp),
            window=window,
        )

    def remove_node_metrics(self, *, name: str) -> None:
        self._nodes.pop(name, None)

    # --- custom metrics (an adapter such as prometheus-adapter) ---

    def set_object_metric(
        self,
        *,
        resource: str,
        name: str,
        metric: str,
        value: Quantity,
        namespace: str | None = None,
        metric_labels: Mapping[str, str] | None = None,
        object_labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
        window_seconds: int | None = None,
        kind: str | None = None,
        api_version: str | None = None,
    ) -> None:
        """One series of ``metric`` for the object ``resource``/``name``.

        ``resource`` is a plural, qualified (``deployments.apps``) or not (``deployments``);
        ``namespace=None`` for root-scoped objects; a Namespace's own metrics are
        ``resource="namespaces", name=<ns>``. Series differ by ``metric_labels``;
        ``object_labels`` are what a ``*`` query's ``labelSelector`` matches. ``kind`` and
        ``api_version`` name the described object's type when the resource is not in the
        catalogue (e.g. ``services`` → ``Service``, ``v1``).
        """
        key = (_qualified_resource(resource), namespace or "", name)
        labels = dict(metric_labels or {})
        self._custom.setdefault(key, {}).setdefault(metric, {})[frozenset(labels.items())] = (
            _Series(
                value=_quantity(value),
                metric_labels=labels,
                timestamp=self._when(timestamp),
                window_seconds=window_seconds,
                object_labels=dict(object_labels or {}),
                described_type=(kind, api_version or "v1") if kind else None,
            )
        )

    def set_pod_metric(
        self,
        *,
        namespace: str,
        pod: str,
        metric: str,
        value: Quantity,
        pod_labels: Mapping[str, str] | None = None,
        metric_labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
        window_seconds: int | None = None,
    ) -> None:
        """A per-pod custom metric (an HPA ``Pods`` metric reads ``pods/*/<metric>``)."""
        self.set_object_metric(
            resource="pods",
            namespace=namespace,
            name=pod,
            metric=metric,
            value=value,
            metric_labels=metric_labels,
            object_labels=pod_labels,
            timestamp=timestamp,
            window_seconds=window_seconds,
        )

    def remove_object_metric(
        self, *, resource: str, name: str, metric: str, namespace: str | None = None
    ) -> None:
        key = (_qualified_resource(resource), namespace or "", name)
        self._custom.get(key, {}).pop(metric, None)

    # --- external metrics (an adapter such as KEDA's) ---

    def set_external_metric(
        self,
        *,
        namespace: str,
        metric: str,
        value: Quantity,
        metric_labels: Mapping[str, str] | None = None,
        timestamp: datetime | None = None,
        window_seconds: int | None = None,
    ) -> None:
        """One series of an external metric; series differ by ``metric_labels``."""
        labels = dict(metric_labels or {})
        self._external.setdefault((namespace, metric), {})[frozenset(labels.items())] = _Series(
            value=_quantity(value),
            metric_labels=labels,
            timestamp=self._when(timestamp),
            window_seconds=window_seconds,
        )

    def remove_external_metric(self, *, namespace: str, metric: str) -> None:
        self._external.pop((namespace, metric), None)

    def clear(self) -> None:
        """Forget every value of every API."""
        self._pods.clear()
        self._nodes.clear()
        self._custom.clear()
        self._external.clear()

    # --- the documents served ---

    def pod_metrics(self, namespace: str | None) -> list[dict[str, Any]]:
        """``PodMetrics`` objects, of one namespace or (None) of all, sorted by namespace/name."""
        now = _timestamp(self.clock.now())
        return [
            {
                "kind": "PodMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "creationTimestamp": now,
                    "labels": dict(sample.labels),
                },
                "timestamp": _timestamp(sample.timestamp),
                "window": _go_duration(sample.window),
                "containers": [
                    {"name": container, "usage": dict(usage)}
                    for container, usage in sample.containers
                ],
            }
            for (ns, name), sample in sorted(self._pods.items())
            if namespace is None or ns == namespace
        ]

    def node_metrics(self) -> list[dict[str, Any]]:
        now = _timestamp(self.clock.now())
        return [
            {
                "kind": "NodeMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": name, "creationTimestamp": now, "labels": dict(sample.labels)},
                "timestamp": _timestamp(sample.timestamp),
                "window": _go_duration(sample.window),
                "usage": dict(sample.usage),
            }
            for name, sample in sorted(self._nodes.items())
        ]

    def custom_values(
        self,
        *,
        resource: str,
        namespace: str,
        name: str,
        metric: str,
        selector: LabelSelector,
        metric_selector: LabelSelector,
    ) -> list[dict[str, Any]] | None:
        """``MetricValueList`` items, or None when the metric is unknown for the object(s)."""
        resource = _qualified_resource(resource)
        catalogue_type = _described_type(resource)
        known = False
        items: list[dict[str, Any]] = []
        for (res, ns, obj_name), metrics in sorted(self._custom.items()):
            if res != resource or ns != namespace or name not in ("*", obj_name):
                continue
            for series in (metrics.get(metric) or {}).values():
                known = True
                if name == "*" and not selector.matches(series.object_labels):
                    continue
                if not metric_selector.matches(series.metric_labels):
                    continue
                kind, api_version = series.described_type or catalogue_type
                described = {"kind": kind, "name": obj_name, "apiVersion": api_version}
                if ns:
                    described["namespace"] = ns
                identifier: dict[str, Any] = {"name": metric}
                if not metric_selector.empty():
                    identifier["selector"] = _selector_dict(metric_selector)
                item: dict[str, Any] = {
                    "describedObject": described,
                    "metric": identifier,
                    "timestamp": _timestamp(series.timestamp),
                    "value": series.value,
                }
                if series.window_seconds is not None:
                    item["windowSeconds"] = series.window_seconds
                items.append(item)
        return items if known else None

    def external_values(
        self, *, namespace: str, metric: str, selector: LabelSelector
    ) -> list[dict[str, Any]] | None:
        """``ExternalMetricValueList`` items, or None when the metric is unknown."""
        series_by_labels = self._external.get((namespace, metric))
        if not series_by_labels:
            return None
        items: list[dict[str, Any]] = []
        for series in series_by_labels.values():
            if not selector.matches(series.metric_labels):
                continue
            item: dict[str, Any] = {
                "metricName": metric,
                "metricLabels": dict(series.metric_labels),
                "timestamp": _timestamp(series.timestamp),
                "value": series.value,
            }
            if series.window_seconds is not None:
                item["window"] = series.window_seconds
            items.append(item)
        return items

    def custom_metric_resources(self) -> list[str]:
        """``<resource>/<metric>`` names for the custom metrics discovery document.

        Never empty: client-go's discovery fails a group version that lists no resources
        ("received empty response"), which breaks ``kubectl api-resources`` and warns on every
        kubectl call, so with no metric set the list holds ``pods/*`` (any per-pod metric).
        """
        names = {
            f"{res}/{metric}" for (res, _, _), metrics in self._custom.items() for metric in metrics
        }
        return sorted(names) if names else ["pods/*"]

    def external_metric_names(self) -> list[str]:
        """Metric names for the external metrics discovery document, after KEDA's constant
        ``externalmetrics`` entry (which also keeps the list from being empty)."""
        return ["externalmetrics", *sorted({metric for (_, metric) in self._external})]


def _selector_dict(selector: LabelSelector) -> dict[str, Any]:
    """metav1.ParseToLabelSelector: equalities to matchLabels, the rest to matchExpressions."""
    match_labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for requirement in selector.requirements:
        op = requirement.operator
        if op in (EQUALS, DOUBLE_EQUALS):
            match_labels[requirement.key] = requirement.values[0]
            continue
        operator = {IN: "In", NOT_IN: "NotIn", NOT_EQUALS: "NotIn"}.get(op)
        if op == EXISTS:
            operator = "Exists"
        elif op == DOES_NOT_EXIST:
            operator = "DoesNotExist"
        expression: dict[str, Any] = {"key": requirement.key, "operator": operator or op}
        if requirement.values:
            expression["values"] = sorted(requirement.values)
        expressions.append(expression)
    out: dict[str, Any] = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


# --- discovery --------------------------------------------------------------------------------


def _api_group(group: str, version: str) -> dict[str, Any]:
    group_version = {"groupVersion": f"{group}/{version}", "version": version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [group_version],
        "preferredVersion": dict(group_version),
    }


def metrics_discovery_groups() -> list[dict[str, Any]]:
    """The APIGroup objects of the three metrics groups, for ``/apis`` and ``/apis/<group>``."""
    return [
        _api_group(*RESOURCE_METRICS_GROUP),
        _api_group(*CUSTOM_METRICS_GROUP),
        _api_group(*EXTERNAL_METRICS_GROUP),
    ]


def _resource_list(group: str, version: str, resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": resources,
    }


def _api_resource(name: str, *, kind: str, namespaced: bool, verbs: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "singularName": "",
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    }


# --- HTTP -------------------------------------------------------------------------------------


def _status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return web.json_response(body, status=code)


class _BadSelector(Exception):
    pass


def _label_selector(request: web.Request, parameter: str) -> LabelSelector:
    try:
        return parse_label_selector(request.query.get(parameter, ""))
    except SelectorError as exc:
        raise _BadSelector(str(exc)) from exc


def _list(kind: str, api_version: str, items: list[dict[str, Any]]) -> web.Response:
    return web.json_response(
        {"kind": kind, "apiVersion": api_version, "metadata": {}, "items": items}
    )


def _filtered(request: web.Request, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    selector = _label_selector(request, "labelSelector")
    try:
        fields = parse_field_selector(request.query.get("fieldSelector", ""))
    except SelectorError as exc:
        raise _BadSelector(str(exc)) from exc
    return [
        item
        for item in items
        if selector.matches(item["metadata"].get("labels") or {}) and fields.matches(item)
    ]


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _handling_bad_selectors(handler: Handler) -> Handler:
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except _BadSelector as exc:
            return _status(400, "BadRequest", str(exc))

    return wrapped


def add_metrics_routes(app: web.Application, values: MetricsValues) -> None:
    """Mount the three metrics APIs and their discovery documents on ``app``."""
    resource_gv = "/".join(RESOURCE_METRICS_GROUP)
    custom_gv = "/".join(CUSTOM_METRICS_GROUP)
    external_gv = "/".join(EXTERNAL_METRICS_GROUP)
    resource_base = f"/apis/{resource_gv}"
    custom_base = f"/apis/{custom_gv}"
    external_base = f"/apis/{external_gv}"
    groups = {group["name"]: group for group in metrics_discovery_groups()}

    def group_document(name: str) -> Handler:
        async def handle(_: web.Request) -> web.StreamResponse:
            return web.json_response(groups[name])

        return handle

    async def resource_resources(_: web.Request) -> web.StreamResponse:
        return web.json_response(
            _resource_list(
                *RESOURCE_METRICS_GROUP,
                [
                    _api_resource(
                        "nodes", kind="NodeMetrics", namespaced=False, verbs=["get", "list"]
                    ),
                    _api_resource(
                        "pods", kind="PodMetrics", namespaced=True, verbs=["get", "list"]
                    ),
                ],
            )
        )

    async def custom_resources(_: web.Request) -> web.StreamResponse:
        return web.json_response(
            _resource_list(
                *CUSTOM_METRICS_GROUP,
                [
                    _api_resource(name, kind="MetricValueList", namespaced=True, verbs=["get"])
                    for name in values.custom_metric_resources()
                ],
            )
        )

    async def external_resources(_: web.Request) -> web.StreamResponse:
        return web.json_response(
            _resource_list(
                *EXTERNAL_METRICS_GROUP,
                [
                    _api_resource(
                        name, kind="ExternalMetricValueList", namespaced=True, verbs=["get"]
                    )
                    for name in values.external_metric_names()
                ],
            )
        )

    async def list_pods(request: web.Request) -> web.StreamResponse:
        namespace = request.match_info.get("namespace")
        items = _filtered(request, values.pod_metrics(namespace))
        return _list("PodMetricsList", resource_gv, items)

    async def get_pod(request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        for item in values.pod_metrics(namespace):
            if item["metadata"]["name"] == name:
                return web.json_response(item)
        qualified = f"{namespace}/{name}"
        return _status(
            404,
            "NotFound",
            f'podmetrics.metrics.k8s.io "{qualified}" not found',
            name=qualified,
            group="metrics.k8s.io",
            kind="podmetrics",
        )

    async def list_nodes(request: web.Request) -> web.StreamResponse:
        return _list("NodeMetricsList", resource_gv, _filtered(request, values.node_metrics()))

    async def get_node(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        for item in values.node_metrics():
            if item["metadata"]["name"] == name:
                return web.json_response(item)
        return _status(
            404,
            "NotFound",
            f'nodemetrics.metrics.k8s.io "{name}" not found',
            name=name,
            group="metrics.k8s.io",
            kind="nodemetrics",
        )

    async def custom_metric(request: web.Request) -> web.StreamResponse:
        info = dict(request.match_info)
        if "object" in info:
            # Clients quote "<name>/<metric>" into one segment (%2F); Go's server decodes the
            # path before routing, so both spellings must reach the same metric.
            name, slash, metric = info.pop("object").partition("/")
            if not slash:
                return _status(404, "NotFound", "the server could not find the requested resource")
            info.update(name=name, metric=metric)
        if "resource" in info:
            resource, namespace, name = info["resource"], info.get("namespace", ""), info["name"]
        else:  # /namespaces/{ns}/metrics/{metric}: the Namespace object itself
            resource, namespace, name = "namespaces", "", info["namespace"]
        metric = info["metric"]
        metric_selector = _label_selector(request, "metricLabelSelector")
        items = values.custom_values(
            resource=resource,
            namespace=namespace,
            name=name,
            metric=metric,
            selector=_label_selector(request, "labelSelector"),
            metric_selector=metric_selector,
        )
        if items is None:
            qualified = _qualified_resource(resource)
            if name == "*":
                message = f"the server could not find the metric {metric} for {qualified}"
            else:
                message = f"the server could not find the metric {metric} for {qualified} {name}"
            return _status(404, "NotFound", message)
        return _list("MetricValueList", custom_gv, items)

    async def external_metric(request: web.Request) -> web.StreamResponse:
        metric = request.match_info["metric"]
        items = values.external_values(
            namespace=request.match_info["namespace"],
            metric=metric,
            selector=_label_selector(request, "labelSelector"),
        )
        if items is None:
            message = f"the server could not find the metric {metric} for provided labels"
            return _status(404, "NotFound", message)
        return _list("ExternalMetricValueList", external_gv, items)

    routes: list[tuple[str, Handler]] = [
        (f"/apis/{RESOURCE_METRICS_GROUP[0]}", group_document(RESOURCE_METRICS_GROUP[0])),
        (f"/apis/{CUSTOM_METRICS_GROUP[0]}", group_document(CUSTOM_METRICS_GROUP[0])),
        (f"/apis/{EXTERNAL_METRICS_GROUP[0]}", group_document(EXTERNAL_METRICS_GROUP[0])),
        (resource_base, resource_resources),
        (f"{resource_base}/pods", list_pods),
        (f"{resource_base}/namespaces/{{namespace}}/pods", list_pods),
        (f"{resource_base}/namespaces/{{namespace}}/pods/{{name}}", get_pod),
        (f"{resource_base}/nodes", list_nodes),
        (f"{resource_base}/nodes/{{name}}", get_node),
        (custom_base, custom_resources),
        (f"{custom_base}/namespaces/{{namespace}}/metrics/{{metric}}", custom_metric),
        (f"{custom_base}/namespaces/{{namespace}}/{{resource}}/{{name}}/{{metric}}", custom_metric),
        (f"{custom_base}/namespaces/{{namespace}}/{{resource}}/{{object}}", custom_metric),
        (f"{custom_base}/{{resource}}/{{name}}/{{metric}}", custom_metric),
        (f"{custom_base}/{{resource}}/{{object}}", custom_metric),
        (external_base, external_resources),
        (f"{external_base}/namespaces/{{namespace}}/{{metric}}", external_metric),
    ]
    for path, handler in routes:
        app.router.add_get(path, _handling_bad_selectors(handler))
