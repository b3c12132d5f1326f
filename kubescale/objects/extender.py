"""kube-scheduler's extender protocol (``k8s.io/kube-scheduler/extender/v1``): ``ExtenderArgs``
in, ``ExtenderFilterResult`` out (and the preemption and binding messages)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod

__all__ = [
    "ExtenderArgs",
    "ExtenderBindingArgs",
    "ExtenderBindingResult",
    "ExtenderFilterResult",
    "HostPriority",
    "NodeList",
]


class NodeList(TypedDict, total=False):
    """``core/v1.NodeList`` as the extender's ``nodes`` field carries it."""

    items: list[Node]


class ExtenderArgs(TypedDict, total=False):
    """``ExtenderArgs``: the scheduler sends ``nodes`` (a NodeList) to a non-caching extender
    and ``nodenames`` to a caching one (``nodeCacheCapable``); Go's ``encoding/json`` matches
    keys case-insensitively."""

    pod: Pod
    nodes: NodeList
    nodenames: list[str]


class ExtenderFilterResult(TypedDict, total=False):
    """``ExtenderFilterResult``."""

    nodes: NodeList
    nodenames: list[str]
    failedNodes: dict[str, str]
    failedAndUnresolvableNodes: dict[str, str]
    error: str


class HostPriority(TypedDict, total=False):
    """``HostPriority``: one entry of a prioritize answer."""

    host: str
    score: int


class ExtenderBindingArgs(TypedDict, total=False):
    """``ExtenderBindingArgs``."""

    podName: str
    podNamespace: str
    podUID: str
    node: str


class ExtenderBindingResult(TypedDict, total=False):
    """``ExtenderBindingResult``."""

    error: str
