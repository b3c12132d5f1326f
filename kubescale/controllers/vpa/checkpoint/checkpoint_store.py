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
  :meth:`~kubescale.controllers.vpa.model.cluster_state.ClusterState.checkpoints`, from one walk
  over the pods per pass) is written as a JSON patch
  ``[{"op": "replace", "path": "/status", "value": ...}]``; a 404 creates it instead. A VPA's
  "checkpoint written" time moves to now after each successful write.
* **Concurrency** (deliberate difference): upstream writes one checkpoint at a time, so a pass
  over 10,000 containers is 10,000 round trips end to end. Here up to ``write_concurrency``
  (:data:`WRITE_CONCURRENCY`) VPAs are written at once, taken strictly oldest first — the VPAs
  the deadline leaves out are still the most recently checkpointed ones — and each VPA's
  containers one after the other.
* **Load** (start-up, ``--storage`` not ``prometheus``): every cached checkpoint outside the
  ignored namespaces is offered to the model, which keeps those of VPAs it knows (so the VPAs
  are loaded first) and refuses other versions than ``v3``.
* **Garbage collection** (every ``--checkpoints-gc-interval``): checkpoints outside the ignored
  namespaces whose ``spec.vpaObjectName`` names no existing VPA are deleted.

Checkpoints are read from an informer (upstream's checkpoint lister), written through the
access layer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.model.cluster_state import ClusterState, LiveContainers
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.informer import Informer
from kubescale.kube.resources import VPA_CHECKPOINTS
from kubescale.objects.views import Meta, raw_status, spec_of
from kubescale.objects.vpa_checkpoint import VerticalPodAutoscalerCheckpoint

__all__ = ["WRITE_CONCURRENCY", "CheckpointStore", "StoreResult"]

log = component_logger("vpa-recommender")

WRITE_CONCURRENCY: Final = 8
"""VPAs whose checkpoints are written at once: enough to keep requests in flight while each
waits for its answer, few enough that one pass is not a burst the API server must queue."""


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


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return Meta(obj).raw


def _sort_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = _metadata(obj)
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


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
    ) -> None:
        if write_concurrency < 1:
            raise ValueError("write_concurrency must be at least 1")
        if min_checkpoints < 0:
            raise ValueError("min_checkpoints must not be negative")
        self.client = client
        self.informer = informer
        self._ignored = ignored_namespace
        self.write_concurrency = write_concurrency
        self.min_checkpoints = min_checkpoints
        """``--min-checkpoints``: checkpoints a pass starts even after its deadline."""

    def cached(self) -> list[VerticalPodAutoscalerCheckpoint]:
        """Checkpoints outside the ignored namespaces, by namespace and name."""
        return sorted(
            (
                obj
                for obj in self.informer.lister.list()
                if not self._ignored(str(_metadata(obj).get("namespace") or ""))
            ),
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

    async def write(self, checkpoint: Mapping[str, Any]) -> None:
        """``CreateOrUpdateVpaCheckpoint``: replace ``/status``, or create on 404."""
        metadata = _metadata(checkpoint)
        name = str(metadata.get("name") or "")
        namespace = str(metadata.get("namespace") or "")
        try:
            await self.client.patch(
                VPA_CHECKPOINTS,
                name,
                [{"op": "replace", "path": "/status", "value": raw_status(checkpoint)}],
                namespace=namespace,
                patch_type="json",
            )
        except KubeApiError as err:
            if not err.not_found:
                raise
            await self.client.create(VPA_CHECKPOINTS, checkpoint, namespace=namespace)

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
        pass_ = _StorePass(
            store=self,
            state=state,
            now=now,
            clock=clock,
            deadline=deadline,
            skip=skip,
            order=iter(state.vpa_keys_for_checkpoints()),
            live=state.live_containers(),
            min_checkpoints=self.min_checkpoints,
        )
        async with asyncio.TaskGroup() as workers:
            for _ in range(self.write_concurrency):
                workers.create_task(pass_.work())
        return StoreResult(
            pass_.written,
            pass_.failed,
            pass_.attempted,
            deadline_passed=pass_.stopped,
            order=tuple(pass_.started),
        )

    async def garbage_collect(self, *, existing_vpas: Collection[tuple[str, str]]) -> int:
        """``GarbageCollectCheckpoints``: delete checkpoints of VPAs that do not exist."""
        deleted = 0
        for checkpoint in self.cached():
            metadata = _metadata(checkpoint)
            namespace = str(metadata.get("namespace") or "")
            vpa_name = str(spec_of(checkpoint).get("vpaObjectName") or "")
            if (namespace, vpa_name) in existing_vpas:
                continue
            name = str(metadata.get("name") or "")
            try:
                await self.client.delete(VPA_CHECKPOINTS, name, namespace=namespace)
            except KubeApiError as err:
                if err.not_found:
                    continue
                log.error(
                    "orphaned VPA checkpoint cleanup - failed to delete",
                    extra={"fields": {"checkpoint": f"{namespace}/{name}", "error": str(err)}},
                )
                continue
            except KubeError as err:
                log.error(
                    "orphaned VPA checkpoint cleanup - failed to delete",
                    extra={"fields": {"checkpoint": f"{namespace}/{name}", "error": str(err)}},
                )
                continue
            deleted += 1
            log.info(
                "orphaned VPA checkpoint cleanup - deleting",
                extra={"fields": {"checkpoint": f"{namespace}/{name}"}},
            )
        return deleted


@dataclass(kw_only=True)
class _StorePass:
    """One :meth:`CheckpointStore.store` pass: its workers share ``order``, so each VPA is
    taken once, oldest first, and none is taken after the deadline."""

    store: CheckpointStore
    state: ClusterState
    now: datetime
    clock: Clock
    deadline: float
    skip: Collection[tuple[str, str]]
    order: Iterator[tuple[str, str]]
    live: LiveContainers
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

    def _stop(self) -> bool:
        """Upstream ``ctx.Err() != nil && minCheckpoints <= 0``."""
        return self.deadline_passed and self.tried >= self.min_checkpoints

    async def work(self) -> None:
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
            # Built before the first await, so the next worker's check counts them.
            checkpoints = self.state.checkpoints(
                namespace=namespace, name=name, now=self.now, live=self.live
            )
            self.tried += len(checkpoints)
            await self._write_vpa(namespace, name, checkpoints)

    async def _write_vpa(
        self, namespace: str, name: str, checkpoints: list[dict[str, Any]]
    ) -> None:
        state = self.state
        for checkpoint in checkpoints:
            try:
                await self.store.write(checkpoint)
            except KubeError as err:
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
                continue
            self.written += 1
            state.mark_checkpoint_written(namespace=namespace, name=name, now=self.now)
