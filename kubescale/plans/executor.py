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
   the plans a run executed) are told the intent and that outcome.

With ``dry_run`` nothing is sent and no event queued: each intent is written as one line
(:func:`~.intents.describe`) to ``sink`` -- by default a log line of the ``plans`` logger, on
stderr with the process's other logs (``simulate`` keeps stdout for its report) -- and answered
done (:attr:`Applied.dry_run`), as
upstream's descheduler answers an eviction in dry-run mode.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
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

    async def execute(self, intent: Intent, *, now: datetime) -> Applied:
        """Apply one intent (module docstring)."""
        if isinstance(intent, Event):
            return self.note(intent)
        refused = self._not_applied(intent)
        if refused is not None:
            return refused
        if isinstance(intent, ResizeNodeGroup | DeleteNodes):
            return self._counted(intent, await self._node_group_write(intent))
        result, stored = await self._write(intent, now=now)
        return self._counted(intent, Applied(result, stored=stored))

    def _counted(self, intent: Intent, applied: Applied) -> Applied:
        self._count(intent, applied.outcome.value)
        return applied

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
        refused = self._not_applied(intent)
        if refused is not None:
            return refused
        if self.events is not None:
            self.events.event(
                intent.involved, type=intent.type, reason=intent.reason, message=intent.message
            )
        self._count(intent, WriteOutcome.DONE.value)
        return Applied(_DONE)

    def _not_applied(self, intent: Intent) -> Applied | None:
        """A dry run's answer (the intent printed), or the refusal after the Lease is lost."""
        if self.dry_run:
            self.sink(DRY_RUN_PREFIX + describe(intent))
            self._count(intent, "dry-run")
            return Applied(_DONE, dry_run=True)
        if self._gate_open():
            return None
        self._count(intent, "refused")
        error = NotLeaderError(
            f"{describe(intent)} refused: this replica does not hold the leader Lease"
        )
        return Applied(WriteResult(WriteOutcome.REFUSED, error))

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

    def _count(self, intent: Intent, outcome: str) -> None:
        self.applied += 1
        if self.metrics is not None:
            self.metrics.intents.labels(intent.actor, type(intent).__name__, outcome).inc()
            for observer in self.metrics.observers:
                observer(intent, outcome)


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
