"""``apps/v1.Deployment``: a scale target (HPA, VPA) and the controller of replica sets."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta
from kubescale.objects.pod import PodTemplateSpec

__all__ = ["Deployment", "DeploymentSpec", "DeploymentStatus"]


class DeploymentSpec(TypedDict, total=False):
    """``apps/v1.DeploymentSpec``."""

    replicas: int
    selector: LabelSelectorObject
    template: PodTemplateSpec
    paused: bool


class DeploymentStatus(TypedDict, total=False):
    """``apps/v1.DeploymentStatus``."""

    observedGeneration: int
    replicas: int
    updatedReplicas: int
    readyReplicas: int
    availableReplicas: int


class Deployment(TypedDict, total=False):
    """``apps/v1.Deployment``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: DeploymentSpec
    status: DeploymentStatus
