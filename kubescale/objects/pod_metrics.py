"""``metrics.k8s.io/v1beta1`` ``PodMetrics`` (metrics-server's resource metrics API): what the
VPA recommender's real-time metrics feed reads (upstream's ``metrics_client.go``)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta, ResourceList

__all__ = ["ContainerMetrics", "PodMetrics"]


class ContainerMetrics(TypedDict, total=False):
    """``ContainerMetrics``: one container's usage (``cpu``, ``memory`` quantities)."""

    name: str
    usage: ResourceList


class PodMetrics(TypedDict, total=False):
    """``PodMetrics``: its containers' usage over ``window``, measured at ``timestamp``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    timestamp: str
    window: str
    containers: list[ContainerMetrics]
