"""Fork, revert and commit over a :class:`~.fit.ClusterSnapshot` without copying it.

Upstream's cluster snapshot (``clustersnapshot/store/delta.go``) lets a simulation ``Fork``,
try placements, then ``Revert`` (forget them) or ``Commit`` (keep them). A binpacking adds a few
template nodes to a snapshot of a thousand; a drain simulation removes one node and moves its
pods — copying the whole snapshot for each attempt would cost more than the attempt.
:class:`SnapshotJournal` makes the changes on the snapshot itself and records how to undo
each one; forks nest (a commit hands the undo records to the enclosing fork).
"""

from __future__ import annotations

from collections.abc import Callable

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta

from .filters import NodeState
from .fit import ClusterSnapshot, pod_key
from .pod_resources import Amounts

__all__ = ["SnapshotJournal"]

_Undo = Callable[[], object]


class SnapshotJournal:
    """Changes to ``snapshot`` that can be reverted (module docstring)."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._frames: list[list[_Undo]] = []

    @property
    def depth(self) -> int:
        """How many forks are open."""
        return len(self._frames)

    def fork(self) -> None:
        self._frames.append([])

    def revert(self) -> None:
        """Undo everything since the last :meth:`fork`."""
        for undo in reversed(self._frames.pop()):
            undo()

    def commit(self) -> None:
        """Keep everything since the last :meth:`fork` (still undoable by an outer fork)."""
        undone = self._frames.pop()
        if self._frames:
            self._frames[-1].extend(undone)

    def _record(self, undo: _Undo) -> None:
        if self._frames:
            self._frames[-1].append(undo)

    # ------------------------------------------------------------------------ changes

    def add_pod(self, node_name: str, pod: Pod) -> None:
        snapshot = self.snapshot
        snapshot.add_pod(node_name, pod)
        self._record(lambda: snapshot.remove_pod(node_name, pod))

    def remove_pod(self, node_name: str, pod: Pod) -> bool:
        snapshot = self.snapshot
        state = snapshot.nodes.get(node_name)
        if state is None:
            return False
        key = pod_key(pod)
        placed = next((p for p in state.pods if pod_key(p) == key), None)
        if placed is None or not snapshot.remove_pod(node_name, placed):
            return False
        self._record(lambda: snapshot.add_pod(node_name, placed))
        return True

    def add_node(self, node: Node, *, allocatable: Amounts | None = None) -> NodeState:
        snapshot = self.snapshot
        name = str(Meta(node).raw["name"])
        previous = snapshot.nodes.get(name)
        state = snapshot.add_node(node, allocatable=allocatable)
        self._record(lambda: self._put_back(name, previous))
        return state

    def add_node_like(self, source: str, name: str) -> NodeState:
        snapshot = self.snapshot
        previous = snapshot.nodes.get(name)
        state = snapshot.add_node_like(source, name)
        self._record(lambda: self._put_back(name, previous))
        return state

    def add_node_from(self, template: NodeState, name: str) -> NodeState:
        snapshot = self.snapshot
        previous = snapshot.nodes.get(name)
        state = snapshot.add_node_from(template, name)
        self._record(lambda: self._put_back(name, previous))
        return state

    def remove_node(self, name: str) -> NodeState | None:
        snapshot = self.snapshot
        state = snapshot.remove_node(name)
        if state is not None:
            self._record(lambda: snapshot.restore_node(state))
        return state

    def _put_back(self, name: str, previous: NodeState | None) -> None:
        self.snapshot.remove_node(name)
        if previous is not None:
            self.snapshot.restore_node(previous)
