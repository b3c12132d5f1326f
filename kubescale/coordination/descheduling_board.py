"""What the descheduler and the scheduler extender of one process share.

The two are separate components (each has its on/off flag) but, in one process, work
together: the extender refuses the node an owner's pod was just evicted from, and judges
over- and under-utilization by the numbers the descheduler read. The
:class:`DeschedulingBoard` of a process — the coordination layer's
(:attr:`kubescale.coordination.brain.Brain.board`), whichever component is built first creates
it — carries that, in whichever order the components were
built and whether or not the other one runs:

* the extender puts its :class:`~.eviction_memory.EvictionMemory` on the board; every
  eviction the descheduler makes is recorded there (:meth:`DeschedulingBoard.record`; nothing
  happens without an extender);
* the extender's cache subscribes to usage (:meth:`DeschedulingBoard.subscribe`); the
  descheduler publishes its smoothed NodeMetrics (every cycle, and every 5 s from its metrics
  collector) and its Prometheus values (every cycle).

The board lives in the process: the eviction memory is the evicting replica's. With several
replicas behind the Service, kube-scheduler's call may reach a replica that did not evict
(``docs/extender.md``, "One process").
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from kubescale.objects.pod import Pod

from .eviction_memory import EvictionMemory

__all__ = ["DeschedulingBoard", "UsageReceiver"]


class UsageReceiver(Protocol):
    """Who keeps the descheduler's usage readings (the extender's cache)."""

    def set_node_metrics(self, usage: Mapping[str, Mapping[str, int]] | None) -> None: ...

    def set_metric_values(self, query: str, values: Mapping[str, float] | None) -> None: ...


class DeschedulingBoard:
    """The descheduler's and the extender's shared state in one process (module docstring)."""

    def __init__(self) -> None:
        self.memory: EvictionMemory | None = None
        self._receivers: list[UsageReceiver] = []

    def subscribe(self, receiver: UsageReceiver) -> None:
        self._receivers.append(receiver)

    def record(self, pod: Pod, node: str, now: datetime) -> None:
        """An eviction the descheduler made (the :class:`~.eviction_memory.EvictionMemory`
        interface)."""
        if self.memory is not None:
            self.memory.record(pod, node, now)

    def publish_node_metrics(self, usage: Mapping[str, Mapping[str, int]] | None) -> None:
        for receiver in self._receivers:
            receiver.set_node_metrics(usage)

    def publish_metric_values(
        self, values: Mapping[str, Mapping[str, float]], *, queries: frozenset[str]
    ) -> None:
        """Each of ``queries``' latest values; a query without an answer this time is dropped
        (the descheduler's plugin failed this cycle, the extender does not judge by it)."""
        for receiver in self._receivers:
            for query in sorted(queries):
                receiver.set_metric_values(query, values.get(query))

    def publish_usage(
        self,
        node_usage: Mapping[str, Mapping[str, int]] | None,
        metric_values: Mapping[str, Mapping[str, float]],
        *,
        queries: frozenset[str] = frozenset(),
    ) -> None:
        """A cycle's readings (the descheduler loop's ``usage_listener``)."""
        if node_usage is not None:
            self.publish_node_metrics(node_usage)
        self.publish_metric_values(metric_values, queries=queries | frozenset(metric_values))
