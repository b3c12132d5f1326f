"""Which VPA controls a pod: upstream's admission matcher on raw API dicts.

``resource/vpa/matcher.go`` (``GetMatchingVPA``) with the helpers of ``pkg/utils/vpa/api.go``:

1. the pod's top-most well-known or scalable controller
   (:mod:`kubescale.controllers.vpa.api.controller_refs`); none -> no VPA;
2. the VPAs indexed under ``namespace/targetRef.kind/targetRef.name`` of that controller (the
   caller's index; VPAs without a ``targetRef`` are never indexed);
3. a VPA whose effective update mode is ``Off`` is skipped unless it asks for a startup boost
   (``spec.startupBoost`` or any container policy's ``startupBoost``);
4. the VPA's selector is fetched from its target (``selector_of``); a VPA whose selector cannot
   be fetched is skipped; the pod must be in the VPA's namespace and match the selector
   (``PodMatchesVPA``);
5. among the matches the "stronger" wins: the earliest ``creationTimestamp``, then the
   lexicographically smaller name (``stronger``).

Pure: candidates and selectors come from the caller's caches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.vpa_policy import UPDATE_MODE_OFF, update_mode
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, mapping, spec_of
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = [
    "choose_vpa",
    "has_startup_boost",
    "target_ref_of",
]

VpaT = TypeVar("VpaT", bound=VerticalPodAutoscaler)
"""The candidates' type comes back as the answer's."""

# GetUpdateMode: an unset or empty mode means the default (Recreate since Auto's deprecation;
# before it, Auto -- both mean "not Off", which is all admission asks).
_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)


def has_startup_boost(vpa: VerticalPodAutoscaler) -> bool:
    """vpa_api_util.HasStartupBoost: a pod-level or any container-level ``startupBoost``."""
    spec = spec_of(vpa)
    if spec.get("startupBoost") is not None:
        return True
    policies: object = mapping(spec.get("resourcePolicy")).get("containerPolicies")
    if not isinstance(policies, list):
        return False
    return any(
        isinstance(policy, Mapping) and policy.get("startupBoost") is not None
        for policy in policies
    )


def target_ref_of(vpa: VerticalPodAutoscaler) -> ControllerRef | None:
    """The VPA's ``spec.targetRef`` as a controller in the VPA's namespace (``None`` if unset)."""
    target = spec_of(vpa).get("targetRef")
    if not isinstance(target, Mapping):
        return None

    def text(value: object) -> str:
        return value if isinstance(value, str) else ""

    return ControllerRef(
        api_version=text(target.get("apiVersion")),
        kind=text(target.get("kind")),
        name=text(target.get("name")),
        namespace=text(Meta(vpa).raw.get("namespace")),
    )


def _creation_time(obj: VerticalPodAutoscaler) -> datetime:
    # metav1.Time: RFC 3339 at second precision; unset is the zero time (earliest of all).
    moment = parse_time(Meta(obj).raw.get("creationTimestamp"))
    return moment if moment is not None else _ZERO_TIME


def _name(obj: VerticalPodAutoscaler) -> str:
    name = Meta(obj).raw.get("name")
    return name if isinstance(name, str) else ""


def _stronger(a: VerticalPodAutoscaler, b: VerticalPodAutoscaler | None) -> bool:
    """api.go ``Stronger``: is ``a`` before ``b`` in the order to control a pod."""
    if b is None:
        return True
    a_time, b_time = _creation_time(a), _creation_time(b)
    if a_time != b_time:
        return a_time < b_time
    return _name(a) < _name(b)


def _labels(pod: Pod) -> dict[str, str]:
    labels: object = Meta(pod).raw.get("labels")  # malformed labels read empty
    if not isinstance(labels, Mapping):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def choose_vpa(
    pod: Pod,
    *,
    controller: ControllerRef | None,
    candidate_vpas: Sequence[VpaT],
    selector_of: Callable[[ControllerRef], LabelSelector | None],
) -> VpaT | None:
    """The VPA controlling ``pod``, or ``None``.

    ``controller`` is the pod's top-most well-known or scalable controller (``None``: the pod
    is not under any VPA). ``candidate_vpas`` are the VPAs indexed under that controller's
    namespace, kind and name. ``selector_of(targetRef)`` is the label selector of the VPA's
    target, or ``None`` when it cannot be fetched.
    """
    if controller is None:
        return None
    raw_namespace = Meta(pod).raw.get("namespace")
    pod_namespace = raw_namespace if isinstance(raw_namespace, str) else ""
    labels = _labels(pod)
    controlling: VpaT | None = None
    for vpa in candidate_vpas:
        target = target_ref_of(vpa)
        if target is None:
            continue  # TargetRefIndexFunc: a VPA without a targetRef is not indexed
        if (target.namespace, target.kind, target.name) != (
            controller.namespace,
            controller.kind,
            controller.name,
        ):
            continue  # not indexed under this controller (TargetRefIndexKey)
        if update_mode(vpa) == UPDATE_MODE_OFF and not has_startup_boost(vpa):
            continue
        selector = selector_of(target)
        if selector is None:
            continue  # "Skipping VPA object because we cannot fetch selector"
        # PodMatchesVPA -> PodLabelsMatchVPA: same namespace, then the selector.
        if pod_namespace != target.namespace or not selector.matches(labels):
            continue
        if _stronger(vpa, controlling):
            controlling = vpa
    return controlling
