"""The aggregated metrics APIs' answers the HPA reads (not API objects the API server stores).

* ``metrics.k8s.io/v1beta1`` ``PodMetrics`` (``k8s.io/metrics/pkg/apis/metrics/v1beta1``):
  a pod's per-container ``usage`` over ``window`` ending ``timestamp``;
* ``custom.metrics.k8s.io/v1beta2`` ``MetricValue``: one described object's value;
* ``external.metrics.k8s.io/v1beta1`` ``ExternalMetricValue``: one series' value.

They come from another API server (metrics-server, an adapter): the reader checks the list's
shape (``items`` a list of objects) before it types the items with these, and reads every value
as a quantity that may fail to decode.
"""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta, ObjectReference, ResourceList

__all__ = [
    "ContainerMetrics",
    "ExternalMetricValue",
    "MetricValue",
    "MetricValueIdentifier",
    "PodMetrics",
]


class ContainerMetrics(TypedDict, total=False):
    """``ContainerMetrics``: one container's ``usage`` (resource name → quantity)."""

    name: str
    usage: ResourceList


class PodMetrics(TypedDict, total=False):
    """``PodMetrics`` (metrics-server copies the pod's labels into its metadata)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    timestamp: str
    window: str
    """A Go duration (``"30s"``)."""
    containers: list[ContainerMetrics]


class MetricValueIdentifier(TypedDict, total=False):
    """``MetricIdentifier`` of ``custom.metrics.k8s.io/v1beta2``."""

    name: str
    selector: LabelSelectorObject


class MetricValue(TypedDict, total=False):
    """``custom.metrics.k8s.io/v1beta2`` ``MetricValue``."""

    describedObject: ObjectReference
    metric: MetricValueIdentifier
    timestamp: str
    windowSeconds: int
    value: str
    """A quantity (a string, or a bare JSON number from some adapters)."""


class ExternalMetricValue(TypedDict, total=False):
    """``external.metrics.k8s.io/v1beta1`` ``ExternalMetricValue``."""

    metricName: str
    metricLabels: dict[str, str]
    timestamp: str
    window: int
    value: str
    """A quantity (a string, or a bare JSON number from some adapters)."""
