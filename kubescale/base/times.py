"""``metav1.Time`` and ``metav1.MicroTime`` as API objects carry them: parse and format.

Kubernetes writes ``metav1.Time`` as RFC 3339 in UTC with whole seconds
(``2026-01-01T00:00:00Z``) and ``metav1.MicroTime`` (Lease renew times, events.k8s.io) with six
fractional digits (``2026-01-01T00:00:00.000000Z``). Readers accept any RFC 3339 form a client
may have written: ``Z`` or a numeric offset, with or without fractional seconds (a time without
an offset is read as UTC). Every parsed time is an aware UTC :class:`~datetime.datetime`;
anything unreadable is ``None`` (callers decide what a missing time means, as upstream's zero
``Time`` does).
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_micro_time", "format_time", "parse_time"]


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; ``None`` when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_time(moment: datetime) -> str:
    """``metav1.Time``: UTC, whole seconds (truncated, as Go's RFC3339 formatting drops them)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: UTC with six fractional digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
