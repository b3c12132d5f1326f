"""Cluster API ``Machine``: one instance of a node group; ``spec.providerID`` and
``status.nodeRef`` tie it to its node."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta, ObjectReference

__all__ = ["Machine", "MachineSpec", "MachineStatus"]


class MachineSpec(TypedDict, total=False):
    """``MachineSpec``."""

    clusterName: str
    providerID: str
    failureDomain: str
    version: str


class MachineStatus(TypedDict, total=False):
    """``MachineStatus``."""

    phase: str
    nodeRef: ObjectReference
    failureReason: str
    failureMessage: str


class Machine(TypedDict, total=False):
    """``Machine``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: MachineSpec
    status: MachineStatus
