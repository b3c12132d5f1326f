"""A VPA's ``status`` as the recommender writes it: recommendation and conditions, only if changed.

Upstream (``model/vpa.go``, ``input/cluster_feeder.go``, ``routines/recommender.go UpdateVPAs``,
``utils/vpa/api.go UpdateVpaStatusIfNeeded``):

* conditions start as the VPA object's own (``AddOrUpdateVpa`` copies them), then:

  - ``ConfigUnsupported`` is set True (no reason, the feeder's message) when the target cannot
    be read or is not a top-most controller, and deleted otherwise; ``ConfigDeprecated`` is
    always deleted;
  - ``NoPodsMatched`` is set True (reason ``NoPodsMatched``, message ``No pods match this VPA
    object``) when no live pod matches, deleted otherwise;
  - ``RecommendationProvided`` is True (no reason) with a non-empty recommendation, else False
    with ``NoPodsMatched``'s reason and message when no pod matches (empty otherwise);

  setting a condition keeps its ``lastTransitionTime`` when its status did not change, else
  stamps now; the list is sorted by type; other conditions (``LowConfidence`` ...) are kept;
* the status is ``{conditions, recommendation}`` (``recommendation: {}`` when no container has
  one: upstream's empty list is ``omitempty``), plus ``observedGeneration`` (the object's
  ``metadata.generation``, reference §2.8);
* it is written only when it differs *semantically* from the object's status
  (``apiequality.Semantic.DeepEqual``: quantities by value, times by instant, an empty list or
  map equal to a missing one, but a missing ``recommendation`` not equal to ``{}``), as a JSON
  patch ``[{"op": "add", "path": "/status", "value": ...}]`` on the ``status`` subresource.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final, cast

from kubescale.base.times import parse_time
from kubescale.controllers.vpa.model.cluster_state import VpaRecommendation
from kubescale.kube.resources import VERTICAL_POD_AUTOSCALERS
from kubescale.objects.meta import Condition
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, mapping, status_of
from kubescale.objects.vpa import VerticalPodAutoscaler, VerticalPodAutoscalerStatus
from kubescale.plans.intents import ObjectRef, PatchObject

__all__ = [
    "CONFIG_DEPRECATED",
    "CONFIG_UNSUPPORTED",
    "FETCHING_HISTORY",
    "NO_PODS_MATCHED",
    "NO_PODS_MATCHED_MESSAGE",
    "RECOMMENDATION_PROVIDED",
    "condition_active",
    "desired_status",
    "had_recommendation",
    "status_changed",
    "status_patch",
]

RECOMMENDATION_PROVIDED: Final = "RecommendationProvided"
NO_PODS_MATCHED: Final = "NoPodsMatched"
CONFIG_UNSUPPORTED: Final = "ConfigUnsupported"
CONFIG_DEPRECATED: Final = "ConfigDeprecated"
FETCHING_HISTORY: Final = "FetchingHistory"
NO_PODS_MATCHED_MESSAGE: Final = "No pods match this VPA object"
_TRUE, _FALSE = "True", "False"


def _format_time(moment: datetime) -> str:
    """metav1.Time: RFC 3339, UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(status: VerticalPodAutoscalerStatus) -> list[Condition]:
    # Read as sent: a malformed list or entry reads as none (the object is not validated).
    conditions: object = status.get("conditions")
    if not isinstance(conditions, list):
        return []
    return [cast(Condition, c) for c in conditions if isinstance(c, Mapping)]


def condition_active(vpa: VerticalPodAutoscaler, condition_type: str) -> bool:
    """``ConditionActive``: the VPA's status has the condition with status True."""
    for condition in _conditions(status_of(vpa)):
        if condition.get("type") == condition_type:
            return condition.get("status") == _TRUE
    return False


def had_recommendation(vpa: VerticalPodAutoscaler) -> bool:
    """Whether the model starts from a recommendation: upstream takes the object's
    ``status.recommendation`` only when ``RecommendationProvided`` is True."""
    if not condition_active(vpa, RECOMMENDATION_PROVIDED):
        return False
    recommendation = mapping(status_of(vpa).get("recommendation"))
    entries = recommendation.get("containerRecommendations")
    return isinstance(entries, list) and bool(entries)


class _Conditions:
    """``vpaConditionsMap``: conditions by type, with upstream's ``Set``."""

    def __init__(self, existing: list[Condition], now: datetime) -> None:
        self._by_type: dict[str, Condition] = {}
        for condition in existing:
            kind = condition.get("type")
            if isinstance(kind, str):
                self._by_type[kind] = Condition(**condition)
        self._now = _format_time(now)

    def set(self, kind: str, status: bool, reason: str = "", message: str = "") -> None:
        text = _TRUE if status else _FALSE
        condition: Condition = {"type": kind, "status": text}
        old = self._by_type.get(kind)
        if old is not None and old.get("status") == text and old.get("lastTransitionTime"):
            condition["lastTransitionTime"] = old["lastTransitionTime"]
        else:
            condition["lastTransitionTime"] = self._now
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        self._by_type[kind] = condition

    def delete(self, kind: str) -> None:
        self._by_type.pop(kind, None)

    def as_list(self) -> list[Condition]:
        return [self._by_type[kind] for kind in sorted(self._by_type)]


def desired_status(
    vpa: VerticalPodAutoscaler,
    recommendation: VpaRecommendation,
    *,
    unsupported: str | None,
    now: datetime,
) -> VerticalPodAutoscalerStatus:
    """The status upstream would write for ``vpa`` after this iteration (module docstring).

    ``unsupported`` is the ``ConfigUnsupported`` message of a VPA whose target could not be
    used (:class:`kubescale.controllers.vpa.api.vpa_targets.TargetCheck`), ``None`` for a usable
    one.
    """
    status = status_of(vpa)
    conditions = _Conditions(_conditions(status), now)
    if unsupported is not None:
        conditions.set(CONFIG_UNSUPPORTED, True, "", unsupported)
    else:
        conditions.delete(CONFIG_UNSUPPORTED)
    conditions.delete(CONFIG_DEPRECATED)
    reason = message = ""
    if recommendation.has_matching_pods:
        conditions.delete(NO_PODS_MATCHED)
    else:
        reason, message = NO_PODS_MATCHED, NO_PODS_MATCHED_MESSAGE
        conditions.set(NO_PODS_MATCHED, True, reason, message)
    if recommendation.has_recommendation:
        conditions.set(RECOMMENDATION_PROVIDED, True)
    else:
        conditions.set(RECOMMENDATION_PROVIDED, False, reason, message)
    entries = recommendation.container_recommendations
    new: VerticalPodAutoscalerStatus = {
        "conditions": conditions.as_list(),
        "recommendation": {"containerRecommendations": entries} if entries else {},
    }
    generation = Meta(vpa).raw.get("generation")
    if isinstance(generation, int) and generation > 0:
        new["observedGeneration"] = generation
    return new


# -- semantic equality (apiequality.Semantic.DeepEqual on VerticalPodAutoscalerStatus) ---------


def _time_value(value: object) -> object:
    if not isinstance(value, str) or not value:
        return None
    moment = parse_time(value)
    return moment.timestamp() if moment is not None else value


def _quantity_value(value: object) -> object:
    try:
        return Quantity.from_json(value).as_fraction()
    except (QuantityError, TypeError, ValueError):
        return ("unparsable", repr(value))


def _resource_list(value: object) -> tuple[tuple[str, object], ...]:
    items = mapping(value)
    return tuple(sorted((str(name), _quantity_value(q)) for name, q in items.items()))


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _canonical(status: VerticalPodAutoscalerStatus) -> tuple[object, ...]:
    conditions = tuple(
        (
            _text(c.get("type")),
            _text(c.get("status")),
            _time_value(c.get("lastTransitionTime")),
            _text(c.get("reason")),
            _text(c.get("message")),
            _int(c.get("observedGeneration")),
        )
        for c in _conditions(status)
    )
    raw = status.get("recommendation")
    recommendation: object = None
    if isinstance(raw, Mapping):
        entries: object = raw.get("containerRecommendations")  # entries may be malformed
        recommendation = tuple(
            (
                _text(entry.get("containerName")),
                _resource_list(entry.get("target")),
                _resource_list(entry.get("lowerBound")),
                _resource_list(entry.get("upperBound")),
                _resource_list(entry.get("uncappedTarget")),
            )
            for entry in (entries if isinstance(entries, list) else [])
            if isinstance(entry, Mapping)
        )
    return (conditions, recommendation, _int(status.get("observedGeneration")))


def status_changed(
    old: VerticalPodAutoscalerStatus | None, new: VerticalPodAutoscalerStatus
) -> bool:
    """``!Semantic.DeepEqual(old, new)`` for two VPA statuses (module docstring)."""
    return _canonical(old or {}) != _canonical(new)


def status_patch(
    vpa: VerticalPodAutoscaler, status: VerticalPodAutoscalerStatus, *, actor: str
) -> PatchObject:
    """The intent ``add /status`` through the status subresource (a JSON patch, as upstream)."""
    metadata = Meta(vpa).raw
    return PatchObject(
        actor=actor,
        target=ObjectRef(
            VERTICAL_POD_AUTOSCALERS,
            str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""),
        ),
        patch=[{"op": "add", "path": "/status", "value": dict(status)}],
        patch_type="json",
        subresource="status",
    )
