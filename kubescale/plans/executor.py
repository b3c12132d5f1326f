"""The one executor: applies a plan, or drives a decision that needs each step's outcome.

For every intent, in order (the package docstring says why):

1. **The write gate.** A client gated on the leader Lease (``runtime.leader_client``) refuses
   a write once this replica stops leading; the executor asks the gate itself before each
   intent, so nothing is sent — and no eviction is recorded as "maybe done" — after the Lease
   was lost: the intent's result is a refusal carrying
   :class:`~kubescale.kube.errors.NotLeaderError`, as is every later intent's.
2. **The write.** Evictions and resizes go through the disruption ledger
   (:func:`~kubescale.coordination.disruption_ledger.evict_pod`, :func:`~kubescale.kube.
   disruption_ledger.resize_pod`), which records each done or maybe-done disruption for every
   system's budget. Any other write's error is classified the same way
   (:func:`~kubescale.coordination.disruption_ledger.write_outcome`): no answer or a 5xx is
   :attr:`~kubescale.coordination.disruption_ledger.WriteOutcome.UNKNOWN`, and
   :attr:`Applied.counts` is true for it — a write whose outcome is unknown counts as done
   until proven otherwise (kube-apiserver answers 504 after etcd committed when its deadline
   passes). A node group write (:class:`~.intents.ResizeNodeGroup`,
   :class:`~.intents.DeleteNodes`) goes through the system's cloud provider port
   (:mod:`.node_groups`), whose error says how it counts and is kept as
   :attr:`Applied.failure`; a ConfigMap write (:class:`~.intents.WriteConfigMap`) is a GET
   then an update or a create (:mod:`.config_maps`).
3. **Events** go on the system's :class:`~kubescale.kube.events.EventRecorder` (a bounded
   queue, written in the background on the same gated client).
4. **The metric** ``kubescale_plan_intents_total{actor, intent, outcome}`` counts it, the same
   way for every system (``outcome``: ``done``, ``unknown``, ``gone``, ``refused``,
   ``dry-run``), and the registry's observers (:func:`observe_plans`: ``simulate``'s journal of
   the plans a run executed) are told the intent and that outcome as it is answered -- or,
   within :meth:`PlanExecutor.in_issue_order`, **in the order the intents were issued**: a
   decision driven by several writers at once (the recommender's checkpoint pass) has its
   writes answered in whatever order the server and the event loop finish them (asyncio's loop
   and uvloop differ), so there an intent answered early is told only once every intent issued
   before it has been (:class:`IssueOrder`).

With ``dry_run`` nothing is sent and no event queued: each intent is written as one line
(:func:`~.intents.describe`) to ``sink`` -- by default a log line of the ``plans`` logger, on
stderr with the process's other logs (``simulate`` keeps stdout for its report) -- and answered
done (:attr:`Applied.dry_run`), as
upstream's descheduler answers an eviction in dry-run mode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar

from prometheus_client import CollectorRegistry, Counter

from kubescale.base.logs import component_logger
from kubescale.base.per_key import PerKey
from kubescale.coordination.disruption_ledger import (
    DisruptionLedger,
    WriteOutcome,
    WriteResult,
    evict_pod,
    resize_pod,
    write_outcome,
)
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError, NotLeaderError
from kubescale.kube.events import EventRecorder
from kubescale.plans.config_maps import write_config_map
from kubescale.plans.intents import (
    DeleteNodes,
    DeleteObject,
    Event,
    Evict,
    Intent,
    PatchObject,
    PatchOrCreate,
    Plan,
    Resize,
    ResizeNodeGroup,
    Scale,
    Taint,
    Untaint,
    WriteConfigMap,
    WriteStatus,
    describe,
)
from kubescale.plans.node_groups import NodeGroupWriteError, NodeGroupWrites
from kubescale.plans.node_taints import node_taint

__all__ = [
    "DRY_RUN_PREFIX",
    "Applied",
    "Decision",
    "IssueOrder",
    "PlanExecutor",
    "PlanMetrics",
    "PlanObserver",
    "collect_plan",
    "observe_plans",
]

log = component_logger("plans")

R = TypeVar("R")

DRY_RUN_PREFIX: Final = "dry-run "
"""What starts each line ``--dry-run`` prints (then :func:`~.intents.describe`)."""


@dataclass(frozen=True)
class Applied:
    """What became of one intent: the write's outcome and error, and whether it was a dry run
    (nothing sent, answered done)."""

    result: WriteResult
    dry_run: bool = False
    stored: Mapping[str, Any] | None = None
    """The object as the API server answered a write that returns one (a status write, a
    scale), when done; ``None`` otherwise and in a dry run."""
    failure: NodeGroupWriteError | None = None
    """A node group write's error (:mod:`.node_groups`), as its port raised it."""

    @property
    def outcome(self) -> WriteOutcome:
        return self.result.outcome

    @property
    def error(self) -> KubeError | None:
        return self.result.error

    @property
    def counts(self) -> bool:
        """Done, maybe done, or the object is gone: everything but a refusal."""
        return self.result.counts

    @property
    def maybe_ours(self) -> bool:
        return self.result.maybe_ours


Decision = Generator[Intent, Applied, R]
"""A decision that needs outcomes: yields an intent, receives its :class:`Applied`, returns
what the loop keeps of the iteration."""

_DONE = WriteResult(WriteOutcome.DONE)


PlanObserver = Callable[[Intent, str], None]
"""Told each intent an executor applied (or printed, or refused) and its outcome, the
``outcome`` label of ``kubescale_plan_intents_total``."""


class PlanMetrics:
    """``kubescale_plan_intents_total`` on one registry (shared by every system's executor),
    and the registry's :data:`PlanObserver` s."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.observers: list[PlanObserver] = []
        self.intents = Counter(
            "kubescale_plan_intents",
            "Intents of the systems' plans applied (or printed by --dry-run), by system, kind "
            "of intent and outcome (done, unknown: counted as done, gone, refused, dry-run).",
            ["actor", "intent", "outcome"],
            registry=registry,
        )


_plan_metrics: PerKey[CollectorRegistry, PlanMetrics] = PerKey(PlanMetrics)
"""The one :class:`PlanMetrics` of a registry (made on first use)."""


def observe_plans(registry: CollectorRegistry, observer: PlanObserver) -> None:
    """Tell ``observer`` every intent of every executor on ``registry`` (every system's, built
    on one runtime) with its outcome, as the metric counts it: the one hook through which
    ``simulate`` records the plans its systems executed, without touching their loops."""
    _plan_metrics(registry).observers.append(observer)


def _log_line(line: str) -> None:
    log.info(line)


class IssueOrder:
    """Tells what became of intents in the order they were issued, whatever the order of
    their answers: each intent takes a turn (:meth:`issue`) before it is applied and gives it
    back (:meth:`answered`) with what to tell, or nothing (cancelled, or failed with an error
    that is not a write's outcome); what was answered is told once every earlier turn is back.
    Holds at most one entry per intent in flight."""

    def __init__(self, tell: Callable[[Intent, str], None]) -> None:
        self._tell = tell
        self._issued = 0
        self._next = 0
        self._answered: dict[int, tuple[Intent, str] | None] = {}

    def issue(self) -> int:
        """The next turn."""
        turn = self._issued
        self._issued += 1
        return turn

    def answered(self, turn: int, told: tuple[Intent, str] | None) -> None:
        """``turn`` is back with ``told``; tell it and every later one already back, in turn
        order, once no earlier turn is out."""
        self._answered[turn] = told
        while self._next in self._answered:
            item = self._answered.pop(self._next)
            self._next += 1
            if item is not None:
                self._tell(*item)

    @property
    def in_flight(self) -> int:
        """Turns issued and not yet told (answered late ones included)."""
        return self._issued - self._next


class PlanExecutor:
    """Applies plans and drives decisions for one system (module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        ledger: DisruptionLedger,
        events: EventRecorder | None,
        registry: CollectorRegistry | None = None,
        dry_run: bool = False,
        sink: Callable[[str], None] = _log_line,
        node_groups: NodeGroupWrites | None = None,
    ) -> None:
        self.client = client
        self.node_groups = node_groups
        """The cloud provider's node groups (the cluster autoscaler's), for
        :class:`~.intents.ResizeNodeGroup` and :class:`~.intents.DeleteNodes`."""
        self.ledger = ledger
        self.events = events
        self.metrics = _plan_metrics(registry) if registry is not None else None
        """``kubescale_plan_intents_total`` of ``registry`` (one per registry, shared by every
        system's executor); none without a registry."""
        self.dry_run = dry_run
        self.sink = sink
        self.applied = 0
        """Intents applied (or printed) since start."""
        self.order = IssueOrder(self._tell)
        """Within :meth:`in_issue_order`, the registry's observers are told in issue order."""
        self._ordered = 0

    async def apply(self, plan: Iterable[Intent], *, now: datetime) -> list[Applied]:
        """Apply each intent of ``plan`` in order; their results, in the same order."""
        return [await self.execute(intent, now=now) for intent in plan]

    async def drive(self, decision: Decision[R], *, now: datetime) -> R:
        """Run ``decision``: apply each intent it yields and send it the result; its return
        value."""
        try:
            intent = next(decision)
            while True:
                intent = decision.send(await self.execute(intent, now=now))
        except StopIteration as stop:
            result: R = stop.value
            return result

    def _gate_open(self) -> bool:
        gate = self.client.write_gate
        return gate is None or gate()

    @contextlib.contextmanager
    def in_issue_order(self) -> Iterator[None]:
        """While inside, observers are told of intents in the order they were issued, whatever
        the order of their answers (module docstring): around writers run at once, which
        have all ended when it is left."""
        self._ordered += 1
        try:
            yield
        finally:
            self._ordered -= 1

    async def execute(self, intent: Intent, *, now: datetime) -> Applied:
        """Apply one intent (module docstring)."""
        if isinstance(intent, Event):
            return self.note(intent)
        if not self._ordered and not self.order.in_flight:
            applied, outcome = await self._apply(intent, now=now)
            self._tell(intent, outcome)
            return applied
        turn = self.order.issue()
        told: tuple[Intent, str] | None = None
        try:
            applied, outcome = await self._apply(intent, now=now)
            told = (intent, outcome)
            return applied
        finally:  # also when cancelled or failed: later turns are not held back
            self.order.answered(turn, told)

    async def _apply(self, intent: Intent, *, now: datetime) -> tuple[Applied, str]:
        """The intent applied (or printed, or refused) and counted; with its ``outcome``."""
        refused = self._not_applied(intent)
        if refused is not None:
            return refused
        if isinstance(intent, ResizeNodeGroup | DeleteNodes):
            applied = await self._node_group_write(intent)
        else:
            result, stored = await self._write(intent, now=now)
            applied = Applied(result, stored=stored)
        return self._counted(intent, applied, applied.outcome.value)

    def _counted(self, intent: Intent, applied: Applied, outcome: str) -> tuple[Applied, str]:
        """Count ``intent`` in the metric; ``applied`` and ``outcome`` (its label)."""
        self.applied += 1
        if self.metrics is not None:
            self.metrics.intents.labels(intent.actor, type(intent).__name__, outcome).inc()
        return applied, outcome

    def _tell(self, intent: Intent, outcome: str) -> None:
        """The registry's observers (in issue order, by :attr:`order`, when ordered)."""
        if self.metrics is not None:
            for observer in self.metrics.observers:
                observer(intent, outcome)

    async def _node_group_write(self, intent: ResizeNodeGroup | DeleteNodes) -> Applied:
        """Through the node group port; its error kept as :attr:`Applied.failure`."""
        port = self.node_groups
        if port is None:
            raise TypeError(f"no node group port for {describe(intent)}")
        try:
            if isinstance(intent, ResizeNodeGroup):
                await port.resize_node_group(intent)
            else:
                await port.delete_nodes(intent)
        except NodeGroupWriteError as err:
            return Applied(WriteResult(err.outcome), failure=err)
        return Applied(_DONE)

    def note(self, intent: Event) -> Applied:
        """Queue an event on the recorder (no await: loops that are not yet plans call this
        where they decide an event), with the same gate, dry run and metric as any intent."""
        if not self._ordered and not self.order.in_flight:
            applied, outcome = self._note(intent)
            self._tell(intent, outcome)
            return applied
        turn = self.order.issue()
        told: tuple[Intent, str] | None = None
        try:
            applied, outcome = self._note(intent)
            told = (intent, outcome)
            return applied
        finally:
            self.order.answered(turn, told)

    def _note(self, intent: Event) -> tuple[Applied, str]:
        refused = self._not_applied(intent)
        if refused is not None:
            return refused
        if self.events is not None:
            self.events.event(
                intent.involved, type=intent.type, reason=intent.reason, message=intent.message
            )
        return self._counted(intent, Applied(_DONE), WriteOutcome.DONE.value)

    def _not_applied(self, intent: Intent) -> tuple[Applied, str] | None:
        """A dry run's answer (the intent printed), or the refusal after the Lease is lost."""
        if self.dry_run:
            self.sink(DRY_RUN_PREFIX + describe(intent))
            return self._counted(intent, Applied(_DONE, dry_run=True), "dry-run")
        if self._gate_open():
            return None
        error = NotLeaderError(
            f"{describe(intent)} refused: this replica does not hold the leader Lease"
        )
        return self._counted(intent, Applied(WriteResult(WriteOutcome.REFUSED, error)), "refused")

    async def _write(
        self, intent: Intent, *, now: datetime
    ) -> tuple[WriteResult, Mapping[str, Any] | None]:
        match intent:
            case Evict():
                evicted = await evict_pod(
                    self.client,
                    self.ledger,
                    intent.pod,
                    now=now,
                    grace_period_seconds=intent.grace_period_seconds,
                    actor=intent.actor,
                    annotations=intent.annotations,
                )
                return evicted, None
            case Resize():
                resized = await resize_pod(
                    self.client,
                    self.ledger,
                    intent.pod,
                    intent.patches,
                    now=now,
                    actor=intent.actor,
                )
                return resized, None
            case PatchObject():
                target = intent.target
                return await self._guarded(
                    self.client.patch(
                        target.resource,
                        target.name,
                        intent.patch,
                        namespace=target.namespace,
                        patch_type=intent.patch_type,
                        subresource=intent.subresource,
                    )
                )
            case PatchOrCreate():
                return await self._guarded(self._patch_or_create(intent))
            case DeleteObject():
                target = intent.target
                return await self._guarded(
                    self.client.delete(target.resource, target.name, namespace=target.namespace)
                )
            case Scale():
                target = intent.target
                return await self._guarded(
                    self.client.scale(
                        target.resource,
                        target.name,
                        namespace=target.namespace,
                        replicas=intent.replicas,
                    )
                )
            case Taint() | Untaint():
                return await self._guarded(node_taint(self.client, intent))
            case WriteStatus():
                return await self._guarded(self.client.update_status(intent.resource, intent.body))
            case WriteConfigMap():
                return await self._guarded(write_config_map(self.client, intent))
        raise TypeError(f"not a write intent: {intent!r}")

    async def _patch_or_create(self, intent: PatchOrCreate) -> dict[str, Any]:
        target = intent.target
        try:
            return await self.client.patch(
                target.resource,
                target.name,
                intent.patch,
                namespace=target.namespace,
                patch_type=intent.patch_type,
            )
        except KubeApiError as err:
            if not err.not_found:
                raise
        return await self.client.create(target.resource, intent.body, namespace=target.namespace)

    async def _guarded(
        self, write: Awaitable[dict[str, Any] | None]
    ) -> tuple[WriteResult, Mapping[str, Any] | None]:
        """The write's outcome; a write with nothing to do (``None``: a node already tainted,
        or gone) is done."""
        try:
            stored = await write
        except KubeError as err:
            return WriteResult(write_outcome(err), err), None
        return _DONE, stored


def collect_plan(
    decision: Decision[R], answer: Callable[[Intent], Applied] | None = None
) -> tuple[Plan, R]:
    """Run ``decision`` without an executor, answering each intent done as a dry run — or
    with ``answer(intent)`` when given (a decision test's chosen outcomes): the plan it makes
    for its snapshot (``simulate``/``report``/tests read plans this way) and its result."""
    plan: Plan = []
    try:
        intent = next(decision)
        while True:
            plan.append(intent)
            reply = Applied(_DONE, dry_run=True) if answer is None else answer(intent)
            intent = decision.send(reply)
    except StopIteration as stop:
        result: R = stop.value
        return plan, result
