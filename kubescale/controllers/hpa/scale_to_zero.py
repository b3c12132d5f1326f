"""Scale to and from zero with KEDA's semantics, minus its N→0 jump (kubescale's addition).

Opt-in per HPA with annotations:

* ``hpa.kubescale.io/scale-to-zero: "true"``;
* ``hpa.kubescale.io/activation-threshold`` — a quantity (default ``0``): the HPA is *active*
  while any of its Object or External metrics is **strictly above** it (KEDA's ``IsActive``:
  ``value > activationThreshold``);
* ``hpa.kubescale.io/cooldown-period`` — seconds (default 300, KEDA's ``cooldownPeriod``).

As in KEDA (reference §5.1), activation owns 0↔1 and the HPA math owns 1↔N, and activation
wins when they disagree:

* at 0 replicas and active → ``max(minReplicas, 1)``; at 0 and inactive → stay at 0 (instead of
  upstream's ``ScalingDisabled``);
* above 0 and active → the HPA math, and the last active time is now;
* above 0 and inactive → the HPA math with its floor lowered to **1**, so the scale-down
  behavior (policies, stabilization window) walks the count down to one replica; only **at one
  replica**, and once ``cooldown`` has passed since the HPA was last active, the step to 0.
  KEDA jumps N→0 as soon as the cooldown ends (kedacore/keda#7770, #737); here the last step
  is 1→0. With no last active time (first sight, kedacore/keda#5008), the cooldown counts from
  the moment kubescale first saw the HPA rather than scaling to 0 at once.

When an activation metric cannot be read, activity is unknown and nothing crosses zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kubescale.controllers.hpa.hpa_spec import HpaSpecError
from kubescale.controllers.hpa.metric_proposals import ExternalValues, Fetched, ObjectValue
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta

__all__ = [
    "ACTIVATION_THRESHOLD_ANNOTATION",
    "COOLDOWN_ANNOTATION",
    "SCALE_TO_ZERO_ANNOTATION",
    "ZeroDecision",
    "ZeroSettings",
    "activation_value",
    "decide_zero",
    "is_active",
    "zero_settings",
]

SCALE_TO_ZERO_ANNOTATION: Final = "hpa.kubescale.io/scale-to-zero"
ACTIVATION_THRESHOLD_ANNOTATION: Final = "hpa.kubescale.io/activation-threshold"
COOLDOWN_ANNOTATION: Final = "hpa.kubescale.io/cooldown-period"
DEFAULT_COOLDOWN: Final = timedelta(seconds=300)


@dataclass(frozen=True, kw_only=True)
class ZeroSettings:
    activation_threshold_milli: int = 0
    cooldown: timedelta = DEFAULT_COOLDOWN


def zero_settings(hpa: HorizontalPodAutoscaler) -> ZeroSettings | None:
    """The HPA's scale-to-zero settings, or None when not enabled; bad values name the field."""
    annotations = Meta(hpa).raw.get("annotations") or {}
    if str(annotations.get(SCALE_TO_ZERO_ANNOTATION, "")).lower() != "true":
        return None
    threshold = 0
    raw_threshold = annotations.get(ACTIVATION_THRESHOLD_ANNOTATION)
    if raw_threshold is not None:
        try:
            threshold = Quantity.from_json(raw_threshold).milli_value()
        except QuantityError as err:
            raise HpaSpecError(
                f"metadata.annotations[{ACTIVATION_THRESHOLD_ANNOTATION}]: {err}"
            ) from None
    cooldown = DEFAULT_COOLDOWN
    raw_cooldown = annotations.get(COOLDOWN_ANNOTATION)
    if raw_cooldown is not None:
        try:
            seconds = int(str(raw_cooldown))
        except ValueError:
            seconds = -1
        if seconds < 0:
            raise HpaSpecError(
                f"metadata.annotations[{COOLDOWN_ANNOTATION}]: must be a whole number of "
                f"seconds >= 0, got {raw_cooldown!r}"
            )
        cooldown = timedelta(seconds=seconds)
    return ZeroSettings(activation_threshold_milli=threshold, cooldown=cooldown)


def is_active(values: Sequence[int | None], *, threshold_milli: int) -> bool | None:
    """Any activation value strictly above the threshold; None when any value is unknown and
    none is above (activity cannot be decided)."""
    if any(v is not None and v > threshold_milli for v in values):
        return True
    if not values or any(v is None for v in values):
        return None
    return False


@dataclass(frozen=True, kw_only=True)
class ZeroDecision:
    replicas: int | None
    """A count activation imposes, or None: the HPA math decides (with ``floor``)."""
    floor: int
    """The minimum the HPA math may go down to."""
    last_active: datetime | None
    reason: str = ""


def decide_zero(
    *,
    current: int,
    active: bool | None,
    last_active: datetime | None,
    first_seen: datetime,
    min_replicas: int,
    settings: ZeroSettings,
    now: datetime,
) -> ZeroDecision:
    """The module docstring's rules for one reconcile."""
    floor = max(min_replicas, 1)
    if active:
        last_active = now
    if current == 0:
        if active:
            return ZeroDecision(
                replicas=floor, floor=floor, last_active=last_active, reason="activation"
            )
        return ZeroDecision(replicas=0, floor=floor, last_active=last_active, reason="inactive")
    if active is False:
        since = last_active if last_active is not None else first_seen
        if current == 1 and since + settings.cooldown < now:  # KEDA: strictly after
            return ZeroDecision(
                replicas=0, floor=1, last_active=last_active, reason="cooldown elapsed"
            )
        return ZeroDecision(replicas=None, floor=1, last_active=last_active)
    return ZeroDecision(replicas=None, floor=floor, last_active=last_active)


def activation_value(fetched: Fetched | None) -> int | None:
    """An Object metric's value, or an External metric's series summed (milli); None when it
    could not be read."""
    if isinstance(fetched, ObjectValue):
        return fetched.value
    if isinstance(fetched, ExternalValues):
        return sum(fetched.values)
    return None
