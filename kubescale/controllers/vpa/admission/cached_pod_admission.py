"""One pod's admission decided from the caches: which VPA, which patches, what was missing.

This is the glue between the informer caches
(:mod:`kubescale.controllers.vpa.admission.admission_caches`) and the pure decisions:
:func:`~kubescale.controllers.vpa.api.controller_refs.topmost_controller` over the cached
owners, :func:`~kubescale.controllers.vpa.api.vpa_matching.choose_vpa` over the VPAs indexed by
target, then :func:`~kubescale.controllers.vpa.api.pod_admission.admit_pod` with the namespace's
LimitRanges and, behind their flags, the HPAs scaling the target and the largest Ready node. It
reads memory only and has no side effects beyond queuing background lookups; the route
(:mod:`kubescale.webhook.admission_routes`) turns the :class:`PodDecision` into an answer, metrics,
log lines and events (``HPAConflict``, and ``LimitRangeConflict`` when a LimitRange of the
namespace overrode what the VPA wanted: :class:`LimitRangeOverride`).

What can be missing, and what the decision says about it:

- the caches have not synced yet → no patch, ``not_matched="caches-not-synced"``;
- a well-known controller in the pod's owner chain (or the VPA's target) is not in its informer
  yet — typically the ReplicaSet created a moment before the pod → ``wait_for`` names it, so the
  route can wait for the informer and decide again (:meth:`CachedPodAdmission.decide` with
  ``may_wait=False`` never asks to wait);
- a controller of a kind without informer was seen for the first time → its kind and object
  lookups are queued (:mod:`kubescale.kube.scale_lookups`), no patch,
  ``not_matched="controller-lookup-pending"``.

``admit_pod``'s answer comes from the one
:class:`~kubescale.controllers.vpa.admission.admission_memo.AdmissionMemo`, by the decision's
complete inputs. A match made from informers only comes with the decision
(:attr:`PodDecision.answered`), so the route can remember the answer under its question, and
:meth:`CachedPodAdmission.current` tells whether such an answer still holds: its match's
objects are still the informers', and its inputs computed anew are the same. A match that read
a controller of a kind without informer (``/scale`` lookups, answered asynchronously), or
found an informed controller missing, is never remembered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.controllers.vpa.admission.admission_memo import (
    AdmissionMemo,
    Answered,
    Decided,
    Match,
    OwnerRead,
    admit_cached,
    allocatable_key,
    match_unchanged,
    object_versions,
)
from kubescale.controllers.vpa.api.controller_refs import (
    ControllerRef,
    controller_owner_ref,
    topmost_controller,
)
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.controllers.vpa.api.vpa_matching import choose_vpa, target_ref_of
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = [
    "AdmissionOptions",
    "CachedPodAdmission",
    "HpaConflict",
    "LimitRangeOverride",
    "PodDecision",
    "pod_namespace",
]


@dataclass(frozen=True, kw_only=True)
class HpaConflict:
    """Resources left alone for HPAs on the VPA's target (``--avoid-hpa-conflict``)."""

    vpa: VerticalPodAutoscaler
    target: ControllerRef
    hpas: tuple[HorizontalPodAutoscaler, ...]
    resources: frozenset[str]


@dataclass(frozen=True, kw_only=True)
class LimitRangeOverride:
    """Where the namespace's LimitRanges overrode what the VPA wanted for a pod."""

    vpa: VerticalPodAutoscaler
    target: ControllerRef | None
    conflicts: tuple[LimitRangeConflict, ...]


@dataclass(frozen=True, kw_only=True)
class PodDecision:
    """The outcome for one pod (see the module docstring)."""

    decided: Decided | None = None
    """The decision and its answer's bytes (shared with the memo: never modify it); ``None``
    when the pod could not be decided (caches not synced, a controller to wait for)."""
    wait_for: tuple[str, str, str] | None = None
    """``(kind, namespace, name)`` of a well-known controller missing from its informer."""
    not_matched: str | None = None
    """Why no VPA could be looked up, when something was not available."""
    hpa_conflict: HpaConflict | None = None
    limit_range_override: LimitRangeOverride | None = None
    answered: Answered | None = None
    """The answer as the memo keeps it under its question, when the match was made from
    informers only (nothing queued, nothing missing) and the inputs carry versions: while
    :meth:`CachedPodAdmission.current` holds for it, the same pod gets the same decision."""

    @property
    def patches(self) -> tuple[JsonPatchOperation, ...]:
        """The JSON patch (shared with the memo: never modify it; raw JSON operations)."""
        return self.decided.patches if self.decided is not None else ()

    @property
    def encoded_patch(self) -> str:
        """``patches`` as the review carries them (base64 of the compact JSON); ``""`` for
        none."""
        return self.decided.encoded_patch if self.decided is not None else ""


def pod_namespace(pod: Pod) -> str:
    """``metadata.namespace`` of a pod (its namespace set), ``""`` when missing."""
    namespace = Meta(pod).raw.get("namespace")
    return namespace if isinstance(namespace, str) else ""


@dataclass(frozen=True, kw_only=True)
class AdmissionOptions:
    """kubescale's beyond-upstream admission options (the webhook's ``--avoid-hpa-conflict`` and
    ``--cap-to-largest-node``)."""

    avoid_hpa_conflict: bool = False
    cap_to_largest_node: bool = False
    startup_boost: StartupBoostSettings | None = None
    """The ``CPUStartupBoost`` gate is on (upstream's, not beyond it)."""


class CachedPodAdmission:
    """Decides pods from ``caches`` with ``settings``' beyond-upstream options
    (:class:`AdmissionOptions`), remembering ``admit_pod``'s answers in ``memo`` (pass
    ``AdmissionMemo(max_entries=0)`` for none)."""

    def __init__(
        self,
        *,
        caches: AdmissionCaches,
        settings: AdmissionOptions,
        memo: AdmissionMemo | None = None,
    ) -> None:
        self.caches = caches
        self.settings = settings
        self.memo = memo if memo is not None else AdmissionMemo()
        caches.on_input_change(self.memo)

    def decide(self, pod: Pod, *, may_wait: bool) -> PodDecision:
        """The decision for ``pod`` (its namespace set); may raise ``PodAdmissionError``."""
        caches = self.caches
        if not caches.synced:
            return PodDecision(not_matched="caches-not-synced")
        pending_before = caches.controllers.scale_lookups.pending
        misses: list[tuple[str, str, str]] = []
        reads: list[OwnerRead] = []
        cacheable = True

        def owner(
            api_version: str, kind: str, namespace: str, name: str
        ) -> Mapping[str, object] | None:
            nonlocal cacheable
            found = caches.owner(api_version, kind, namespace, name)
            if not caches.informs(kind):
                cacheable = False
            elif found is None:
                misses.append((kind, namespace, name))
                cacheable = False
            else:
                reads.append((api_version, kind, namespace, name, found))
            return found

        def is_scalable(api_version: str, kind: str) -> bool:
            nonlocal cacheable
            if not caches.informs(kind):
                cacheable = False  # discovery: answered asynchronously, may change
            return caches.is_scalable(api_version, kind)

        def selector_of(target: ControllerRef) -> LabelSelector | None:
            nonlocal cacheable
            selector = caches.selector_of(target)
            if not caches.informs(target.kind):
                cacheable = False
                return selector
            found = caches.owner(target.api_version, target.kind, target.namespace, target.name)
            if selector is None or found is None:
                misses.append((target.kind, target.namespace, target.name))
                cacheable = False
            else:
                reads.append(
                    (target.api_version, target.kind, target.namespace, target.name, found)
                )
            return selector

        direct = controller_owner_ref(pod)
        if direct is None:
            cacheable = False  # nothing in the question names what the match read
        elif not caches.informs(direct.kind):
            # First sight of a controller without an informer: queue its lookup together with
            # its kind's discovery (topmost_controller asks for the kind first, then the object).
            caches.owner(direct.api_version, direct.kind, direct.namespace, direct.name)
            cacheable = False
        controller = topmost_controller(pod, lookup=owner, scalable_kinds=is_scalable)
        vpa: VerticalPodAutoscaler | None = None
        candidates: list[VerticalPodAutoscaler] = []
        if controller is not None:
            candidates = caches.vpas_for(controller)
            vpa = choose_vpa(
                pod,
                controller=controller,
                candidate_vpas=candidates,
                selector_of=selector_of,
            )
        if vpa is None and misses and may_wait:
            return PodDecision(wait_for=misses[0])
        not_matched = (
            "controller-lookup-pending"
            if caches.controllers.scale_lookups.pending > pending_before
            else None
        )
        match = None
        if cacheable and not misses and not_matched is None:
            match = Match(
                controller=controller, vpa=vpa, reads=tuple(reads), vpas=tuple(candidates)
            )
        if vpa is None:
            decided = self.memo.no_patch
            answered = None
            if match is not None:
                answered = Answered(decided=decided, inputs=None, match=match)
            return PodDecision(decided=decided, not_matched=not_matched, answered=answered)
        return self._patch(pod, vpa, not_matched=not_matched, match=match)

    def current(self, answered: Answered) -> bool:
        """Whether ``answered`` is still the answer to its question: the objects its match read
        are still the informers' — the VPA among them, so its resourceVersion is the one decided
        with —, and the LimitRanges' (and, behind their flags, the HPAs' and the largest node's)
        versions read anew are the ones in its inputs (:func:`decision_inputs`: the pod's
        projection is the question's, the namespace the VPA's, the flags this object's)."""
        caches = self.caches
        match = answered.match
        if not match_unchanged(match, lookup=caches.owner, vpas_for=caches.vpas_for):
            return False
        inputs = answered.inputs
        vpa = match.vpa
        if vpa is None or inputs is None:
            return vpa is None and inputs is None
        ranges = caches.limit_ranges(str(inputs[1]))
        if ranges is not answered.limit_ranges and object_versions(ranges) != inputs[3]:
            return False
        settings = self.settings
        if settings.avoid_hpa_conflict:
            target = answered.target  # the VPA is the same object (match_unchanged above)
            hpas = caches.hpas_for(target.namespace, target.kind, target.name) if target else []
            if object_versions(hpas) != inputs[4]:
                return False
        if settings.cap_to_largest_node:
            return allocatable_key(caches.largest_node_allocatable()) == inputs[5]
        return True

    def _patch(
        self,
        pod: Pod,
        vpa: VerticalPodAutoscaler,
        *,
        not_matched: str | None,
        match: Match | None,
    ) -> PodDecision:
        caches, settings = self.caches, self.settings
        target = target_ref_of(vpa)
        hpas: list[HorizontalPodAutoscaler] = []
        if settings.avoid_hpa_conflict and target is not None:
            hpas = caches.hpas_for(target.namespace, target.kind, target.name)
        namespace = target.namespace if target else pod_namespace(pod)
        ranges = caches.limit_ranges(namespace)
        decided, inputs = admit_cached(
            self.memo,
            pod=pod,
            namespace=namespace,
            vpa=vpa,
            limit_ranges=ranges,
            hpas=hpas,
            avoid_hpa_conflict=settings.avoid_hpa_conflict,
            largest_node_allocatable=(
                caches.largest_node_allocatable() if settings.cap_to_largest_node else None
            ),
            cap_to_largest_node=settings.cap_to_largest_node,
            startup_boost=settings.startup_boost,
        )
        conflict = None
        if decided.skipped_resources and target is not None:
            conflict = HpaConflict(
                vpa=vpa, target=target, hpas=tuple(hpas), resources=decided.skipped_resources
            )
        override = None
        if decided.limit_range_conflicts:
            override = LimitRangeOverride(
                vpa=vpa, target=target, conflicts=decided.limit_range_conflicts
            )
        answered = None
        if match is not None and inputs is not None:
            answered = Answered(
                decided=decided, inputs=inputs, match=match, limit_ranges=ranges, target=target
            )
        return PodDecision(
            decided=decided,
            not_matched=not_matched,
            hpa_conflict=conflict,
            limit_range_override=override,
            answered=answered,
        )
