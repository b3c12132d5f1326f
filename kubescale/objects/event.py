"""``core/v1.Event`` (and the ``events.k8s.io/v1`` fields it shares): what the event
recorder writes and correlates."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta, ObjectReference

__all__ = ["Event", "EventSeries", "EventSource"]


class EventSource(TypedDict, total=False):
    """``core/v1.EventSource``."""

    component: str
    host: str


class EventSeries(TypedDict, total=False):
    """``core/v1.EventSeries``."""

    count: int
    lastObservedTime: str


class Event(TypedDict, total=False):
    """``core/v1.Event``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    involvedObject: ObjectReference
    reason: str
    message: str
    type: str
    source: EventSource
    count: int
    firstTimestamp: str
    lastTimestamp: str
    eventTime: str
    series: EventSeries
    action: str
    reportingComponent: str
    reportingInstance: str
