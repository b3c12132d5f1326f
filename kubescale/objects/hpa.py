"""``autoscaling/v2`` ``HorizontalPodAutoscaler`` (``k8s.io/api/autoscaling/v2/types.go``),
with the ``tolerance`` field of KEP-4951 (``HPAConfigurableTolerance``)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import (
    Condition,
    CrossVersionObjectReference,
    LabelSelectorObject,
    ObjectMeta,
)

__all__ = [
    "ContainerResourceMetricSource",
    "ContainerResourceMetricStatus",
    "ExternalMetricSource",
    "ExternalMetricStatus",
    "HPAScalingPolicy",
    "HPAScalingRules",
    "HorizontalPodAutoscaler",
    "HorizontalPodAutoscalerBehavior",
    "HorizontalPodAutoscalerSpec",
    "HorizontalPodAutoscalerStatus",
    "MetricIdentifier",
    "MetricSpec",
    "MetricStatus",
    "MetricTarget",
    "MetricValueStatus",
    "ObjectMetricSource",
    "ObjectMetricStatus",
    "PodsMetricSource",
    "PodsMetricStatus",
    "ResourceMetricSource",
    "ResourceMetricStatus",
]


class MetricTarget(TypedDict, total=False):
    """``MetricTarget``: ``type`` is ``Utilization``, ``Value`` or ``AverageValue``."""

    type: str
    value: str
    averageValue: str
    averageUtilization: int


class MetricValueStatus(TypedDict, total=False):
    """``MetricValueStatus``."""

    value: str
    averageValue: str
    averageUtilization: int


class MetricIdentifier(TypedDict, total=False):
    """``MetricIdentifier``."""

    name: str
    selector: LabelSelectorObject


class ResourceMetricSource(TypedDict, total=False):
    """``ResourceMetricSource``."""

    name: str
    target: MetricTarget


class ContainerResourceMetricSource(TypedDict, total=False):
    """``ContainerResourceMetricSource``."""

    name: str
    container: str
    target: MetricTarget


class PodsMetricSource(TypedDict, total=False):
    """``PodsMetricSource``."""

    metric: MetricIdentifier
    target: MetricTarget


class ObjectMetricSource(TypedDict, total=False):
    """``ObjectMetricSource``."""

    describedObject: CrossVersionObjectReference
    metric: MetricIdentifier
    target: MetricTarget


class ExternalMetricSource(TypedDict, total=False):
    """``ExternalMetricSource``."""

    metric: MetricIdentifier
    target: MetricTarget


class MetricSpec(TypedDict, total=False):
    """``MetricSpec``: ``type`` names which of the sources is set."""

    type: str
    resource: ResourceMetricSource
    containerResource: ContainerResourceMetricSource
    pods: PodsMetricSource
    object: ObjectMetricSource
    external: ExternalMetricSource


class HPAScalingPolicy(TypedDict, total=False):
    """``HPAScalingPolicy``."""

    type: str
    value: int
    periodSeconds: int


class HPAScalingRules(TypedDict, total=False):
    """``HPAScalingRules``."""

    stabilizationWindowSeconds: int
    selectPolicy: str
    policies: list[HPAScalingPolicy]
    tolerance: str


class HorizontalPodAutoscalerBehavior(TypedDict, total=False):
    """``HorizontalPodAutoscalerBehavior``."""

    scaleUp: HPAScalingRules
    scaleDown: HPAScalingRules


class HorizontalPodAutoscalerSpec(TypedDict, total=False):
    """``HorizontalPodAutoscalerSpec``."""

    scaleTargetRef: CrossVersionObjectReference
    minReplicas: int
    maxReplicas: int
    metrics: list[MetricSpec]
    behavior: HorizontalPodAutoscalerBehavior
    targetCPUUtilizationPercentage: int
    """``autoscaling/v1`` only (an HPA read at v1 scales on CPU alone)."""
    selectionStrategy: str
    """``LabelSelector`` (the default) or ``OwnerReferences`` (upstream ``pod_filters.go``)."""


class ResourceMetricStatus(TypedDict, total=False):
    """``ResourceMetricStatus``."""

    name: str
    current: MetricValueStatus


class ContainerResourceMetricStatus(TypedDict, total=False):
    """``ContainerResourceMetricStatus``."""

    name: str
    container: str
    current: MetricValueStatus


class PodsMetricStatus(TypedDict, total=False):
    """``PodsMetricStatus``."""

    metric: MetricIdentifier
    current: MetricValueStatus


class ObjectMetricStatus(TypedDict, total=False):
    """``ObjectMetricStatus``."""

    describedObject: CrossVersionObjectReference
    metric: MetricIdentifier
    current: MetricValueStatus


class ExternalMetricStatus(TypedDict, total=False):
    """``ExternalMetricStatus``."""

    metric: MetricIdentifier
    current: MetricValueStatus


class MetricStatus(TypedDict, total=False):
    """``MetricStatus``."""

    type: str
    resource: ResourceMetricStatus
    containerResource: ContainerResourceMetricStatus
    pods: PodsMetricStatus
    object: ObjectMetricStatus
    external: ExternalMetricStatus


class HorizontalPodAutoscalerStatus(TypedDict, total=False):
    """``HorizontalPodAutoscalerStatus``."""

    observedGeneration: int
    lastScaleTime: str
    currentReplicas: int
    desiredReplicas: int
    currentMetrics: list[MetricStatus]
    conditions: list[Condition]


class HorizontalPodAutoscaler(TypedDict, total=False):
    """``HorizontalPodAutoscaler``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: HorizontalPodAutoscalerSpec
    status: HorizontalPodAutoscalerStatus
