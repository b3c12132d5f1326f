"""Evicting a pod inside a cycle: the limits, and the hand-over to whoever calls the API.

A cycle is a generator (:mod:`.cycle`): when a plugin decides to evict a pod it asks the shared
:class:`PodEvictor`, which checks the policy's limits first — as upstream's ``PodEvictor.EvictPod``,
each check ``count + 1 > limit``, before any API call, in the order total, node, namespace — and
then *yields* an :class:`EvictionRequest`. The driver (the loop, a test, a benchmark) performs
the eviction and sends back whether it succeeded; the plugin carries on exactly as upstream's
does after ``Evict`` returns. Counters are summed over every plugin and profile of the cycle and
start at zero each cycle.

Results (:class:`EvictionResult`) are also upstream's ``result`` label of
``descheduler_pods_evicted_total``: ``success``, ``error``, or the limit's error text. After a
node-limit error a plugin moves to its next node, after the total limit it returns, after any
other failure (a PodDisruptionBudget's 429, a pod gone) it moves to the next pod.

The coordination layer's :class:`~kubescale.coordination.descheduler_budget.EvictionBudget`
(``--coordination one-brain``: a ``LedgerBudget``): the limits count, besides this cycle's
evictions, every system's evictions in flight on the process's disruption ledger; the
per-namespace limit also bounds each workload's pods down or going (missing ones included,
result ``maximum number of evicted pods per namespace reached``), and the budget may refuse an
eviction the limits allow (no better node, a node the cluster autoscaler is removing, a
PodDisruptionBudget spent by evictions in flight) — each such refusal is "another failure".
With ``separate`` (the default here, ``UPSTREAM_BUDGET``) the counters start at zero each cycle,
as upstream's.
"""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Final

from kubescale.coordination.descheduler_budget import (
    BUDGET_IN_FLIGHT_TEXT,
    NO_BETTER_NODE_TEXT,
    NODE_REMOVED_TEXT,
    UPSTREAM_BUDGET,
    EvictionBudget,
    InFlight,
)
from kubescale.coordination.disruption_arbiter import (
    WorkloadView,
    cluster_allowance,
    workload_allowance,
)
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.pods import pod_id

__all__ = [
    "Evicting",
    "EvictionRecord",
    "EvictionRequest",
    "EvictionResult",
    "PodEvictor",
]


TOTAL_LIMIT_TEXT: Final = "maximum number of evicted pods per a descheduling cycle reached"
NODE_LIMIT_TEXT: Final = "maximum number of evicted pods per node reached"
NAMESPACE_LIMIT_TEXT: Final = "maximum number of evicted pods per namespace reached"


class EvictionResult(enum.Enum):
    EVICTED = "success"
    FAILED = "error"
    TOTAL_LIMIT = TOTAL_LIMIT_TEXT
    NODE_LIMIT = NODE_LIMIT_TEXT
    NAMESPACE_LIMIT = NAMESPACE_LIMIT_TEXT
    NO_BETTER_NODE = NO_BETTER_NODE_TEXT
    """one-brain: the fit simulation finds the pod no other node."""
    NODE_REMOVED = NODE_REMOVED_TEXT
    """one-brain: the pod's node is being drained by the cluster autoscaler."""
    BUDGET_IN_FLIGHT = BUDGET_IN_FLIGHT_TEXT
    """one-brain: a PodDisruptionBudget of the pod is spent once evictions in flight count."""

    @property
    def label(self) -> str:
        """The ``result`` label of ``descheduler_pods_evicted_total``."""
        return self.value


@dataclass(frozen=True, kw_only=True)
class EvictionRequest:
    """One eviction a plugin asks for; the driver answers ``True`` when the API evicted it."""

    pod: Pod
    node: str
    strategy: str
    profile: str
    reason: str = ""

    @property
    def namespace(self) -> str:
        return str(Meta(self.pod).raw.get("namespace", ""))

    @property
    def name(self) -> str:
        return str(Meta(self.pod).raw.get("name", ""))

    def annotation_reason(self) -> str:
        """The Eviction's ``reason`` annotation: ``triggered by <profile>/<strategy>[: why]``."""
        text = f"triggered by {self.profile}/{self.strategy}"
        return f"{text}: {self.reason}" if self.reason else text


@dataclass(frozen=True, kw_only=True)
class EvictionRecord:
    """What happened to one eviction a plugin asked for."""

    pod: str
    """``namespace/name``."""
    node: str
    namespace: str
    strategy: str
    profile: str
    result: EvictionResult
    reason: str = ""


Evicting = Generator[EvictionRequest, bool, EvictionResult]
"""A plugin's ``yield from evictor.evict(...)``: yields at most one request, returns the
result."""


@dataclass
class PodEvictor:
    """The cycle's limits and counters (module docstring); ``None`` limits are unlimited."""

    max_per_node: int | None = None
    max_per_namespace: int | None = None
    max_total: int | None = None
    total: int = 0
    per_node: dict[str, int] = field(default_factory=dict)
    per_namespace: dict[str, int] = field(default_factory=dict)
    records: list[EvictionRecord] = field(default_factory=list)
    budget: EvictionBudget = UPSTREAM_BUDGET
    """What the coordination adds to the limits (module docstring)."""
    evicted_uids: set[str] = field(default_factory=set)
    """The pods this cycle evicted (so that the ledger's copy is not counted twice)."""

    def _outside(self, node: str, namespace: str) -> InFlight:
        return self.budget.in_flight(node=node, namespace=namespace, exclude=self.evicted_uids)

    def node_limit_exceeded(self, node: str) -> bool:
        """``NodeLimitExceeded``: the node's count has reached the limit."""
        if self.max_per_node is None:
            return False
        return self.per_node.get(node, 0) + self._outside(node, "").node >= self.max_per_node

    def _limit_hit(self, node: str, namespace: str) -> EvictionResult | None:
        """Upstream's ``count + 1 > limit`` per limit, as the arbiter's
        :func:`~kubescale.coordination.disruption_arbiter.cluster_allowance` (``limit - count < 1``)
        with ``count`` this cycle's evictions plus, with one brain, those in flight."""
        outside = self._outside(node, namespace)
        checks = (
            (self.total + outside.total, self.max_total, EvictionResult.TOTAL_LIMIT),
            (
                self.per_node.get(node, 0) + outside.node,
                self.max_per_node,
                EvictionResult.NODE_LIMIT,
            ),
            (
                self.per_namespace.get(namespace, 0) + outside.namespace,
                self.max_per_namespace,
                EvictionResult.NAMESPACE_LIMIT,
            ),
        )
        for count, limit, result in checks:
            allowance = cluster_allowance(in_flight=count, limit=limit)
            if allowance is not None and allowance < 1:
                return result
        return None

    def _workload_limit_hit(self, pod: Pod) -> bool:
        """One brain: the namespace limit as the limit on the pod's workload, counting its
        missing pods too (:meth:`EvictionBudget.workload_disrupted`; ``None`` with
        ``separate``)."""
        if self.max_per_namespace is None:
            return False
        count = self.budget.workload_disrupted(pod)
        if count is None:
            return False
        view = WorkloadView(desired=0, healthy=0, in_flight=count)
        return workload_allowance(view=view, max_disrupted=self.max_per_namespace) < 1

    def evict(self, pod: Pod, *, strategy: str, profile: str, reason: str = "") -> Evicting:
        """Check the limits, then hand the eviction to the driver (module docstring)."""
        node = str(spec_of(pod).get("nodeName") or "")
        request = EvictionRequest(
            pod=pod, node=node, strategy=strategy, profile=profile, reason=reason
        )
        result = self._limit_hit(node, request.namespace)
        if result is None and self._workload_limit_hit(pod):
            result = EvictionResult.NAMESPACE_LIMIT
        if result is None and (refusal := self.budget.refuse(pod)) is not None:
            result = EvictionResult(refusal.value)
        if result is None:
            evicted = yield request
            result = EvictionResult.EVICTED if evicted else EvictionResult.FAILED
            if evicted:
                uid = Meta(pod).raw.get("uid")
                if uid:
                    self.evicted_uids.add(str(uid))
                self.total += 1
                self.per_node[node] = self.per_node.get(node, 0) + 1
                self.per_namespace[request.namespace] = (
                    self.per_namespace.get(request.namespace, 0) + 1
                )
        self.records.append(
            EvictionRecord(
                pod=pod_id(pod),
                node=node,
                namespace=request.namespace,
                strategy=strategy,
                profile=profile,
                result=result,
                reason=reason,
            )
        )
        return result
