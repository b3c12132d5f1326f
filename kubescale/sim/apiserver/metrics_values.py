"""What the aggregated metrics APIs answer: the values tests and the simulator set.

:class:`MetricsValues` is the store behind :mod:`.metrics_apis`: resource metrics as
metrics-server reports them (per pod container and per node), custom metrics per object as an
adapter such as prometheus-adapter serves them, and external metrics per namespace as KEDA's
adapter does. It renders the ``k8s.io/metrics`` documents (``PodMetrics``, ``NodeMetrics``,
``MetricValueList`` and ``ExternalMetricValueList`` items); the routes only pick and wrap them.

Quantities are passed as strings (``"123456n"``, ``"45Mi"``) or numbers (``0.25`` →
``"250m"``). Timestamps default to the injected clock's now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kubescale.base.clock import Clock, RealClock
from kubescale.base.go_time import go_duration_string
from kubescale.kube.resources import by_plural
from kubescale.objects.quantities import Quantity as KubeQuantity
from kubescale.objects.selectors import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    IN,
    NOT_EQUALS,
    NOT_IN,
    LabelSelector,
)

from .errors import qualified_resource
from .served_kinds import SERVED
from .storage import format_time

__all__ = ["DEFAULT_WINDOW_SECONDS", "MetricsValues", "Quantity", "qualify_resource"]

Quantity = str | int | float
"""A resource.Quantity as its string, or a number rendered canonically (milli if fractional)."""

DEFAULT_WINDOW_SECONDS: Final = 15.0  # metrics-server's default --metric-resolution


def _quantity(value: Quantity) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise TypeError("a quantity cannot be a bool")
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def qualify_resource(resource: str) -> str:
    """``deployments`` → ``deployments.apps`` (schema.GroupResource.String() of the catalogue)."""
    if "." in resource:
        return resource
    for rt in SERVED:  # the core group comes first in the catalogue
        if rt.plural == resource:
            return qualified_resource(rt)
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
        # shared per-pod metrics: (namespace, metric) → (pod label selector, total)
        self._shared: dict[tuple[str, str], tuple[LabelSelector, str]] = {}
        self.pods_source: Callable[[str], list[dict[str, Any]]] | None = None
        """The namespace's pods (set by the API server), for :meth:`set_shared_pod_metric`."""

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
        key = (qualify_resource(resource), namespace or "", name)
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

    def set_shared_pod_metric(
        self, *, namespace: str, metric: str, selector: LabelSelector, total: Quantity
    ) -> None:
        """A per-pod custom metric whose ``total`` the Running pods the selector matches share
        equally at every read (a service's request rate spread over its replicas): each pod's
        value is ``total / n`` in milli-units, truncated, as an adapter would report it."""
        self._shared[(namespace, metric)] = (selector, _quantity(total))

    def _shared_values(
        self, namespace: str, metric: str
    ) -> dict[str, tuple[str, Mapping[str, str]]]:
        rule = self._shared.get((namespace, metric))
        if rule is None or self.pods_source is None:
            return {}
        selector, total = rule
        pods = [
            pod
            for pod in self.pods_source(namespace)
            if (pod.get("status") or {}).get("phase") == "Running"
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
            and selector.matches((pod.get("metadata") or {}).get("labels") or {})
        ]
        if not pods:
            return {}
        milli = KubeQuantity.from_json(total).milli_value() // len(pods)
        return {
            str(pod["metadata"]["name"]): (
                KubeQuantity.from_milli(milli).to_json(),
                (pod.get("metadata") or {}).get("labels") or {},
            )
            for pod in pods
        }

    def remove_object_metric(
        self, *, resource: str, name: str, metric: str, namespace: str | None = None
    ) -> None:
        key = (qualify_resource(resource), namespace or "", name)
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
        self._shared.clear()
        self._custom.clear()
        self._external.clear()

    # --- the documents served ---

    def pod_metrics(self, namespace: str | None) -> list[dict[str, Any]]:
        """``PodMetrics`` objects, of one namespace or (None) of all, sorted by namespace/name."""
        now = format_time(self.clock.now())
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
                "timestamp": format_time(sample.timestamp),
                "window": go_duration_string(sample.window),
                "containers": [
                    {"name": container, "usage": dict(usage)}
                    for container, usage in sample.containers
                ],
            }
            for (ns, name), sample in sorted(self._pods.items())
            if namespace is None or ns == namespace
        ]

    def node_metrics(self) -> list[dict[str, Any]]:
        now = format_time(self.clock.now())
        return [
            {
                "kind": "NodeMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": name, "creationTimestamp": now, "labels": dict(sample.labels)},
                "timestamp": format_time(sample.timestamp),
                "window": go_duration_string(sample.window),
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
        resource = qualify_resource(resource)
        catalogue_type = _described_type(resource)
        known = False
        items: list[dict[str, Any]] = []
        if resource == "pods" and (namespace, metric) in self._shared:
            known = True
            now = format_time(self.clock.now())
            for pod_name, (value, labels) in sorted(self._shared_values(namespace, metric).items()):
                if name not in ("*", pod_name) or (name == "*" and not selector.matches(labels)):
                    continue
                items.append(
                    {
                        "describedObject": {
                            "kind": "Pod",
                            "namespace": namespace,
                            "name": pod_name,
                            "apiVersion": "v1",
                        },
                        "metric": {"name": metric},
                        "timestamp": now,
                        "value": value,
                    }
                )
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
                    "timestamp": format_time(series.timestamp),
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
                "timestamp": format_time(series.timestamp),
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
