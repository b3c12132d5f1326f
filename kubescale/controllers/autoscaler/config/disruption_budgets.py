"""Karpenter's disruption budgets: how many nodes consolidation may disrupt at once.

A budget (``NodePool.spec.disruption.budgets[]``) is ``nodes`` (an integer or a percentage of
the pool's nodes), optional ``reasons`` (``Empty``, ``Underutilized``; none = every reason)
and an optional ``schedule`` (standard 5-field cron, UTC) with a ``duration`` during which it
is active. Karpenter's rules, matched here:

* a percentage is scaled with ``intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)``:
  ``ceil(nodes × p / 100)``;
* a scheduled budget is active when the first schedule hit after ``now - duration`` is not
  after ``now`` (``Budget.IsActive``);
* the allowed number is the minimum over the active budgets that apply to the reason (no active
  budget: no limit), minus the nodes being disrupted already, never below 0.

Flag syntax (kubescale's ``--consolidation-budgets``): ``;``-separated budgets, each
``nodes=<n|n%>[,reasons=Empty|Underutilized][,schedule=<cron>,duration=<go duration>]``;
the default ``nodes=10%`` is Karpenter's default budget.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kubescale.base.go_time import parse_duration

__all__ = [
    "DISRUPTION_REASONS",
    "CronSchedule",
    "DisruptionBudget",
    "DisruptionBudgetError",
    "allowed_disruptions",
    "parse_budgets",
]

DISRUPTION_REASONS: Final = ("Empty", "Underutilized")
UNLIMITED: Final = 2**31 - 1
_MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS: Final = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_MAX_SCAN_MINUTES: Final = 60 * 24 * 366


class DisruptionBudgetError(ValueError):
    """A budget or schedule that does not parse; the message says which part."""


def _parse_field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        step = 1
        part = item
        if "/" in item:
            part, _, step_text = item.partition("/")
            if not step_text.isdigit() or int(step_text) == 0:
                raise DisruptionBudgetError(f"bad step in cron field {text!r}")
            step = int(step_text)
        if part == "*":
            start, end = low, high
        elif "-" in part:
            a, _, b = part.partition("-")
            if not (a.isdigit() and b.isdigit()):
                raise DisruptionBudgetError(f"bad range in cron field {text!r}")
            start, end = int(a), int(b)
        elif part.isdigit():
            start = int(part)
            end = high if step > 1 else start
        else:
            raise DisruptionBudgetError(f"bad cron field {text!r}")
        if not low <= start <= end <= high:
            raise DisruptionBudgetError(f"cron field {text!r} out of range {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class CronSchedule:
    """A standard 5-field cron schedule in UTC (robfig/cron's ``ParseStandard``)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, text: str) -> CronSchedule:
        spec = _MACROS.get(text.strip(), text.strip())
        fields = spec.split()
        if len(fields) != 5:
            raise DisruptionBudgetError(f"schedule {text!r}: want 5 cron fields")
        parsed = [
            _parse_field(f, low, high) for f, (low, high) in zip(fields, _FIELDS, strict=True)
        ]
        weekdays = frozenset(d % 7 for d in parsed[4])  # 7 is Sunday too
        return cls(
            minutes=parsed[0],
            hours=parsed[1],
            days=parsed[2],
            months=parsed[3],
            weekdays=weekdays,
            days_restricted=not fields[2].startswith("*"),
            weekdays_restricted=not fields[4].startswith("*"),
        )

    def matches(self, moment: datetime) -> bool:
        """Whether the minute of ``moment`` (UTC) is a hit."""
        if moment.minute not in self.minutes or moment.hour not in self.hours:
            return False
        if moment.month not in self.months:
            return False
        day_ok = moment.day in self.days
        weekday_ok = (moment.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return day_ok or weekday_ok  # cron's OR when both are restricted
        return day_ok and weekday_ok

    def hit_between(self, after: datetime, until: datetime) -> bool:
        """Whether a hit falls in ``(after, until]`` (minute resolution)."""
        moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(_MAX_SCAN_MINUTES):
            if moment > until:
                return False
            if self.matches(moment):
                return True
            moment += timedelta(minutes=1)
        return False


@dataclass(frozen=True, kw_only=True)
class DisruptionBudget:
    """One budget (module docstring)."""

    nodes: str
    """``"10%"`` or ``"3"``."""
    reasons: tuple[str, ...] = ()
    schedule: CronSchedule | None = None
    duration: timedelta | None = None

    def __post_init__(self) -> None:
        text = self.nodes.strip()
        number = text[:-1] if text.endswith("%") else text
        if not number.isdigit():
            raise DisruptionBudgetError(f"nodes={self.nodes!r}: want an integer or a percentage")
        if text.endswith("%") and int(number) > 100:
            raise DisruptionBudgetError(f"nodes={self.nodes!r}: a percentage is at most 100%")
        for reason in self.reasons:
            if reason not in DISRUPTION_REASONS:
                raise DisruptionBudgetError(
                    f"reasons: {reason!r} is not one of {', '.join(DISRUPTION_REASONS)}"
                )
        if (self.schedule is None) != (self.duration is None):
            raise DisruptionBudgetError("schedule and duration go together")

    def applies_to(self, reason: str) -> bool:
        return not self.reasons or reason in self.reasons

    def is_active(self, now: datetime) -> bool:
        """``Budget.IsActive``: always without a schedule, else within ``duration`` of a hit."""
        if self.schedule is None or self.duration is None:
            return True
        return self.schedule.hit_between(now - self.duration, now)

    def scaled(self, total_nodes: int) -> int:
        """``GetScaledValueFromIntOrPercent(nodes, total, roundUp=true)``."""
        text = self.nodes.strip()
        if text.endswith("%"):
            return math.ceil(total_nodes * int(text[:-1]) / 100)
        return int(text)


def allowed_disruptions(
    budgets: Sequence[DisruptionBudget],
    *,
    reason: str,
    total_nodes: int,
    disrupting: int,
    now: datetime,
) -> int:
    """How many more nodes may be disrupted for ``reason`` (module docstring)."""
    limits = [b.scaled(total_nodes) for b in budgets if b.applies_to(reason) and b.is_active(now)]
    limit = min(limits) if limits else UNLIMITED
    return max(0, limit - disrupting)


def parse_budgets(text: str) -> tuple[DisruptionBudget, ...]:
    """The ``--consolidation-budgets`` syntax (module docstring)."""
    budgets: list[DisruptionBudget] = []
    for raw in filter(None, (part.strip() for part in text.split(";"))):
        fields: dict[str, str] = {}
        for item in raw.split(","):
            key, eq, value = item.strip().partition("=")
            if not eq or key not in ("nodes", "reasons", "schedule", "duration"):
                raise DisruptionBudgetError(
                    f"{item.strip()!r} is not nodes=, reasons=, schedule= or duration="
                )
            fields[key] = value.strip()
        if "nodes" not in fields:
            raise DisruptionBudgetError(f"budget {raw!r} has no nodes=")
        try:
            duration = (
                timedelta(seconds=parse_duration(fields["duration"]))
                if "duration" in fields
                else None
            )
        except argparse.ArgumentTypeError as err:
            raise DisruptionBudgetError(f"duration: {err}") from None
        budgets.append(
            DisruptionBudget(
                nodes=fields["nodes"],
                reasons=tuple(r for r in fields.get("reasons", "").split("|") if r),
                schedule=CronSchedule.parse(fields["schedule"]) if "schedule" in fields else None,
                duration=duration,
            )
        )
    return tuple(budgets)
