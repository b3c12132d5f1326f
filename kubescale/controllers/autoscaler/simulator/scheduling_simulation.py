"""Placing pods in a simulated cluster: upstream's ``HintingSimulator.TrySchedulePods``.

Every pod goes through the one "would this pod fit" implementation
(:meth:`kubescale.scheduling.fit.ClusterSnapshot.filter`); a placement is recorded in a
:class:`~kubescale.scheduling.snapshot_journal.SnapshotJournal` so the caller can revert it.

As upstream's simulator does:

* a pod is first tried on its **hint** (the node a pod of the same kind went to last), then on
  every candidate node, the scan starting at the last node that took a pod, wrapping around
  (``SchedulePodOnAnyNodeMatching`` starting at ``lastIndex``);
* once a pod of an equivalence group fits nowhere, the others of its group are not tried
  (``similarPodsScheduling``: capacity only shrinks during a simulation);
* ``break_on_failure`` stops at the first pod that fits nowhere (the drain simulation).

A cheap resource check (free pods, cpu, memory against the request) runs before the full
filter: a full node is rejected without building topology state. It decides nothing the
filter would decide differently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubescale.controllers.autoscaler.simulator.equivalence import equivalence_key
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta
from kubescale.scheduling.filters import FilterStatus, NodeState
from kubescale.scheduling.fit import ClusterSnapshot, PodInfo, PreFilterState
from kubescale.scheduling.snapshot_journal import SnapshotJournal

__all__ = ["Placement", "SchedulingSimulator", "TryScheduleResult", "obviously_full"]


@dataclass(frozen=True)
class Placement:
    pod: Pod
    node: str


@dataclass
class TryScheduleResult:
    scheduled: list[Placement] = field(default_factory=list)
    unschedulable: list[Pod] = field(default_factory=list)


def obviously_full(requests: Mapping[str, int], node: NodeState) -> bool:
    """The node has no room for the pod's cpu, memory or one more pod (NodeResourcesFit would
    reject it); ``False`` when in doubt."""
    allocatable, requested = node.allocatable, node.requested
    if len(node.pods) + 1 > allocatable.get("pods", 0):
        return True
    for name in ("cpu", "memory"):
        wanted = requests.get(name, 0)
        if wanted > 0 and wanted > allocatable.get(name, 0) - requested.get(name, 0):
            return True
    return False


class SchedulingSimulator:
    """Tries pods on the journal's snapshot (module docstring)."""

    def __init__(self, journal: SnapshotJournal) -> None:
        self.journal = journal
        self.hints: dict[tuple[str, str], str] = {}
        """Pod (namespace, name) → the node it went to last; kept across calls."""

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self.journal.snapshot

    def check(
        self, info: PodInfo, node_name: str, state: PreFilterState | None = None
    ) -> FilterStatus | None:
        """The node's verdict for the pod (``None``: it fits)."""
        return self.journal.snapshot.filter(info, node_name, state)

    def fits(self, info: PodInfo, node_name: str) -> bool:
        snapshot = self.journal.snapshot
        if obviously_full(info.requests, snapshot.nodes[node_name]):
            return False
        return snapshot.filter(info, node_name, snapshot.prefilter(info)) is None

    def find_node(
        self, info: PodInfo, candidates: Sequence[str], start: int = 0
    ) -> tuple[int, str] | None:
        """The first candidate (scanning from ``start``, wrapping) where the pod fits."""
        snapshot = self.journal.snapshot
        count = len(candidates)
        if not count:
            return None
        prefilter = snapshot.prefilter(info)
        nodes = snapshot.nodes
        for offset in range(count):
            index = (start + offset) % count
            name = candidates[index]
            state = nodes.get(name)
            if state is None or obviously_full(info.requests, state):
                continue
            if snapshot.filter(info, name, prefilter) is None:
                return index, name
        return None

    def try_schedule_pods(
        self,
        pods: Iterable[Pod],
        *,
        candidates: Sequence[str] | None = None,
        accept: Callable[[str], bool] | None = None,
        break_on_failure: bool = False,
    ) -> TryScheduleResult:
        """Place ``pods`` in order on ``candidates`` (default: every node, sorted by name;
        ``accept`` filters them), recording each placement in the journal."""
        snapshot = self.journal.snapshot
        names = list(candidates) if candidates is not None else sorted(snapshot.nodes)
        if accept is not None:
            names = [n for n in names if accept(n)]
        allowed = set(names)
        result = TryScheduleResult()
        similar_failed: set[tuple[str, str]] = set()
        last = 0
        for pod in pods:
            key = equivalence_key(pod)
            if key is not None and key in similar_failed:
                result.unschedulable.append(pod)
                continue
            info = snapshot.pod_info(pod)
            meta = Meta(pod).raw
            pod_ref = (str(meta.get("namespace", "")), str(meta.get("name", "")))
            hint = self.hints.get(pod_ref)
            placed: str | None = None
            if (
                hint is not None
                and hint in allowed
                and hint in snapshot.nodes
                and self.fits(info, hint)
            ):
                placed = hint
            if placed is None:
                found = self.find_node(info, names, last)
                if found is not None:
                    last, placed = found
            if placed is None:
                result.unschedulable.append(pod)
                self.hints.pop(pod_ref, None)
                if break_on_failure:
                    break
                if key is not None:
                    similar_failed.add(key)
                continue
            self.journal.add_pod(placed, pod)
            self.hints[pod_ref] = placed
            result.scheduled.append(Placement(pod=pod, node=placed))
        return result

    def forget_hints(self, live: Iterable[tuple[str, str]]) -> None:
        """Drop hints of pods that are gone (keeps the map as small as the pending pods)."""
        keep = set(live)
        for key in [k for k in self.hints if k not in keep]:
            del self.hints[key]
