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
    """``HistogramCheckpoint``: bucket index (as a string key) → weight. The times are
    ``metav1.Time``: a zero time is written as ``null``."""

    referenceTimestamp: str | None
    bucketWeights: dict[str, int]
    totalWeight: float


class VerticalPodAutoscalerCheckpointSpec(TypedDict, total=False):
    """``VerticalPodAutoscalerCheckpointSpec``."""

    vpaObjectName: str
    containerName: str


class VerticalPodAutoscalerCheckpointStatus(TypedDict, total=False):
    """``VerticalPodAutoscalerCheckpointStatus`` (a zero ``metav1.Time`` is written as
    ``null``)."""

    lastUpdateTime: str | None
    version: str
    cpuHistogram: HistogramCheckpoint
    memoryHistogram: HistogramCheckpoint
    firstSampleStart: str | None
    lastSampleStart: str | None
    totalSamplesCount: int


class VerticalPodAutoscalerCheckpoint(TypedDict, total=False):
    """``VerticalPodAutoscalerCheckpoint``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: VerticalPodAutoscalerCheckpointSpec
    status: VerticalPodAutoscalerCheckpointStatus
