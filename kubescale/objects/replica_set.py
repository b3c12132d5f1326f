"""``apps/v1.ReplicaSet``: a scale target and a pod's usual controller."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta
from kubescale.objects.pod import PodTemplateSpec

__all__ = ["ReplicaSet", "ReplicaSetSpec", "ReplicaSetStatus"]


class ReplicaSetSpec(TypedDict, total=False):
    """``apps/v1.ReplicaSetSpec``."""

    replicas: int
    selector: LabelSelectorObject
    template: PodTemplateSpec


class ReplicaSetStatus(TypedDict, total=False):
    """``apps/v1.ReplicaSetStatus``."""

    observedGeneration: int
    replicas: int
    readyReplicas: int
    availableReplicas: int


class ReplicaSet(TypedDict, total=False):
    """``apps/v1.ReplicaSet``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ReplicaSetSpec
    status: ReplicaSetStatus
