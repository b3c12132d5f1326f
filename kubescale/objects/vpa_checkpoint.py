"""``autoscaling.k8s.io/v1`` ``VerticalPodAutoscalerCheckpoint``: the recommender's saved
aggregate state (``types.go``)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = [
    "HistogramCheckpoint",
    "VerticalPodAutoscalerCheckpoint",
    "VerticalPodAutoscalerCheckpointSpec",
    "VerticalPodAutoscalerCheckpointStatus",
]


class HistogramCheckpoint(TypedDict, total=False):
    """``HistogramCheckpoint``: bucket index (as a string key) → weight."""

    referenceTimestamp: str
    bucketWeights: dict[str, int]
    totalWeight: float


class VerticalPodAutoscalerCheckpointSpec(TypedDict, total=False):
    """``VerticalPodAutoscalerCheckpointSpec``."""

    vpaObjectName: str
    containerName: str


class VerticalPodAutoscalerCheckpointStatus(TypedDict, total=False):
    """``VerticalPodAutoscalerCheckpointStatus``."""

    lastUpdateTime: str
    version: str
    cpuHistogram: HistogramCheckpoint
    memoryHistogram: HistogramCheckpoint
    firstSampleStart: str
    lastSampleStart: str
    totalSamplesCount: int


class VerticalPodAutoscalerCheckpoint(TypedDict, total=False):
    """``VerticalPodAutoscalerCheckpoint``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: VerticalPodAutoscalerCheckpointSpec
    status: VerticalPodAutoscalerCheckpointStatus
