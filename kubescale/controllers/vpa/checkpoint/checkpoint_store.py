"""``VerticalPodAutoscalerCheckpoint`` objects: written each iteration, loaded at start, GC'd.

Upstream ``checkpoint/checkpoint_writer.go`` (``StoreCheckpoints``), ``utils/vpa/api.go``
(``CreateOrUpdateVpaCheckpoint``) and ``input/cluster_feeder.go`` (``InitFromCheckpoints``,
``GarbageCollectCheckpoints``):

* **Write**: VPAs least recently checkpointed first (ties by namespace/name, where upstream's
  unstable sort is arbitrary), skipping VPAs whose ``FetchingHistory`` condition is True; before
  each VPA the deadline (``--checkpoints-timeout`` from the start of the iteration) is checked
  and no VPA is started once it has passed (writes under way finish) — unless fewer than
  ``--min-checkpoints`` checkpoints have been started in this pass: upstream's
  ``StoreCheckpoints(ctx, now, minCheckpoints)`` (VPA <= 1.3, ``checkpoint_writer.go``) checks
  ``ctx.Err() != nil && minCheckpoints <= 0`` before each VPA and decrements ``minCheckpoints``
  once per container checkpoint it tries (written or failed), so a loop whose timeout has
  already passed still moves the oldest VPAs forward and none starves. (Upstream 1.4 deprecated
  the flag in favour of concurrent writers, kubernetes/autoscaler#7992; ``--min-checkpoints 0``
  is exactly that rule.) Each container's
  checkpoint (the model's v3 object,
  :meth:`~kubescale.controllers.vpa.model.cluster_state.ClusterState.checkpoints`, each VPA's
  live containers from the model's kept index, not a walk over every pod per pass) is
  written as a JSON patch ``[{"op": "replace", "path": "/status", "value": ...}]``; a 404
  creates it instead. A VPA's
  "checkpoint written" time moves to now after each successful write.
* **Concurrency** (deliberate difference): upstream writes one checkpoint at a time, so a pass
  over 10,000 containers is 10,000 round trips end to end. Here up to ``write_concurrency``
  (:data:`WRITE_CONCURRENCY`) checkpoints are written at once, taken strictly in the pass's
  order — the VPAs the deadline leaves out are still the most recently checkpointed ones.
* **Order** (issue 30): the writes are issued in one order whatever the order their answers
  come in, and so whatever the order the objects' events reached the recommender's caches or
  the event loop finishes requests (asyncio and uvloop differ): upstream's
  ``getVpasToCheckpoint`` (``checkpoint_writer.go``) sorts the VPAs by the time of their last
  checkpoint, oldest first (``sort.Slice`` on ``CheckpointWritten``), ties broken here by
  namespace/name (upstream's unstable sort leaves them arbitrary); within a VPA its containers
  by name. The writers share one sequence of writes (:meth:`CheckpointPass.work`): whichever
  writer is free issues the next one, so the n-th write issued is the same on every run; the
  executor tells its observers (``simulate``'s plan journal) in that issue order.
* **Load** (start-up, ``--storage`` not ``prometheus``): every cached checkpoint outside the
  ignored namespaces is offered to the model, which keeps those of VPAs it knows (so the VPAs
  are loaded first) and refuses other versions than ``v3``.
* **Garbage collection** (every ``--checkpoints-gc-interval``): checkpoints outside the ignored
  namespaces whose ``spec.vpaObjectName`` names no existing VPA are deleted.

Checkpoints are read from an informer (upstream's checkpoint lister). What to write and what to
delete is decided without the client: a :class:`CheckpointPass` worker
(:meth:`CheckpointPass.work`) and :func:`orphan_deletions` are decisions
(:data:`~kubescale.plans.executor.Decision`: generators that yield intents and receive each
one's :class:`~kubescale.plans.executor.Applied`), applied by the recommender's one plan executor
(:mod:`kubescale.plans`): a :class:`~kubescale.plans.intents.PatchOrCreate` per checkpoint (the
JSON patch, the object to create on a 404) and a :class:`~kubescale.plans.intents.DeleteObject`
per orphan -- the executor checks the leader Lease before each and counts it in
``kubescale_plan_intents_total``. The recommender's iteration decision
(:mod:`kubescale.controllers.vpa.recommender.recommender_decision`) is made of them;
:meth:`CheckpointStore.store` and :meth:`CheckpointStore.garbage_collect` drive them alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.model.cluster_state import ClusterState, LiveContainers
from kubescale.coordination.disruption_ledger import DisruptionLedger, WriteOutcome
from kubescale.kube.client import KubeClient
from kubescale.kube.informer import Informer
from kubescale.kube.resources import VPA_CHECKPOINTS
from kubescale.objects.views import meta, spec_of, status_of
from kubescale.objects.vpa_checkpoint import VerticalPodAutoscalerCheckpoint
from kubescale.plans.executor import Applied, Decision, PlanExecutor
from kubescale.plans.intents import DeleteObject, ObjectRef, PatchOrCreate

__all__ = [
    "ACTOR",
    "WRITE_CONCURRENCY",
    "CheckpointPass",
    "CheckpointStore",
    "StoreResult",
    "checkpoint_write",
    "orphan_deletions",
]

log = component_logger("vpa-recommender")

WRITE_CONCURRENCY: Final = 8
"""VPAs whose checkpoints are written at once: enough to keep requests in flight while each
waits for its answer, few enough that one pass is not a burst the API server must queue."""
ACTOR: Final = "vpa-recommender"
"""The intents' actor (the recommender loop's name): its checkpoint writes and deletions, and
its VPA status writes."""


@dataclass(frozen=True)
class StoreResult:
    """What one ``StoreCheckpoints`` pass did."""

    written: int
    failed: int
    vpas: int
    """VPAs whose checkpoints were attempted (before the deadline, or for --min-checkpoints)."""
    deadline_passed: bool
    """The deadline stopped the pass with VPAs left unwritten (not set when --min-checkpoints
    carried the pass past the deadline to the last VPA)."""
    order: tuple[tuple[str, str], ...] = ()
    """The VPAs attempted, (namespace, name), in the order they were started."""


def _sort_key(obj: VerticalPodAutoscalerCheckpoint) -> tuple[str, str]:
    view = meta(obj)
    return (view.namespace, view.name)


class CheckpointStore:
    """Reads checkpoints from ``informer`` and writes them through ``client``."""

    def __init__(
        self,
        *,
        client: KubeClient,
        informer: Informer[VerticalPodAutoscalerCheckpoint],
        ignored_namespace: Callable[[str], bool],
        write_concurrency: int = WRITE_CONCURRENCY,
        min_checkpoints: int = 0,
        executor: PlanExecutor | None = None,
    ) -> None:
        """``executor``: the recommender's (one for its writes); by default one of its own on
        ``client``."""
        if write_concurrency < 1:
            raise ValueError("write_concurrency must be at least 1")
        if min_checkpoints < 0:
            raise ValueError("min_checkpoints must not be negative")
        self.client = client
        self.executor = (
            executor
            if executor is not None
            else PlanExecutor(client=client, ledger=DisruptionLedger(shared=False), events=None)
        )
        self.informer = informer
        self._ignored = ignored_namespace
        self.write_concurrency = write_concurrency
        self.min_checkpoints = min_checkpoints
        """``--min-checkpoints``: checkpoints a pass starts even after its deadline."""

    def cached(self) -> list[VerticalPodAutoscalerCheckpoint]:
        """Checkpoints outside the ignored namespaces, by namespace and name."""
        return sorted(
            (obj for obj in self.informer.lister.list() if not self._ignored(meta(obj).namespace)),
            key=_sort_key,
        )

    def load_into(self, state: ClusterState) -> int:
        """``InitFromCheckpoints`` (after ``LoadVPAs``); how many the model accepted."""
        loaded = 0
        for checkpoint in self.cached():
            if state.load_checkpoint(checkpoint):
                loaded += 1
        log.info("loaded VPA checkpoints", extra={"fields": {"loaded": loaded}})
        return loaded

    async def write(self, checkpoint: VerticalPodAutoscalerCheckpoint, *, now: datetime) -> Applied:
        """``CreateOrUpdateVpaCheckpoint``: replace ``/status``, or create on 404."""
        return await self.executor.execute(checkpoint_write(checkpoint), now=now)

    async def store(
        self,
        state: ClusterState,
        *,
        now: datetime,
        clock: Clock,
        deadline: float,
        skip: Collection[tuple[str, str]] = (),
    ) -> StoreResult:
        """``StoreCheckpoints``: oldest first until ``deadline`` (on ``clock.monotonic()``) and
        at least :attr:`min_checkpoints` checkpoints, ``write_concurrency`` VPAs at a time
        (module docstring)."""
        pass_ = CheckpointPass.start(
            state,
            now=now,
            clock=clock,
            deadline=deadline,
            skip=skip,
            min_checkpoints=self.min_checkpoints,
        )
        return await self.write_pass(pass_, now=now)

    async def write_pass(self, pass_: CheckpointPass, *, now: datetime) -> StoreResult:
        """Drive ``pass_`` on the executor with :attr:`write_concurrency` writers at once
        (module docstring); what it did."""
        with self.executor.in_issue_order():  # the journal in the pass's order
            async with asyncio.TaskGroup() as workers:
                for _ in range(self.write_concurrency):
                    workers.create_task(self.executor.drive(pass_.work(), now=now))
        return pass_.result()

    async def garbage_collect(
        self, *, existing_vpas: Collection[tuple[str, str]], now: datetime
    ) -> int:
        """``GarbageCollectCheckpoints``: delete checkpoints of VPAs that do not exist."""
        return await self.executor.drive(
            orphan_deletions(self.cached(), existing_vpas=existing_vpas), now=now
        )


def orphan_deletions(
    checkpoints: Sequence[VerticalPodAutoscalerCheckpoint],
    *,
    existing_vpas: Collection[tuple[str, str]],
) -> Decision[int]:
    """``GarbageCollectCheckpoints`` over ``checkpoints`` (the cached ones outside the ignored
    namespaces): a :class:`~kubescale.plans.intents.DeleteObject` for each whose
    ``spec.vpaObjectName`` names no VPA of ``existing_vpas`` (every VPA, whichever recommender
    handles it); how many were deleted (one already gone is not counted, a refused or failed
    deletion is logged as upstream's "failed to delete")."""
    deleted = 0
    for checkpoint in checkpoints:
        view = meta(checkpoint)
        namespace = view.namespace
        vpa_name = spec_of(checkpoint).get("vpaObjectName") or ""
        if (namespace, vpa_name) in existing_vpas:
            continue
        name = view.name
        applied = yield DeleteObject(
            actor=ACTOR, target=ObjectRef(VPA_CHECKPOINTS, namespace, name)
        )
        if applied.outcome is WriteOutcome.GONE:
            continue
        if applied.error is not None:
            log.error(
                "orphaned VPA checkpoint cleanup - failed to delete",
                extra={
                    "fields": {"checkpoint": f"{namespace}/{name}", "error": str(applied.error)}
                },
            )
            continue
        deleted += 1
        log.info(
            "orphaned VPA checkpoint cleanup - deleting",
            extra={"fields": {"checkpoint": f"{namespace}/{name}"}},
        )
    return deleted


def checkpoint_write(checkpoint: VerticalPodAutoscalerCheckpoint) -> PatchOrCreate:
    """``CreateOrUpdateVpaCheckpoint`` as an intent: a JSON patch replacing ``/status``, the
    whole checkpoint created when it is not there."""
    return PatchOrCreate(
        actor=ACTOR,
        resource=VPA_CHECKPOINTS,
        body=checkpoint,
        patch=[{"op": "replace", "path": "/status", "value": status_of(checkpoint)}],
    )


@dataclass(kw_only=True)
class CheckpointPass:
    """One ``StoreCheckpoints`` pass (module docstring). Its workers (:meth:`work`, each a
    decision) share one sequence of writes, so each checkpoint is written once, in the pass's
    order, and no VPA is started once the pass should stop; one worker alone is upstream's
    writer, several are :attr:`CheckpointStore.write_concurrency` writers."""

    state: ClusterState
    now: datetime
    clock: Clock
    deadline: float
    """On ``clock.monotonic()``: ``--checkpoints-timeout`` after the iteration's start."""
    skip: Collection[tuple[str, str]]
    order: Iterator[tuple[str, str]]
    live: LiveContainers | None = None
    """The pods' containers by aggregate key from a walk (:meth:`ClusterState.live_containers`,
    the from-scratch answer); ``None`` (as :meth:`start` passes) reads the model's kept index,
    only each written VPA's entries (issue 29: a walk over every pod each iteration)."""
    min_checkpoints: int = 0
    written: int = 0
    failed: int = 0
    attempted: int = 0
    tried: int = 0
    """Container checkpoints started in this pass (upstream's ``minCheckpoints--``)."""
    deadline_passed: bool = False
    stopped: bool = False
    """A worker stopped with a VPA left (the deadline and the minimum both reached)."""
    started: list[tuple[str, str]] = field(default_factory=list)
    _sequence: Iterator[tuple[str, str, VerticalPodAutoscalerCheckpoint]] = field(init=False)
    """:meth:`_writes`, one for the whole pass: every writer takes from it."""

    def __post_init__(self) -> None:
        self._sequence = self._writes()

    @classmethod
    def start(
        cls,
        state: ClusterState,
        *,
        now: datetime,
        clock: Clock,
        deadline: float,
        skip: Collection[tuple[str, str]] = (),
        min_checkpoints: int = 0,
    ) -> CheckpointPass:
        """A pass over ``state``'s VPAs, least recently checkpointed first
        (``getVpasToCheckpoint``), each VPA's live containers from the model's kept index."""
        return cls(
            state=state,
            now=now,
            clock=clock,
            deadline=deadline,
            skip=skip,
            order=iter(state.vpa_keys_for_checkpoints()),
            min_checkpoints=min_checkpoints,
        )

    def result(self) -> StoreResult:
        return StoreResult(
            self.written,
            self.failed,
            self.attempted,
            deadline_passed=self.stopped,
            order=tuple(self.started),
        )

    def _stop(self) -> bool:
        """Upstream ``ctx.Err() != nil && minCheckpoints <= 0``."""
        return self.deadline_passed and self.tried >= self.min_checkpoints

    def work(self) -> Decision[None]:
        """One writer: takes the pass's next write (:meth:`_writes`, shared by every writer of
        the pass) until the pass stops, yields it and receives its outcome (a failed write
        counts towards ``--min-checkpoints`` as upstream's does; a written one moves the VPA's
        "checkpoint written" time). Whichever writer is free takes the next write, so the
        writes are issued in the pass's order whatever the order of the answers."""
        for namespace, name, checkpoint in self._sequence:
            applied = yield checkpoint_write(checkpoint)
            self._record(namespace, name, checkpoint, applied)

    def _writes(self) -> Iterator[tuple[str, str, VerticalPodAutoscalerCheckpoint]]:
        """The pass's writes, in order: the VPAs oldest first, each one's containers by name;
        before each VPA the deadline and ``--min-checkpoints`` decide whether the pass goes on
        (module docstring)."""
        for namespace, name in self.order:
            if self._stop():
                self.stopped = True
                return
            if (namespace, name) in self.skip:
                log.info(
                    "VPA is loading history, skipping checkpoints",
                    extra={"fields": {"vpa": f"{namespace}/{name}"}},
                )
                continue
            if not self.deadline_passed and self.clock.monotonic() >= self.deadline:
                self.deadline_passed = True
            if self._stop():
                self.stopped = True
                return
            self.attempted += 1
            self.started.append((namespace, name))
            # Counted before the first yield, so the next worker's check counts them.
            checkpoints = self.state.checkpoints(
                namespace=namespace, name=name, now=self.now, live=self.live
            )
            self.tried += len(checkpoints)
            for checkpoint in checkpoints:
                yield namespace, name, checkpoint

    def _record(
        self,
        namespace: str,
        name: str,
        checkpoint: VerticalPodAutoscalerCheckpoint,
        applied: Applied,
    ) -> None:
        err = applied.error
        if err is not None:
            self.failed += 1
            log.error(
                "cannot save VPA checkpoint",
                extra={
                    "fields": {
                        "vpa": f"{namespace}/{name}",
                        "container": spec_of(checkpoint).get("containerName"),
                        "error": str(err),
                    }
                },
            )
            return
        self.written += 1
        self.state.mark_checkpoint_written(namespace=namespace, name=name, now=self.now)
