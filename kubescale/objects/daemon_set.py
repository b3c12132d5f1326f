"""``apps/v1.DaemonSet``: its pods run on every matching node (and on template nodes)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta
from kubescale.objects.pod import PodTemplateSpec

__all__ = ["DaemonSet", "DaemonSetSpec", "DaemonSetStatus"]


class DaemonSetSpec(TypedDict, total=False):
    """``apps/v1.DaemonSetSpec``."""

    selector: LabelSelectorObject
    template: PodTemplateSpec


class DaemonSetStatus(TypedDict, total=False):
    """``apps/v1.DaemonSetStatus``."""

    observedGeneration: int
    desiredNumberScheduled: int
    currentNumberScheduled: int
    numberReady: int


class DaemonSet(TypedDict, total=False):
    """``apps/v1.DaemonSet``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DaemonSetSpec
    status: DaemonSetStatus
