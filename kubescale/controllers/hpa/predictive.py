"""Predictive scale-up from the workload's own history (kubescale's addition; opt-in per HPA).

Annotation ``hpa.kubescale.io/predictive: "true"`` (optionally
``hpa.kubescale.io/predictive-lead-seconds``, default 300: how far ahead to provision —
pod start-up plus a sync period or two).

What is learnt is the HPA's **demand**: for its first metric, the metric's total over the
ready pods in units of its target — utilization% × ready pods ÷ target% for a Utilization
target, average × ready pods ÷ target for AverageValue targets, value ÷ target for Value
targets — i.e. the replica count that would have put the metric exactly on target. One
sample per minute (the last of the minute), kept 8 days (bounded: 11,520 per HPA).

The forecast for a minute ``m`` ahead is seasonal, scaled from the present: the recent demand
(mean of the last 3 minutes) times the growth the same stretch showed one day and one week
earlier — the demand around ``m`` minutes later then (mean over ±2 minutes) divided by the
demand at the same time then (mean of 3 minutes) — clamped to [0.5, 3], taking the **lower**
of the daily and weekly growth when both are known (a rise must show in both to count). The
point forecast ``F`` is the max of these forecasts over the next lead minutes; without a
day (or week) of history the growth is 1 (persistence: the recent demand).

**Error model** (split-conformal, from the forecaster's own residuals): every forecast ``F``
made at minute ``t`` is scored once its window has passed, as the ratio ``R / F`` of the
highest demand actually seen in ``t+1 … t+lead`` to ``F``. The last day of ratios (1,440)
is kept; the proposal is ``ceil(F × q)`` where ``q`` is their ``coverage`` quantile: the
replica count that would have covered the next lead minutes' peak in that share of the last
day's forecasts. The default, 0.5 (the median: ``F`` corrected for its own bias, which
includes the peak-over-mean of the lead window), was chosen on WorldCup98 alone; higher
coverages cost more replica-minutes than they save overloaded minutes there
(``docs/hpa-predictive.md``). With fewer than an hour of scored forecasts ``q`` is 1. The
ratio (not the difference) makes ``q`` independent of the demand's scale.

**Square-root error model** (``error_model="sqrt"``, issue 31's second attempt; a bench option
only — it did not get beyond the reactive frontier on the validation series, so the loop keeps
the ratio model; ``docs/hpa-predictive.md``): the same scored forecasts, with the residual taken
on the square-root scale, ``d = √R − √F``, and the proposal ``ceil((√F + q_d)²)`` with ``q_d``
the ``coverage`` quantile of the last day's ``d``. The reason: request counts are arrivals, and
for Poisson-like arrivals the spread of a minute's count grows with the square root of its mean
— the square root is their variance-stabilising transform (Anscombe), so residuals pooled over a
day of quiet nights and busy afternoons have one spread on that scale, where ratios (a constant
*relative* error) overstate the noise at the busy hours and understate it at the quiet ones. A
bound on this scale holds relatively more headroom at low load and less at high load, which a
fixed HPA target cannot. The coverage is not searched: ``coverage_from_target`` gives the HPA's
own target (a 70 % target covers 70 % of the next windows' peaks: the share of a paid replica
the operator chose to use is the share of windows whose peak the replicas are sized for).

Rules that keep it safe:

* a prediction never scales down: the proposal only joins the other metrics' proposals
  through upstream's **max**, and only when it is above the current count;
* it goes through the same normalization as any proposal, so the HPA's behavior (or the
  legacy scale-up limit) and ``maxReplicas`` bound it;
* without any recorded demand there is no prediction;
* the forecast is applied but not remembered as a recommendation
  (:func:`~.normalization.normalize`'s ``recorded``), so a rise that does not come is not
  held for a whole downscale stabilization window.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from kubescale.controllers.hpa.hpa_spec import HpaSpecError, MetricSpec
from kubescale.objects.hpa import HorizontalPodAutoscaler, MetricStatus, MetricValueStatus
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta

__all__ = [
    "LEAD_ANNOTATION",
    "PREDICTIVE_ANNOTATION",
    "DemandHistory",
    "ErrorModel",
    "PredictiveSettings",
    "coverage_from_target",
    "demand_of",
    "predictive_settings",
]

PREDICTIVE_ANNOTATION: Final = "hpa.kubescale.io/predictive"
LEAD_ANNOTATION: Final = "hpa.kubescale.io/predictive-lead-seconds"
DEFAULT_LEAD: Final = timedelta(seconds=300)
DAY_MINUTES: Final = 1440
WEEK_MINUTES: Final = 7 * DAY_MINUTES
KEEP_MINUTES: Final = WEEK_MINUTES + DAY_MINUTES
RECENT_MINUTES: Final = 3
SMOOTH_MINUTES: Final = 2
GROWTH_CLAMP: Final = (0.5, 3.0)
DEFAULT_COVERAGE: Final = 0.5
RESIDUAL_MINUTES: Final = DAY_MINUTES
MIN_RESIDUALS: Final = 60

ErrorModel = Literal["ratio", "sqrt"]
ERROR_MODELS: Final[tuple[ErrorModel, ...]] = ("ratio", "sqrt")


def coverage_from_target(target_percent: int) -> float:
    """The square-root error model's coverage for an HPA target of ``target_percent`` %
    (module docstring): the target as a share, kept inside (0, 1)."""
    if not 0 < target_percent <= 100:
        raise ValueError(f"target: must be a percentage in (0, 100], got {target_percent!r}")
    return min(target_percent / 100, 0.99)


@dataclass(frozen=True, kw_only=True)
class PredictiveSettings:
    lead: timedelta = DEFAULT_LEAD


def predictive_settings(hpa: HorizontalPodAutoscaler) -> PredictiveSettings | None:
    annotations = Meta(hpa).raw.get("annotations") or {}
    if str(annotations.get(PREDICTIVE_ANNOTATION, "")).lower() != "true":
        return None
    raw = annotations.get(LEAD_ANNOTATION)
    if raw is None:
        return PredictiveSettings()
    try:
        seconds = int(str(raw))
    except ValueError:
        seconds = 0
    if not 60 <= seconds <= 3600:
        raise HpaSpecError(
            f"metadata.annotations[{LEAD_ANNOTATION}]: must be whole seconds in [60, 3600], "
            f"got {raw!r}"
        )
    return PredictiveSettings(lead=timedelta(seconds=seconds))


def _minute(moment: datetime) -> int:
    return int(moment.timestamp()) // 60


class DemandHistory:
    """One HPA's demand per minute (module docstring); bounded to :data:`KEEP_MINUTES`."""

    def __init__(
        self, *, coverage: float = DEFAULT_COVERAGE, error_model: ErrorModel = "ratio"
    ) -> None:
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage: must be in (0, 1), got {coverage!r}")
        if error_model not in ERROR_MODELS:
            raise ValueError(
                f"error_model: must be one of {', '.join(ERROR_MODELS)}, got {error_model!r}"
            )
        self.coverage = coverage
        self.error_model: ErrorModel = error_model
        self._values: dict[int, float] = {}
        self._order: deque[int] = deque()
        # forecasts waiting to be scored: (minute made, lead minutes, point forecast F)
        self._pending: deque[tuple[int, int, float]] = deque(maxlen=RESIDUAL_MINUTES)
        # scored residuals (ratios R / F, or √R − √F), and the same in order (for the quantile)
        self._ratios: deque[float] = deque()
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._values)

    def record(self, moment: datetime, demand: float) -> None:
        """The demand measured at ``moment`` (the last sample of a minute wins)."""
        if math.isnan(demand) or demand < 0:
            return
        minute = _minute(moment)
        if minute not in self._values:
            self._order.append(minute)
        self._values[minute] = demand
        while self._order and self._order[0] <= minute - KEEP_MINUTES:
            self._values.pop(self._order.popleft(), None)
        self._score(minute)

    def _score(self, minute: int) -> None:
        """Score the forecasts whose whole window ended by ``minute`` (module docstring)."""
        while self._pending and self._pending[0][0] + self._pending[0][1] <= minute:
            made, ahead, forecast = self._pending.popleft()
            seen = [self._values[m] for m in range(made + 1, made + ahead + 1) if m in self._values]
            if not seen or (self.error_model == "ratio" and forecast <= 0):
                continue
            peak = max(seen)
            if self.error_model == "sqrt":
                residual = math.sqrt(peak) - math.sqrt(forecast)
            else:
                residual = peak / forecast
            self._ratios.append(residual)
            bisect.insort(self._sorted, residual)
            if len(self._ratios) > RESIDUAL_MINUTES:
                old = self._ratios.popleft()
                del self._sorted[bisect.bisect_left(self._sorted, old)]

    def quantile(self) -> float:
        """The ``coverage`` quantile of the scored residuals (nearest rank); with fewer than
        :data:`MIN_RESIDUALS` of them, the point forecast alone (ratio 1, difference 0)."""
        ordered = self._sorted
        if len(ordered) < MIN_RESIDUALS:
            return 1.0 if self.error_model == "ratio" else 0.0
        rank = math.ceil(self.coverage * len(ordered))
        return ordered[min(len(ordered), max(rank, 1)) - 1]

    def _mean(self, start: int, end: int) -> float | None:
        values = [self._values[m] for m in range(start, end) if m in self._values]
        return sum(values) / len(values) if values else None

    def forecast(self, now: datetime, *, lead: timedelta) -> float | None:
        """The highest seasonal forecast of demand over the next ``lead`` (the point forecast
        ``F``); None without recent demand (module docstring)."""
        now_minute = _minute(now)
        recent = self._mean(now_minute - RECENT_MINUTES + 1, now_minute + 1)
        if recent is None:
            return None
        low, high = GROWTH_CLAMP
        best: float | None = None
        for ahead in range(1, max(1, int(lead.total_seconds()) // 60) + 1):
            growths = []
            for lag in (DAY_MINUTES, WEEK_MINUTES):
                base = self._mean(now_minute - lag - RECENT_MINUTES + 1, now_minute - lag + 1)
                then = self._mean(
                    now_minute + ahead - lag - SMOOTH_MINUTES,
                    now_minute + ahead - lag + SMOOTH_MINUTES + 1,
                )
                if base is not None and then is not None and base > 0:
                    growths.append(min(high, max(low, then / base)))
            value = recent * min(growths) if growths else recent
            best = value if best is None else max(best, value)
        return best

    def proposal(self, now: datetime, *, lead: timedelta) -> int | None:
        """``ceil(F × q)``: the replicas that would meet the forecast's ``coverage`` upper
        bound (module docstring). Each call's ``F`` is scored later, once per minute."""
        value = self.forecast(now, lead=lead)
        if value is None:
            return None
        minute = _minute(now)
        ahead = max(1, int(lead.total_seconds()) // 60)
        if not self._pending or self._pending[-1][0] != minute:
            self._pending.append((minute, ahead, value))
        if self.error_model == "sqrt":
            root = max(0.0, math.sqrt(value) + self.quantile())
            return math.ceil(root * root - 1e-9)
        return math.ceil(value * self.quantile() - 1e-9)


def demand_of(metric: MetricSpec, status: MetricStatus, *, ready: int) -> float | None:
    """The metric's total over the pods in units of its target (module docstring), from its
    ``MetricStatus``; None when the status has no usable value."""
    target = metric.target
    if target is None:
        return None
    # The one source block the status's ``type`` names (statuses are the proposals' own).
    body = (
        status.get("resource")
        or status.get("containerResource")
        or status.get("pods")
        or status.get("object")
        or status.get("external")
    )
    current: MetricValueStatus = (body.get("current") if body else None) or {}
    from_quantity = _quantity_milli
    if target.average_utilization:
        utilization = current.get("averageUtilization")
        if isinstance(utilization, int):
            return utilization * ready / target.average_utilization
    if target.average_value_milli:
        average = from_quantity(current.get("averageValue"))
        if average is not None:
            return average * ready / target.average_value_milli
    if target.value_milli:
        value = from_quantity(current.get("value"))
        if value is not None:
            return value / target.value_milli
    return None


def _quantity_milli(value: object) -> int | None:
    try:
        return Quantity.from_json(value).milli_value()
    except QuantityError:
        return None
