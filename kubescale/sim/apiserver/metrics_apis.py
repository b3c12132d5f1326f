"""The aggregated metrics APIs (resource, custom, external), served from values tests set.

In a cluster these groups are APIServices backed by metrics-server, a custom-metrics adapter
(prometheus-adapter) and an external-metrics adapter (KEDA). The in-process API server mounts
them itself, answering from a :class:`~.metrics_values.MetricsValues` that tests and the
simulator fill, so the HPA and VPA loops read metrics through the same URLs and shapes as
against a real cluster:

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
Errors are metav1.Status bodies built by :mod:`.errors`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from kubescale.objects.selectors import (
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

from . import errors
from .faults import FaultInjector
from .metrics_values import MetricsValues, Quantity, qualify_resource
from .request_log import RequestLog, RequestRecord

__all__ = [
    "CUSTOM_METRICS_GROUP",
    "EXTERNAL_METRICS_GROUP",
    "RESOURCE_METRICS_GROUP",
    "MetricsValues",
    "Quantity",
    "add_metrics_routes",
    "fault_resource",
    "metrics_discovery_groups",
]

RESOURCE_METRICS_GROUP: Final = ("metrics.k8s.io", "v1beta1")
CUSTOM_METRICS_GROUP: Final = ("custom.metrics.k8s.io", "v1beta2")
EXTERNAL_METRICS_GROUP: Final = ("external.metrics.k8s.io", "v1beta1")


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


def _failure(error: errors.ApiError) -> web.Response:
    return web.json_response(error.status, status=error.code)


def _not_found(message: str) -> errors.ApiError:
    return errors.status_error(code=404, message=message)


def _metrics_not_found(resource: str, name: str) -> errors.ApiError:
    """metrics-server's ``errors.NewNotFound`` for ``podmetrics``/``nodemetrics``."""
    group = RESOURCE_METRICS_GROUP[0]
    return errors.status_error(
        code=404,
        message=f'{resource}.{group} "{name}" not found',
        details={"name": name, "group": group, "kind": resource},
    )


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


def request_record(request: web.Request) -> RequestRecord | None:
    """What kube-apiserver's RequestInfo makes of a request to an aggregated metrics API (as
    the RBAC authorizer sees it): ``/apis/<group>/<version>/[namespaces/<ns>/]<resource>
    [/<name>[/<subresource>]]``, verb ``get`` with a name, ``list`` without; discovery
    documents are not resource requests (``None``)."""
    parts = [p for p in request.path.split("/") if p][1:]  # past "apis"
    if len(parts) < 3:
        return None
    group, rest = parts[0], parts[2:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace, rest = rest[1], rest[2:]
        if not rest:  # the namespace object itself
            rest = ["namespaces", namespace]
            namespace = ""
    header = request.headers.get("Authorization", "")
    return RequestRecord(
        verb="get" if len(rest) > 1 else "list",
        group=group,
        resource=rest[0],
        subresource=rest[2] if len(rest) > 2 else "",
        namespace=namespace,
        name=rest[1] if len(rest) > 1 else "",
        user=header[7:].strip() if header[:7].lower() == "bearer " else "",
    )


def fault_resource(record: RequestRecord) -> str:
    """The name a :class:`~.faults.FaultInjector` rule gives this metrics request:
    ``<resource>.<group>[/<subresource>]`` (``pods.metrics.k8s.io``,
    ``queue.external.metrics.k8s.io``, ``pods.custom.metrics.k8s.io/qps``)."""
    name = f"{record.resource}.{record.group}"
    return f"{name}/{record.subresource}" if record.subresource else name


def _handling_bad_selectors(
    handler: Handler, log: RequestLog, faults: FaultInjector | None
) -> Handler:
    async def wrapped(request: web.Request) -> web.StreamResponse:
        record = request_record(request)
        if record is not None:
            log.record(record)
            fault = (
                faults.take(verb=record.verb, resource=fault_resource(record)) if faults else None
            )
            if fault is not None:
                await fault.wait()
                if fault.error is not None:
                    return _failure(fault.error)
                if fault.body is not None:
                    return web.Response(text=fault.body, content_type="application/json")
        try:
            return await handler(request)
        except _BadSelector as exc:
            return _failure(errors.bad_request(str(exc)))

    return wrapped


def add_metrics_routes(
    app: web.Application,
    values: MetricsValues,
    log: RequestLog,
    faults: FaultInjector | None = None,
) -> None:
    """Mount the three metrics APIs and their discovery documents on ``app``; every resource
    request goes into ``log`` (:func:`request_record`) and through ``faults``
    (:func:`fault_resource` names it)."""
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
        return _failure(_metrics_not_found("podmetrics", f"{namespace}/{name}"))

    async def list_nodes(request: web.Request) -> web.StreamResponse:
        return _list("NodeMetricsList", resource_gv, _filtered(request, values.node_metrics()))

    async def get_node(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        for item in values.node_metrics():
            if item["metadata"]["name"] == name:
                return web.json_response(item)
        return _failure(_metrics_not_found("nodemetrics", name))

    async def custom_metric(request: web.Request) -> web.StreamResponse:
        info = dict(request.match_info)
        if "object" in info:
            # Clients quote "<name>/<metric>" into one segment (%2F); Go's server decodes the
            # path before routing, so both spellings must reach the same metric.
            name, slash, metric = info.pop("object").partition("/")
            if not slash:
                return _failure(_not_found("the server could not find the requested resource"))
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
            qualified = qualify_resource(resource)
            if name == "*":
                message = f"the server could not find the metric {metric} for {qualified}"
            else:
                message = f"the server could not find the metric {metric} for {qualified} {name}"
            return _failure(_not_found(message))
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
            return _failure(_not_found(message))
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
        app.router.add_get(path, _handling_bad_selectors(handler, log, faults))
