"""Event de-duplication, aggregation and spam filtering (client-go's ``EventCorrelator``).

Pure logic on raw core/v1 Event dicts, implementing ``tools/record/events_cache.go``:

- **De-duplication.** Events equal in source (component, host), involvedObject (kind,
  namespace, name, fieldPath, uid, apiVersion), type, reason *and message* (``getEventKey``) are
  one Event on the server: the first is created; each repeat becomes a strategic-merge PATCH of
  the existing Event setting ``count`` (previous + 1), ``lastTimestamp`` and ``message`` — the
  two-way merge patch client-go computes between the event with those three fields blanked and
  the event itself.
- **Aggregation.** Events equal in everything but the message (``EventAggregatorByReasonFunc``:
  source, involvedObject without fieldPath, type, reason, reportingController,
  reportingInstance) are tracked with the set of distinct messages seen. A group whose last
  event is older than 600 s starts afresh. When the set reaches 10 distinct messages, the event
  is replaced by a new aggregate Event (count 1, message
  ``"(combined from similar events): " + message``) keyed by the group, so later aggregated
  events PATCH that one Event's count; one message is then dropped from the set so it stays
  below the threshold (Go's ``PopAny``; here the oldest, to be deterministic).
- **Spam filter.** Per source + involvedObject a token bucket of burst 25 refilling one token
  every 300 s; an event that finds the bucket empty is skipped (after being counted by the
  de-duplication above, as upstream does).

The caches are LRUs of 4096 entries. Times come from the injected clock: ``now()`` for event
timestamps and the aggregation window, ``monotonic()`` for the token buckets.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from kubescale.base.clock import Clock
from kubescale.kube.token_bucket import TokenBucket
from kubescale.objects.views import Meta

MAX_LRU_CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_SECONDS = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
AGGREGATE_PREFIX = "(combined from similar events): "

V = TypeVar("V")


def _source(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("source") or {}


def _involved(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("involvedObject") or {}


def _joined(*parts: Any) -> str:
    """``strings.Join(parts, "")`` of Go string fields: an absent field is the empty string."""
    return "".join(str(part or "") for part in parts)


def event_key(event: dict[str, Any]) -> str:
    """``getEventKey``: identical events share this key (fields concatenated, no separator)."""
    src, obj = _source(event), _involved(event)
    return _joined(
        src.get("component"),
        src.get("host"),
        obj.get("kind"),
        obj.get("namespace"),
        obj.get("name"),
        obj.get("fieldPath"),
        obj.get("uid"),
        obj.get("apiVersion"),
        event.get("type"),
        event.get("reason"),
        event.get("message"),
    )


def spam_key(event: dict[str, Any]) -> str:
    """``getSpamKey``: source + involvedObject."""
    src, obj = _source(event), _involved(event)
    return _joined(
        src.get("component"),
        src.get("host"),
        obj.get("kind"),
        obj.get("namespace"),
        obj.get("name"),
        obj.get("uid"),
        obj.get("apiVersion"),
    )


def aggregate_key(event: dict[str, Any]) -> tuple[str, str]:
    """``EventAggregatorByReasonFunc``: (group key, the message that varies within the group)."""
    src, obj = _source(event), _involved(event)
    group = _joined(
        src.get("component"),
        src.get("host"),
        obj.get("kind"),
        obj.get("namespace"),
        obj.get("name"),
        obj.get("uid"),
        obj.get("apiVersion"),
        event.get("type"),
        event.get("reason"),
        event.get("reportingComponent"),
        event.get("reportingInstance"),
    )
    return group, str(event.get("message") or "")


def format_time(moment: datetime) -> str:
    """metav1.Time on the wire: RFC 3339, whole seconds, UTC."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def unix_nanos(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def event_name(involved_name: str, nanos: int) -> str:
    """``fmt.Sprintf("%v.%x", name, t.UnixNano())``."""
    return f"{involved_name}.{nanos:x}"


class _Lru(Generic[V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: str, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


@dataclass
class _AggregateRecord:
    messages: dict[str, None] = field(default_factory=dict)
    last: datetime | None = None


@dataclass(frozen=True)
class _Observation:
    count: int
    first_timestamp: Any
    name: str
    resource_version: str


@dataclass(frozen=True)
class CorrelationResult:
    """What to send: the event (to create, or whose existing copy to patch) and the patch."""

    event: dict[str, Any] | None
    patch: dict[str, Any] | None = None
    skip: bool = False


class EventCorrelator:
    """Filters, aggregates and de-duplicates events before they are written."""

    def __init__(
        self,
        *,
        clock: Clock,
        max_events: int = AGGREGATE_MAX_EVENTS,
        max_interval: float = AGGREGATE_INTERVAL_SECONDS,
        spam_burst: int = SPAM_BURST,
        spam_qps: float = SPAM_QPS,
        cache_size: int = MAX_LRU_CACHE_ENTRIES,
    ) -> None:
        self._clock = clock
        self._max_events = max_events
        self._max_interval = max_interval
        self._spam_burst = spam_burst
        self._spam_qps = spam_qps
        self._aggregates: _Lru[_AggregateRecord] = _Lru(cache_size)
        self._observations: _Lru[_Observation] = _Lru(cache_size)
        self._buckets: _Lru[TokenBucket] = _Lru(cache_size)
        self._last_nanos = 0

    def unique_name(self, involved_name: str, moment: datetime) -> str:
        """``<name>.<unix nanos hex>``, the nanos bumped past the last name handed out.

        Upstream relies on nanosecond clocks never repeating; a virtual clock repeats at will,
        and two events named alike would lose the second to ``AlreadyExists``.
        """
        self._last_nanos = max(unix_nanos(moment), self._last_nanos + 1)
        return event_name(involved_name, self._last_nanos)

    def correlate(self, event: dict[str, Any]) -> CorrelationResult:
        """``EventCorrelate``: aggregate, then observe (dedupe), then spam-filter."""
        aggregated, key = self._aggregate(event)
        observed, patch = self._observe(aggregated, key)
        if self._filtered(observed):
            return CorrelationResult(event=None, skip=True)
        return CorrelationResult(event=observed, patch=patch)

    def update_state(self, event: dict[str, Any]) -> None:
        """Remember the server's copy (name, resourceVersion, count) under its event key."""
        meta = Meta(event).raw
        self._observations.add(
            event_key(event),
            _Observation(
                count=int(event.get("count") or 0),
                first_timestamp=event.get("firstTimestamp"),
                name=str(meta.get("name") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
            ),
        )

    def _aggregate(self, event: dict[str, Any]) -> tuple[dict[str, Any], str]:
        now = self._clock.now()
        full_key = event_key(event)
        group, message = aggregate_key(event)
        record = self._aggregates.get(group)
        if (
            record is None
            or record.last is None
            or (now - record.last).total_seconds() > self._max_interval
        ):
            record = _AggregateRecord()
        record.messages[message] = None
        record.last = now
        self._aggregates.add(group, record)
        if len(record.messages) < self._max_events:
            return event, full_key
        del record.messages[next(iter(record.messages))]
        involved = _involved(event)
        stamp = format_time(now)
        aggregate: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": self.unique_name(str(involved.get("name") or ""), now),
                "namespace": Meta(event).raw.get("namespace"),
            },
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "involvedObject": copy.deepcopy(involved),
            "message": AGGREGATE_PREFIX + message,
            "type": event.get("type"),
            "reason": event.get("reason"),
            "source": copy.deepcopy(_source(event)),
        }
        return aggregate, group

    def _observe(
        self, event: dict[str, Any], key: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        observed = copy.deepcopy(event)
        last = self._observations.get(key)
        patch: dict[str, Any] | None = None
        if last is not None and last.count > 0:
            meta = observed.setdefault("metadata", {})
            meta["name"] = last.name
            meta["resourceVersion"] = last.resource_version
            observed["firstTimestamp"] = last.first_timestamp
            observed["count"] = last.count + 1
            # CreateTwoWayMergePatch(event with count/lastTimestamp/message blanked, event).
            patch = {"count": observed["count"], "lastTimestamp": observed.get("lastTimestamp")}
            if observed.get("message"):
                patch["message"] = observed["message"]
        meta = Meta(observed).raw
        self._observations.add(
            key,
            _Observation(
                count=int(observed.get("count") or 0),
                first_timestamp=observed.get("firstTimestamp"),
                name=str(meta.get("name") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
            ),
        )
        return observed, patch

    def _filtered(self, event: dict[str, Any]) -> bool:
        key = spam_key(event)
        now = self._clock.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(qps=self._spam_qps, burst=self._spam_burst, now=now)
        accepted = bucket.try_accept(now)
        self._buckets.add(key, bucket)
        return not accepted
