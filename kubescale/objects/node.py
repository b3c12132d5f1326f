"""``core/v1.Node``: the fields the scheduler extender, cluster autoscaler and descheduler
read."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import Condition, ObjectMeta, ResourceList

__all__ = ["Node", "NodeSpec", "NodeStatus", "Taint"]


class Taint(TypedDict, total=False):
    """``core/v1.Taint``."""

    key: str
    value: str
    effect: str
    timeAdded: str


class NodeSpec(TypedDict, total=False):
    """``core/v1.NodeSpec``."""

    providerID: str
    unschedulable: bool
    taints: list[Taint]


class NodeStatus(TypedDict, total=False):
    """``core/v1.NodeStatus``."""

    capacity: ResourceList
    allocatable: ResourceList
    conditions: list[Condition]


class Node(TypedDict, total=False):
    """``core/v1.Node``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus
