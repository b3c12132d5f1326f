"""A bounded journal of the intents executed: what ``simulate`` records of its systems' plans.

The executor tells its registry's observers (:func:`~.executor.observe_plans`) every intent it
applied, printed or refused, with its outcome. :class:`PlanJournal` is such an observer: it
counts every intent by actor, kind and outcome, and keeps the first :data:`DETAILED_PER_KIND`
of each actor's kind of intent in detail — when, the actor, the kind, the outcome, the object,
:func:`~.intents.describe`'s line and the decision's reason (:func:`~.intents.reason_of`) — so
a long run (500 workloads for a month: millions of status writes) holds at most
``DETAILED_PER_KIND`` entries per (actor, kind) and one counter per (actor, kind, outcome).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kubescale.plans.intents import (
    DeleteNodes,
    Event,
    Intent,
    ResizeNodeGroup,
    describe,
    reason_of,
)

__all__ = ["DETAILED_PER_KIND", "JournalEntry", "PlanJournal", "intent_object"]

DETAILED_PER_KIND: Final = 500
"""Entries kept in detail per (actor, kind of intent); the rest are only counted."""


def intent_object(intent: Intent) -> str:
    """The object an intent is about: ``<plural> <namespace>/<name>`` (``ObjectRef.text``), the
    node group of a node group write, the involved object of an event."""
    if isinstance(intent, Event):
        return intent.subject
    if isinstance(intent, ResizeNodeGroup | DeleteNodes):
        return f"node-group {intent.group}"
    return intent.target.text


@dataclass(frozen=True)
class JournalEntry:
    """One intent executed, as the journal keeps it in detail."""

    time: float
    """Seconds since the journal's start (the run's simulated time)."""
    actor: str
    intent: str
    """The kind of intent (its class name: ``Evict``, ``Resize`` ...)."""
    outcome: str
    """``done``, ``unknown``, ``gone``, ``refused`` or ``dry-run``
    (``kubescale_plan_intents_total``'s label)."""
    object: str
    describe: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "actor": self.actor,
            "intent": self.intent,
            "outcome": self.outcome,
            "object": self.object,
            "describe": self.describe,
            "reason": self.reason,
        }


class PlanJournal:
    """Counts every intent it is told of, keeps the first ``detailed_per_kind`` of each
    (actor, kind) in detail (module docstring); ``elapsed`` gives each entry's time."""

    def __init__(
        self, *, elapsed: Callable[[], float], detailed_per_kind: int = DETAILED_PER_KIND
    ) -> None:
        if detailed_per_kind < 0:
            raise ValueError(f"detailed_per_kind must be >= 0, not {detailed_per_kind}")
        self._elapsed = elapsed
        self.detailed_per_kind = detailed_per_kind
        self.counts: Counter[tuple[str, str, str]] = Counter()
        """Per (actor, kind, outcome), every intent."""
        self._detailed: Counter[tuple[str, str]] = Counter()
        self.entries: list[JournalEntry] = []
        """The detailed entries, in the order the intents were executed."""

    def __call__(self, intent: Intent, outcome: str) -> None:
        """Record ``intent`` (a :data:`~.executor.PlanObserver`)."""
        actor, kind = intent.actor, type(intent).__name__
        self.counts[(actor, kind, outcome)] += 1
        if self._detailed[(actor, kind)] >= self.detailed_per_kind:
            return
        self._detailed[(actor, kind)] += 1
        self.entries.append(
            JournalEntry(
                time=self._elapsed(),
                actor=actor,
                intent=kind,
                outcome=outcome,
                object=intent_object(intent),
                describe=describe(intent),
                reason=reason_of(intent),
            )
        )

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def report(self) -> dict[str, Any]:
        """The journal as the JSON report's ``plans``: ``detailed_per_kind``, ``total``,
        ``counts`` (actor, intent, outcome, count; sorted), ``left_out`` (intents counted but
        not kept in detail) and ``entries``."""
        return {
            "detailed_per_kind": self.detailed_per_kind,
            "total": self.total,
            "left_out": self.total - len(self.entries),
            "counts": [
                {"actor": actor, "intent": kind, "outcome": outcome, "count": count}
                for (actor, kind, outcome), count in sorted(self.counts.items())
            ],
            "entries": [entry.to_json() for entry in self.entries],
        }
