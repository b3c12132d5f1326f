"""Cluster API ``MachineDeployment`` (``cluster.x-k8s.io``): a node group the cluster autoscaler
scales through its ``scale`` subresource; its annotations carry the autoscaler's options."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta
from kubescale.objects.node import Taint

__all__ = [
    "MachineBootstrap",
    "MachineDeployment",
    "MachineDeploymentSpec",
    "MachineDeploymentStatus",
    "MachineInfrastructureReference",
    "MachineTemplateSpec",
    "MachineTemplateSpecBody",
]


class MachineInfrastructureReference(TypedDict, total=False):
    """The ``infrastructureRef`` of a machine template (an ``ObjectReference``)."""

    apiVersion: str
    kind: str
    name: str
    namespace: str


class MachineBootstrap(TypedDict, total=False):
    """``Bootstrap``: ``dataSecretName`` or a ``configRef``."""

    dataSecretName: str


class MachineTemplateSpecBody(TypedDict, total=False):
    """``MachineSpec`` as a template carries it."""

    clusterName: str
    version: str
    failureDomain: str
    infrastructureRef: MachineInfrastructureReference
    bootstrap: MachineBootstrap
    taints: list[Taint]
    """The taints a new node of the group gets (the scale-from-zero template reads them)."""


class MachineTemplateSpec(TypedDict, total=False):
    """``MachineTemplateSpec``."""

    metadata: ObjectMeta
    spec: MachineTemplateSpecBody


class MachineDeploymentSpec(TypedDict, total=False):
    """``MachineDeploymentSpec``."""

    clusterName: str
    replicas: int
    selector: LabelSelectorObject
    template: MachineTemplateSpec


class MachineDeploymentStatus(TypedDict, total=False):
    """``MachineDeploymentStatus``."""

    replicas: int
    readyReplicas: int
    selector: str


class MachineDeployment(TypedDict, total=False):
    """``MachineDeployment``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: MachineDeploymentSpec
    status: MachineDeploymentStatus
