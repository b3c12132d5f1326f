"""One brain: scale-down does not undo, in its next loops, a move the descheduler just made.

Upstream's descheduler and cluster autoscaler undo each other. LowNodeUtilization evicts pods
from an over-utilized node so that their replacements land on an under-utilized one; that node
is often still below the autoscaler's ``--scale-down-utilization-threshold`` (0.5) with them —
the descheduler fills it only up to its ``targetThresholds`` — and the pods fit back on the node
they came from, which the evictions just made room on. So the autoscaler finds the node unneeded
and, ``--scale-down-unneeded-time`` later, drains it: the replacements go back where they were
evicted from, and the descheduler's next cycle finds the same imbalance. (The descheduler's side
of the rule — never move pods onto a node the autoscaler marked, never evict from a node it is
draining — is in :mod:`kubescale.coordination.descheduler_budget`.)

The rule (``--coordination one-brain``): a node holding a **fresh replacement** of a pod the
descheduler evicted — a pod of the same controller, created at or after the eviction, on
another node than the one it was evicted from — is not a scale-down candidate (unneeded,
drained or consolidated) until ``window`` after that eviction. The evictions come from the
process's one disruption ledger (:meth:`.disruption_ledger.DisruptionLedger.recent`,
the system's name ``descheduler``), with the node and controller of each evicted pod.

The window is the node group's ``--scale-down-unneeded-time`` (10 minutes by default):

* it is the autoscaler's own measure of "long enough to trust a node is not needed"; while a
  node is protected it is not unneeded, so its unneeded timer starts only when the protection
  ends — the state the descheduler made must then last a whole unneeded time again before the
  node goes, twice what upstream waits;
* it spans the descheduler's next cycles whenever ``--descheduling-interval`` is shorter
  (this repository's examples run it every 2 minutes), so the descheduler sees its move hold;
* it is bounded: if the cluster is still over-provisioned after it, the autoscaler removes the
  node, and the descheduler (one brain) does not fill a node marked
  ``DeletionCandidateOfClusterAutoscaler`` again — the two do not alternate.

Only the descheduler's moves are protected: the VPA updater evicts to resize, not to place, and
the autoscaler's own drains move pods off nodes that go away.

Pure: plain data and ``now`` in, a mapping out; the loop reads the ledger and the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind
from kubescale.objects.pod import Pod
from kubescale.objects.views import meta

__all__ = [
    "DESCHEDULER_ACTOR",
    "RECEIVED_DESCHEDULED_PODS",
    "DescheduledMove",
    "PlacedPod",
    "Protection",
    "moves_from_ledger",
    "placed_pods",
    "protected_nodes",
]

DESCHEDULER_ACTOR: Final = "descheduler"
"""The descheduler's name on the disruption ledger (its ``descheduler_budget.ACTOR``)."""
RECEIVED_DESCHEDULED_PODS: Final = "RecentlyReceivedDescheduledPods"
"""The unremovable reason of a protected node (kubescale's; upstream has no such rule)."""


@dataclass(frozen=True, kw_only=True)
class DescheduledMove:
    """A pod the descheduler evicted: its controller, the node it left, when."""

    namespace: str
    owner_kind: str
    owner_name: str
    from_node: str
    evicted_at: datetime


@dataclass(frozen=True, kw_only=True)
class PlacedPod:
    """A pod bound to a node, with its controller and creation time."""

    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    node: str
    created_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class Protection:
    """Why a node is kept: the fresh replacement it holds, where its predecessor was evicted
    from, and until when."""

    node: str
    pod: str
    """``namespace/name`` of the replacement."""
    from_node: str
    until: datetime

    def describe(self) -> str:
        return (
            f"holds {self.pod}, moved here from {self.from_node} by the descheduler "
            f"(kept until {self.until.isoformat()})"
        )


def protected_nodes(
    *,
    moves: Sequence[DescheduledMove],
    pods: Iterable[PlacedPod],
    now: datetime,
    window: timedelta,
) -> dict[str, Protection]:
    """Node → its protection, for every node holding a fresh replacement of a move made less
    than ``window`` before ``now`` (module docstring); the latest ``until`` wins.

    Creation times are whole seconds (RFC 3339 in the API): a pod created in the second of the
    eviction counts as created after it."""
    if window <= timedelta(0):
        return {}
    live = [m for m in moves if now < m.evicted_at + window and m.owner_name]
    if not live:
        return {}
    by_owner: dict[tuple[str, str, str], list[DescheduledMove]] = {}
    for move in live:
        by_owner.setdefault((move.namespace, move.owner_kind, move.owner_name), []).append(move)
    found: dict[str, Protection] = {}
    for pod in pods:
        if not pod.node or pod.created_at is None:
            continue
        for move in by_owner.get((pod.namespace, pod.owner_kind, pod.owner_name), ()):
            if pod.node == move.from_node:
                continue  # landed back where it was: nothing to protect
            if pod.created_at < move.evicted_at.replace(microsecond=0):
                continue  # an older pod of the controller, not a replacement
            until = move.evicted_at + window
            known = found.get(pod.node)
            if known is None or known.until < until:
                found[pod.node] = Protection(
                    node=pod.node,
                    pod=f"{pod.namespace}/{pod.name}",
                    from_node=move.from_node,
                    until=until,
                )
    return found


def moves_from_ledger(entries: Iterable[Disruption]) -> list[DescheduledMove]:
    """The descheduler's evictions among ``entries`` (the ledger's :meth:`recent`)."""
    return [
        DescheduledMove(
            namespace=e.namespace,
            owner_kind=e.owner_kind,
            owner_name=e.owner_name,
            from_node=e.node,
            evicted_at=e.recorded_at,
        )
        for e in entries
        if e.kind is DisruptionKind.EVICTION and e.actor == DESCHEDULER_ACTOR and e.owner_name
    ]


def placed_pods(pods_by_node: Mapping[str, Iterable[Pod]]) -> list[PlacedPod]:
    """Every pod of ``pods_by_node`` (node → its pods) that has a controller."""
    placed: list[PlacedPod] = []
    for node, pods in pods_by_node.items():
        for pod in pods:
            view = meta(pod)
            controller = view.controller
            if controller is None or view.deleting:
                continue
            placed.append(
                PlacedPod(
                    namespace=view.namespace,
                    name=view.name,
                    owner_kind=controller.kind,
                    owner_name=controller.name,
                    node=node,
                    created_at=view.creation_timestamp,
                )
            )
    return placed
