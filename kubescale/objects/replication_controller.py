"""``core/v1.ReplicationController``: the legacy pod controller (a label-map selector)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta
from kubescale.objects.pod import PodTemplateSpec

__all__ = ["ReplicationController", "ReplicationControllerSpec", "ReplicationControllerStatus"]


class ReplicationControllerSpec(TypedDict, total=False):
    """``core/v1.ReplicationControllerSpec``."""

    replicas: int
    selector: dict[str, str]
    template: PodTemplateSpec


class ReplicationControllerStatus(TypedDict, total=False):
    """``core/v1.ReplicationControllerStatus``."""

    observedGeneration: int
    replicas: int
    readyReplicas: int


class ReplicationController(TypedDict, total=False):
    """``core/v1.ReplicationController``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ReplicationControllerSpec
    status: ReplicationControllerStatus
