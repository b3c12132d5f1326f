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

Matching (top-most controller and VPA) is remembered per owner reference and labels in a
:class:`~kubescale.controllers.vpa.admission.match_cache.MatchCache` and used only while every
informer object it read is unchanged; ``admit_pod``'s answer comes from a
:class:`~kubescale.controllers.vpa.admission.decision_cache.DecisionCache` keyed by everything it
depends on (the pod's containers, the VPA's and LimitRanges' resourceVersions, the HPAs and largest
node behind their flags), computed on a miss from the pod's projection
(:func:`~kubescale.controllers.vpa.admission.decision_cache.decision_pod`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.controllers.vpa.admission.decision_cache import DecisionCache, admit_cached
from kubescale.controllers.vpa.admission.match_cache import Match, MatchCache, OwnerRead, match_key
from kubescale.controllers.vpa.api.controller_refs import (
    ControllerRef,
    controller_owner_ref,
    topmost_controller,
)
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.controllers.vpa.api.vpa_matching import choose_vpa, target_ref_of
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta

__all__ = [
    "CachedPodAdmission",
    "HpaConflict",
    "LimitRangeOverride",
    "PodDecision",
    "pod_namespace",
]


@dataclass(frozen=True, kw_only=True)
class HpaConflict:
    """Resources left alone for HPAs on the VPA's target (``--avoid-hpa-conflict``)."""

    vpa: dict[str, Any]
    target: ControllerRef
    hpas: tuple[HorizontalPodAutoscaler, ...]
    resources: frozenset[str]


@dataclass(frozen=True, kw_only=True)
class LimitRangeOverride:
    """Where the namespace's LimitRanges overrode what the VPA wanted for a pod."""

    vpa: dict[str, Any]
    target: ControllerRef | None
    conflicts: tuple[LimitRangeConflict, ...]


@dataclass(frozen=True, kw_only=True)
class PodDecision:
    """The outcome for one pod (see the module docstring)."""

    patches: tuple[dict[str, Any], ...] = ()
    """The JSON patch (shared with the decision cache: never modify it)."""
    encoded_patch: str = ""
    """``patches`` as the review carries them (base64 of the compact JSON); ``""`` for none."""
    wait_for: tuple[str, str, str] | None = None
    """``(kind, namespace, name)`` of a well-known controller missing from its informer."""
    not_matched: str | None = None
    """Why no VPA could be looked up, when something was not available."""
    hpa_conflict: HpaConflict | None = None
    limit_range_override: LimitRangeOverride | None = None
    match: tuple[Hashable, Match] | None = None
    """The match cache's key and entry this decision was made with, when it is remembered
    there: while :meth:`MatchCache.get` gives that same entry for the key, and no input
    listener dropped what it was made with, the same pod gets the same decision."""


def pod_namespace(pod: Mapping[str, Any]) -> str:
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
    (:class:`AdmissionOptions`), remembering
    ``admit_pod``'s answers in ``decisions`` (pass ``DecisionCache(max_entries=0)`` for none)."""

    def __init__(
        self,
        *,
        caches: AdmissionCaches,
        settings: AdmissionOptions,
        decisions: DecisionCache | None = None,
        matches: MatchCache | None = None,
    ) -> None:
        self.caches = caches
        self.settings = settings
        self.decisions = decisions if decisions is not None else DecisionCache()
        self.matches = matches if matches is not None else MatchCache()
        """Top-most controller and VPA per owner reference and labels, checked against the
        informers on every use (:mod:`kubescale.controllers.vpa.admission.match_cache`)."""
        caches.on_input_change(self.decisions)
        caches.on_namespace_deleted(self.matches.forget_namespace)

    def decide(self, pod: dict[str, Any], *, may_wait: bool) -> PodDecision:
        """The decision for ``pod`` (its namespace set); may raise ``PodAdmissionError``."""
        caches = self.caches
        if not caches.synced:
            return PodDecision(not_matched="caches-not-synced")
        key = match_key(pod)
        if key is not None:
            known = self.matches.get(key, lookup=caches.owner, vpas_for=caches.vpas_for)
            if known is not None:
                # Made from informers only: nothing was queued, nothing is missing.
                if known.vpa is None:
                    return PodDecision(match=(key, known))
                return self._patch(pod, known.vpa, not_matched=None, match=(key, known))
        pending_before = caches.controllers.scale_lookups.pending
        misses: list[tuple[str, str, str]] = []
        reads: list[OwnerRead] = []
        cacheable = key is not None

        def owner(api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
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
        if direct is not None and not caches.informs(direct.kind):
            # First sight of a controller without an informer: queue its lookup together with
            # its kind's discovery (topmost_controller asks for the kind first, then the object).
            caches.owner(direct.api_version, direct.kind, direct.namespace, direct.name)
            cacheable = False
        controller = topmost_controller(pod, lookup=owner, scalable_kinds=is_scalable)
        vpa: dict[str, Any] | None = None
        candidates: list[dict[str, Any]] = []
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
        remembered: tuple[Hashable, Match] | None = None
        if cacheable and not misses and not_matched is None and key is not None:
            stored = self.matches.put(
                key,
                controller=controller,
                vpa=vpa,
                reads=reads,
                vpas=candidates,
                namespace=pod_namespace(pod),
            )
            remembered = (key, stored) if stored is not None else None
        if vpa is None:
            return PodDecision(not_matched=not_matched, match=remembered)
        return self._patch(pod, vpa, not_matched=not_matched, match=remembered)

    def _patch(
        self,
        pod: dict[str, Any],
        vpa: dict[str, Any],
        *,
        not_matched: str | None,
        match: tuple[Hashable, Match] | None = None,
    ) -> PodDecision:
        caches, settings = self.caches, self.settings
        target = target_ref_of(vpa)
        hpas: list[HorizontalPodAutoscaler] = []
        if settings.avoid_hpa_conflict and target is not None:
            hpas = caches.hpas_for(target.namespace, target.kind, target.name)
        namespace = target.namespace if target else pod_namespace(pod)
        admission = admit_cached(
            self.decisions,
            pod=pod,
            namespace=namespace,
            vpa=vpa,
            limit_ranges=caches.limit_ranges(namespace),
            hpas=hpas,
            avoid_hpa_conflict=settings.avoid_hpa_conflict,
            largest_node_allocatable=(
                caches.largest_node_allocatable() if settings.cap_to_largest_node else None
            ),
            cap_to_largest_node=settings.cap_to_largest_node,
            startup_boost=settings.startup_boost,
        )
        conflict = None
        if admission.skipped_resources and target is not None:
            conflict = HpaConflict(
                vpa=vpa, target=target, hpas=tuple(hpas), resources=admission.skipped_resources
            )
        override = None
        if admission.limit_range_conflicts:
            override = LimitRangeOverride(
                vpa=vpa, target=target, conflicts=admission.limit_range_conflicts
            )
        return PodDecision(
            patches=admission.patches,
            encoded_patch=admission.encoded_patch,
            not_matched=not_matched,
            hpa_conflict=conflict,
            limit_range_override=override,
            match=match,
        )
