"""Cluster API ``MachineSet``: a node group (alone, or owned by a ``MachineDeployment``)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.machine_deployment import MachineDeployment, MachineTemplateSpec
from kubescale.objects.meta import LabelSelectorObject, ObjectMeta

__all__ = ["MachineSet", "MachineSetSpec", "MachineSetStatus", "ScalableResource"]


class MachineSetSpec(TypedDict, total=False):
    """``MachineSetSpec``."""

    clusterName: str
    replicas: int
    selector: LabelSelectorObject
    template: MachineTemplateSpec


class MachineSetStatus(TypedDict, total=False):
    """``MachineSetStatus``."""

    replicas: int
    readyReplicas: int
    selector: str


class MachineSet(TypedDict, total=False):
    """``MachineSet``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: MachineSetSpec
    status: MachineSetStatus


ScalableResource = MachineDeployment | MachineSet
"""A Cluster API node group: a ``MachineDeployment``, or a ``MachineSet`` (alone or owned by
one), scaled through its ``scale`` subresource."""
