"""The descheduler's decision: each eviction its cycle asks for, as intents.

:meth:`CycleDecision.decide` turns a :func:`~.descheduling_cycle.descheduling_cycle` (which
yields :class:`~.framework.eviction.EvictionRequest` and is told whether each counts as done)
into a :data:`~kubescale.plans.executor.Decision`: an
:class:`~kubescale.plans.intents.Evict` intent per request (``policy/v1`` Eviction with
the annotations ``reason`` and ``requested-by`` and the policy's ``gracePeriodSeconds``), and on
its outcome the events (a Normal event, reason = the strategy, on success; a Warning
``EvictionFailed`` with ``evictionFailureEventNotification`` on a failure), the eviction memory
the extender reads, and the cycle's answer (:mod:`.descheduler_loop` says which outcome counts).
No client: the :class:`~kubescale.plans.executor.PlanExecutor` applies the intents, or
prints them with ``--dry-run`` (answered done: "Evicted pod in dry run mode", no event, nothing
remembered, as upstream).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.coordination.descheduler_budget import ACTOR
from kubescale.coordination.disruption_ledger import WriteOutcome
from kubescale.coordination.eviction_memory import EvictionRecorder
from kubescale.kube.errors import KubeApiError
from kubescale.objects.pod import Pod
from kubescale.plans.executor import Decision
from kubescale.plans.intents import Event, Evict
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy

from .descheduling_cycle import Cycle, CycleReport
from .framework.eviction import EvictionRequest

__all__ = ["EVENT_COMPONENT", "REQUESTED_BY", "CycleDecision", "TimelineReport"]

log = component_logger("descheduler")

EVENT_COMPONENT: Final = "sigs.k8s.io/descheduler"
REQUESTED_BY: Final = "kubescale-descheduler"

TimelineReport = tuple[str, str, str]
"""``(kind, subject, detail)`` (:class:`kubescale.runtime.component.ReportingLoop`)."""


class CycleDecision:
    """The cycle's evictions as intents (module docstring); keeps what a cycle reports."""

    def __init__(self, *, policy: DeschedulerPolicy, memory: EvictionRecorder | None) -> None:
        self.policy = policy
        self.memory = memory
        self.last_dry_run: list[EvictionRequest] = []
        """The evictions the last dry-run cycle would have made, in order."""
        self.reports: list[TimelineReport] = []
        """What the cycles did, until the loop drains them (a simulation's timeline)."""

    def decide(self, cycle: Cycle, now: datetime) -> Decision[CycleReport]:
        """The cycle as a decision: each eviction it asks for becomes intents, and the cycle
        is told whether it counts as done."""
        try:
            request = next(cycle)
            while True:
                evicted = yield from self.evict(request, now)
                request = cycle.send(evicted)
        except StopIteration as stop:
            report: CycleReport = stop.value
            return report

    def evict(self, request: EvictionRequest, now: datetime) -> Decision[bool]:
        """One eviction the cycle asks for: the intents, and whether it counts as done."""
        fields: dict[str, Any] = {
            "pod": f"{request.namespace}/{request.name}",
            "node": request.node,
            "strategy": request.strategy,
            "profile": request.profile,
        }
        result = yield Evict(
            actor=ACTOR,
            pod=request.pod,
            grace_period_seconds=self.policy.grace_period_seconds,
            annotations={"reason": request.annotation_reason(), "requested-by": REQUESTED_BY},
            reason=request.annotation_reason(),  # names the profile and the strategy
        )
        if result.dry_run:
            self.last_dry_run.append(request)
            log.info("Evicted pod in dry run mode", extra={"fields": fields})
            self.reports.append(
                (
                    "descheduler-dry-run",
                    f"{request.namespace}/{request.name}",
                    f"would evict from {request.node}: {request.annotation_reason()}",
                )
            )
            return True
        err = result.error
        if result.maybe_ours and result.outcome is not WriteOutcome.DONE:
            log.warning(
                "eviction outcome unknown; counted as done",
                extra={"fields": {**fields, "error": str(err)}},
            )
            yield from self._evicted(request, now)
            return True
        if err is not None:  # refused, or gone (404, the uid precondition's 409): a failure
            message = err.message if isinstance(err, KubeApiError) else str(err)
            code = err.code if isinstance(err, KubeApiError) else None
            log.error(
                "Error evicting pod", extra={"fields": {**fields, "code": code, "error": message}}
            )
            yield from self._failed(request, message or str(err))
            return False
        log.info("Evicted pod", extra={"fields": fields})
        yield from self._evicted(request, now)
        return True

    def _evicted(self, request: EvictionRequest, now: datetime) -> Decision[None]:
        if self.memory is not None:
            self.memory.record(request.pod, request.node, now)
        self.reports.append(
            (
                "descheduler-eviction",
                f"{request.namespace}/{request.name}",
                f"from {request.node}: {request.annotation_reason()}",
            )
        )
        yield Event(
            actor=ACTOR,
            involved=_with_kind(request.pod),
            type="Normal",
            reason=request.strategy,
            message=f"pod eviction from {request.node} node by {EVENT_COMPONENT}",
        )

    def _failed(self, request: EvictionRequest, message: str) -> Decision[None]:
        self.reports.append(
            (
                "descheduler-eviction-failed",
                f"{request.namespace}/{request.name}",
                f"from {request.node}: {message}",
            )
        )
        if not self.policy.eviction_failure_event_notification:
            return
        yield Event(
            actor=ACTOR,
            involved=_with_kind(request.pod),
            type="Warning",
            reason="EvictionFailed",
            message=f"pod eviction from {request.node} node by {EVENT_COMPONENT} failed: {message}",
        )


def _with_kind(pod: Pod) -> dict[str, Any]:
    """Informer objects may lack apiVersion/kind; the event's involvedObject needs them."""
    return {"apiVersion": "v1", "kind": "Pod", **pod}
