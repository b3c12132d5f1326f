"""``autoscaling.k8s.io/v1`` ``VerticalPodAutoscaler``
(``vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1/types.go``), with the
``startupBoost`` fields of the CPU startup boost AEP."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import (
    Condition,
    CrossVersionObjectReference,
    ObjectMeta,
    ResourceList,
)

__all__ = [
    "ContainerResourcePolicy",
    "EvictionRequirement",
    "PodResourcePolicy",
    "PodUpdatePolicy",
    "RecommendedContainerResources",
    "RecommendedPodResources",
    "StartupBoost",
    "StartupBoostCPU",
    "VerticalPodAutoscaler",
    "VerticalPodAutoscalerRecommenderSelector",
    "VerticalPodAutoscalerSpec",
    "VerticalPodAutoscalerStatus",
]


class EvictionRequirement(TypedDict, total=False):
    """``EvictionRequirement``."""

    resources: list[str]
    changeRequirement: str


class PodUpdatePolicy(TypedDict, total=False):
    """``PodUpdatePolicy``."""

    updateMode: str
    minReplicas: int
    evictionRequirements: list[EvictionRequirement]
    evictAfterOOMSeconds: int


class StartupBoostCPU(TypedDict, total=False):
    """The CPU part of a ``startupBoost`` (upstream's ``GenericStartupBoost``): ``type``
    (``Factor``/``Quantity``), ``factor``, ``quantity``, ``durationSeconds``."""

    type: str
    factor: int
    quantity: str
    durationSeconds: int


class StartupBoost(TypedDict, total=False):
    """``StartupBoost`` (VPA-level or per container)."""

    cpu: StartupBoostCPU


class ContainerResourcePolicy(TypedDict, total=False):
    """``ContainerResourcePolicy``."""

    containerName: str
    mode: str
    minAllowed: ResourceList
    maxAllowed: ResourceList
    controlledResources: list[str]
    controlledValues: str
    oomBumpUpRatio: str
    oomMinBumpUp: str
    memoryAggregationIntervalSeconds: int
    memoryAggregationIntervalCount: int
    startupBoost: StartupBoost


class PodResourcePolicy(TypedDict, total=False):
    """``PodResourcePolicy``."""

    containerPolicies: list[ContainerResourcePolicy]


class VerticalPodAutoscalerRecommenderSelector(TypedDict, total=False):
    """``VerticalPodAutoscalerRecommenderSelector``."""

    name: str


class VerticalPodAutoscalerSpec(TypedDict, total=False):
    """``VerticalPodAutoscalerSpec``."""

    targetRef: CrossVersionObjectReference
    updatePolicy: PodUpdatePolicy
    resourcePolicy: PodResourcePolicy
    recommenders: list[VerticalPodAutoscalerRecommenderSelector]
    startupBoost: StartupBoost


class RecommendedContainerResources(TypedDict, total=False):
    """``RecommendedContainerResources``."""

    containerName: str
    target: ResourceList
    lowerBound: ResourceList
    upperBound: ResourceList
    uncappedTarget: ResourceList


class RecommendedPodResources(TypedDict, total=False):
    """``RecommendedPodResources``."""

    containerRecommendations: list[RecommendedContainerResources]


class VerticalPodAutoscalerStatus(TypedDict, total=False):
    """``VerticalPodAutoscalerStatus``."""

    recommendation: RecommendedPodResources
    conditions: list[Condition]
    observedGeneration: int
    """The ``metadata.generation`` the recommender wrote this status for."""


class VerticalPodAutoscaler(TypedDict, total=False):
    """``VerticalPodAutoscaler``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: VerticalPodAutoscalerSpec
    status: VerticalPodAutoscalerStatus
