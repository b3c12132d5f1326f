"""``apps/v1.StatefulSet``: a scale target and a pod controller."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta
from kubescale.objects.pod import PodTemplateSpec

__all__ = ["StatefulSet", "StatefulSetSpec", "StatefulSetStatus"]


class StatefulSetSpec(TypedDict, total=False):
    """``apps/v1.StatefulSetSpec``."""

    replicas: int
    selector: LabelSelectorObject
    template: PodTemplateSpec
    serviceName: str


class StatefulSetStatus(TypedDict, total=False):
    """``apps/v1.StatefulSetStatus``."""

    observedGeneration: int
    replicas: int
    readyReplicas: int


class StatefulSet(TypedDict, total=False):
    """``apps/v1.StatefulSet``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: StatefulSetSpec
    status: StatefulSetStatus
