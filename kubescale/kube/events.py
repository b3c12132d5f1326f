"""The event recorder: core/v1 Events about objects, written like client-go's recorder does.

``recorder.event(obj, type="Normal", reason="EvictedByVPA", message="...")`` returns at once;
the event goes on a bounded queue (1000, client-go's broadcaster queue; overflow is dropped and
logged, never blocks a loop) and a background task writes it:

1. it builds the Event as ``record.recorderImpl.makeEvent`` does: name
   ``<involved name>.<unix nanos in hex>`` (nanos made unique per recorder), namespace of the
   object (``default`` for cluster-scoped ones), ``involvedObject`` = the object's reference
   (apiVersion, kind, namespace, name, uid, resourceVersion, optional fieldPath), ``count`` 1,
   ``firstTimestamp`` = ``lastTimestamp`` = now on the injected clock, ``source``
   {component, host} and ``reportingComponent``/``reportingInstance`` from the same;
2. passes it through the :class:`~kubescale.kube.event_correlation.EventCorrelator` (de-duplicate,
   aggregate, spam-filter);
3. writes it (``recordToSink``/``recordEvent``): a repeat is a strategic-merge PATCH of the
   existing Event, falling back to a create if that Event is gone (404); a new one is a create.
   A response from the server ends the attempt either way (an error status is logged, not
   retried: client-go does not retry a ``StatusError``); a transport failure is retried up to
   12 tries, the first pause random in ``[0, 10 s)`` and later ones 10 s, on the injected clock.

Only ``Normal`` and ``Warning`` are valid types; anything else is logged and dropped.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from kubescale.base.logs import component_logger
from kubescale.base.tasks import cancel_and_wait
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeTransportError
from kubescale.kube.event_correlation import EventCorrelator, format_time
from kubescale.kube.resources import CORE_EVENTS
from kubescale.objects.views import Meta

log = component_logger("kube.events")

EVENT_TYPES = frozenset({"Normal", "Warning"})
QUEUE_LENGTH = 1000
MAX_TRIES_PER_EVENT = 12
RETRY_SLEEP = 10.0


def object_reference(obj: Mapping[str, Any], *, field_path: str = "") -> dict[str, Any]:
    """``reference.GetReference``: what ``involvedObject`` says about ``obj``."""
    meta = Meta(obj).raw
    ref: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
    }
    for field, value in (
        ("namespace", meta.get("namespace")),
        ("uid", meta.get("uid")),
        ("resourceVersion", meta.get("resourceVersion")),
        ("fieldPath", field_path),
    ):
        if value:
            ref[field] = value
    return ref


class EventRecorder:
    """Records Events for one component (see the module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        component: str,
        host: str = "",
        correlator: EventCorrelator | None = None,
        rng: random.Random | None = None,
        queue_length: int = QUEUE_LENGTH,
        max_tries: int = MAX_TRIES_PER_EVENT,
        retry_sleep: float = RETRY_SLEEP,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.clock = client.clock
        self.rng = rng or client.rng
        self.correlator = correlator or EventCorrelator(clock=self.clock)
        self.max_tries = max_tries
        self.retry_sleep = retry_sleep
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=queue_length)
        self._worker: asyncio.Task[None] | None = None
        self.dropped = 0
        """Events dropped because the queue was full or the type was invalid."""

    def make_event(
        self,
        obj: Mapping[str, Any],
        *,
        type: str,
        reason: str,
        message: str,
        field_path: str = "",
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The Event ``recorderImpl.makeEvent`` would build, timestamped now."""
        now = self.clock.now()
        ref = object_reference(obj, field_path=field_path)
        stamp = format_time(now)
        metadata: dict[str, Any] = {
            "name": self.correlator.unique_name(ref["name"], now),
            "namespace": ref.get("namespace") or "default",
        }
        if annotations:
            metadata["annotations"] = dict(annotations)
        source: dict[str, Any] = {"component": self.component}
        if self.host:
            source["host"] = self.host
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": type,
            "source": source,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        return event

    def event(
        self,
        obj: Mapping[str, Any],
        *,
        type: str,
        reason: str,
        message: str,
        field_path: str = "",
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an event about ``obj``; never blocks (a full queue drops the event)."""
        if type not in EVENT_TYPES:
            self.dropped += 1
            log.error(
                "unsupported event type; event dropped",
                extra={"fields": {"type": type, "reason": reason}},
            )
            return
        event = self.make_event(
            obj,
            type=type,
            reason=reason,
            message=message,
            field_path=field_path,
            annotations=annotations,
        )
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "event queue full; event dropped",
                extra={"fields": {"reason": reason, "object": event["involvedObject"]}},
            )
            return
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain(), name=f"events:{self.component}")

    async def flush(self) -> None:
        """Wait until every queued event has been written (or given up on)."""
        await self._queue.join()

    async def close(self) -> None:
        """Write what is queued, then stop the background task."""
        if self._worker is not None and not self._worker.done():
            await self.flush()
        worker, self._worker = self._worker, None
        await cancel_and_wait(worker)

    async def _drain(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self.record(event)
            except Exception:
                log.exception("recording an event failed")
            finally:
                self._queue.task_done()

    async def record(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """Correlate and write one event now; the server's copy, or ``None`` if not written."""
        result = self.correlator.correlate(event)
        if result.skip or result.event is None:
            return None
        tries = 0
        while True:
            written, stored = await self._write(result.event, result.patch)
            if written:
                return stored
            tries += 1
            if tries >= self.max_tries:
                log.error(
                    "unable to write event (retry limit exceeded)",
                    extra={"fields": {"reason": event.get("reason")}},
                )
                return None
            # recordToSink: randomize the first sleep so clients do not retry in step.
            pause = self.retry_sleep * self.rng.random() if tries == 1 else self.retry_sleep
            await self.clock.sleep(pause)

    async def _write(
        self, event: dict[str, Any], patch: dict[str, Any] | None
    ) -> tuple[bool, dict[str, Any] | None]:
        """``recordEvent``: (finished, server copy). Not finished only on transport errors."""
        meta = Meta(event).raw
        name, namespace = str(meta.get("name") or ""), meta.get("namespace")
        try:
            stored: dict[str, Any] | None = None
            if patch is not None and int(event.get("count") or 0) > 1:
                try:
                    stored = await self.client.patch(
                        CORE_EVENTS, name, patch, namespace=namespace, patch_type="strategic"
                    )
                except KubeApiError as err:
                    if not err.not_found:
                        raise
            if stored is None:
                metadata = {**meta}
                metadata.pop("resourceVersion", None)
                body = {**event, "metadata": metadata}
                stored = await self.client.create(CORE_EVENTS, body)
        except KubeApiError as err:
            level = log.debug if err.already_exists else log.error
            level(
                "server rejected event (will not retry)",
                extra={"fields": {"code": err.code, "reason": err.reason, "message": err.message}},
            )
            return True, None
        except KubeTransportError as err:
            log.warning("unable to write event (may retry)", extra={"fields": {"error": str(err)}})
            return False, None
        self.correlator.update_state(stored)
        return True, stored
