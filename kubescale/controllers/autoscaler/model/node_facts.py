"""What the cluster autoscaler reads off a node: readiness, its own taints, startup taints.

Readiness is ``kube_util.GetReadinessState`` plus the startup-taint rule of
``obtainNodeLists``: a node is ready when its ``Ready`` condition is ``True``, no
``DiskPressure``/``NetworkUnavailable`` condition is ``True``, it carries none of the
not-ready taints (``node.kubernetes.io/not-ready``, ``node.kubernetes.io/unreachable``,
``node.cloudprovider.kubernetes.io/uninitialized``) and no startup taint (prefix
``startup-taint.cluster-autoscaler.kubernetes.io/`` or a ``--startup-taint`` key). A node
without a ``Ready`` condition is not ready.

The autoscaler's taints (``pkg/utils/taints``): ``ToBeDeletedByClusterAutoscaler=<unix
seconds>:NoSchedule`` on nodes being removed, ``DeletionCandidateOfClusterAutoscaler=<unix
seconds>:PreferNoSchedule`` on unneeded nodes. A ToBeDeleted taint younger than 5 minutes means
the node is "currently being deleted" (``eligibility``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from kubescale.controllers.autoscaler.model.pod_facts import parse_time
from kubescale.objects.node import Node, Taint
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.scheduling.autoscaler_taints import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT

__all__ = [
    "DELETION_CANDIDATE_TAINT",
    "IGNORE_TAINT_PREFIX",
    "NODE_CONDITION_TAINTS",
    "SCALE_DOWN_DISABLED_ANNOTATION",
    "STARTUP_TAINT_PREFIX",
    "STATUS_TAINT_PREFIX",
    "TO_BE_DELETED_TAINT",
    "NodeReadiness",
    "currently_being_deleted",
    "has_startup_taint",
    "node_name",
    "node_readiness",
    "provider_id",
    "taint_time",
]

STARTUP_TAINT_PREFIX: Final = "startup-taint.cluster-autoscaler.kubernetes.io/"
STATUS_TAINT_PREFIX: Final = "status-taint.cluster-autoscaler.kubernetes.io/"
IGNORE_TAINT_PREFIX: Final = "ignore-taint.cluster-autoscaler.kubernetes.io/"
SCALE_DOWN_DISABLED_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
NOT_READY_TAINTS: Final = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)
NODE_CONDITION_TAINTS: Final = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/network-unavailable",
        "node.kubernetes.io/pid-pressure",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "node.cloudprovider.kubernetes.io/shutdown",
        "node.kubernetes.io/out-of-service",
    }
)
"""Taints the node lifecycle controller sets from conditions (``taints.NodeConditionTaints``):
dropped from template nodes, a new node will not have them."""
_BEING_DELETED_WINDOW: Final = timedelta(minutes=5)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class NodeReadiness:
    ready: bool
    last_transition: datetime
    """When the Ready condition last changed (the epoch when unknown)."""


def node_name(node: Node) -> str:
    return str(Meta(node).raw.get("name", ""))


def provider_id(node: Node) -> str:
    return str(spec_of(node).get("providerID") or "")


def _taints(node: Node) -> Sequence[Taint]:
    return spec_of(node).get("taints") or ()


def has_startup_taint(node: Node, startup_taints: Iterable[str] = ()) -> bool:
    keys = set(startup_taints)
    return any(
        str(t.get("key", "")).startswith(STARTUP_TAINT_PREFIX) or t.get("key") in keys
        for t in _taints(node)
    )


def node_readiness(node: Node, startup_taints: Iterable[str] = ()) -> NodeReadiness:
    """The module docstring's readiness."""
    ready_found = False
    can_be_ready = True
    last = _EPOCH
    for condition in status_of(node).get("conditions") or ():
        kind, status = condition.get("type"), condition.get("status")
        if kind == "Ready":
            ready_found = True
            if status != "True":
                can_be_ready = False
            changed = parse_time(condition.get("lastTransitionTime"))
            if changed is not None and changed > last:
                last = changed
        elif kind in ("DiskPressure", "NetworkUnavailable") and status == "True":
            can_be_ready = False
    if any(t.get("key") in NOT_READY_TAINTS for t in _taints(node)):
        can_be_ready = False
    if has_startup_taint(node, startup_taints):
        can_be_ready = False
    return NodeReadiness(ready=ready_found and can_be_ready, last_transition=last)


def taint_time(node: Node, key: str) -> datetime | None:
    """When the autoscaler's taint ``key`` was set (its value is unix seconds)."""
    for taint in _taints(node):
        if taint.get("key") == key:
            try:
                return datetime.fromtimestamp(int(str(taint.get("value", ""))), tz=UTC)
            except ValueError:
                return _EPOCH  # present but unparsable: treated as old
    return None


def currently_being_deleted(node: Node, now: datetime) -> bool:
    """A ToBeDeleted taint set less than 5 minutes ago (``IsNodeBeingDeleted``)."""
    tainted = taint_time(node, TO_BE_DELETED_TAINT)
    return tainted is not None and now - tainted < _BEING_DELETED_WINDOW
