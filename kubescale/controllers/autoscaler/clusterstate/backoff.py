"""Exponential backoff of node groups whose scale-up failed (``pkg/utils/backoff``).

Keyed by node group id. A failure when the group has no entry, or its last backoff has expired,
starts ``--initial-node-group-backoff-duration`` (5m) — doubled from the previous duration when
there was one, capped at ``--max-node-group-backoff-duration`` (30m); a failure while still
backed off keeps the current duration and moves ``until``. A group is backed off while
``until`` is not before now. Entries whose last failure is older than
``--node-group-backoff-reset-timeout`` (3h) are forgotten, so the next failure starts again at
the initial duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import InstanceErrorInfo

__all__ = ["BackoffEntry", "ExponentialBackoff"]


@dataclass(frozen=True)
class BackoffEntry:
    duration: timedelta
    until: datetime
    last_failure: datetime
    error: InstanceErrorInfo


class ExponentialBackoff:
    """Backoff state of every node group (module docstring)."""

    def __init__(self, *, initial: timedelta, maximum: timedelta, reset_timeout: timedelta) -> None:
        self.initial = initial
        self.maximum = maximum
        self.reset_timeout = reset_timeout
        self._entries: dict[str, BackoffEntry] = {}

    def backoff(self, group_id: str, error: InstanceErrorInfo, now: datetime) -> datetime:
        """Record a failure; returns until when the group is backed off."""
        duration = self.initial
        entry = self._entries.get(group_id)
        if entry is not None:
            if entry.until < now:
                duration = min(2 * entry.duration, self.maximum)
            else:
                duration = entry.duration
        until = now + duration
        self._entries[group_id] = BackoffEntry(
            duration=duration, until=until, last_failure=now, error=error
        )
        return until

    def status(self, group_id: str, now: datetime) -> BackoffEntry | None:
        """The entry when the group is backed off now, else ``None``."""
        entry = self._entries.get(group_id)
        if entry is None or entry.until < now:
            return None
        return entry

    def remove(self, group_id: str) -> None:
        self._entries.pop(group_id, None)

    def remove_stale(self, now: datetime) -> None:
        for group_id in [
            g for g, e in self._entries.items() if e.last_failure + self.reset_timeout < now
        ]:
            del self._entries[group_id]

    def entry(self, group_id: str) -> BackoffEntry | None:
        """The entry, expired or not (tests, status)."""
        return self._entries.get(group_id)
