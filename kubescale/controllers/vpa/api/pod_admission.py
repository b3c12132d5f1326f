"""Admission of one pod CREATE: the resources upstream's VPA would give it, as a JSON patch.

This composes the pieces in upstream's order (``resource/pod/handler.go`` with the
``ResourceUpdatesCalculator`` and ``ObservedContainersCalculator``):

* no controlling VPA -> no patches at all (the pod is "skipped");
* the pod's namespace LimitRanges are merged into one ``Container`` and one ``Pod`` item
  (:func:`kubescale.controllers.vpa.api.limit_ranges.merged_limit_range_item`);
* the recommendation pipeline (:func:`kubescale.controllers.vpa.api.pod_resources.pod_resources`:
  target -> capping -> limits by ``controlledValues``) yields per-container requests, limits and
  annotation texts;
* :func:`kubescale.controllers.vpa.api.pod_patches.pod_patches` turns them into the exact patch
  sequence.

``applied`` is what upstream's metrics call "applied": at least one patch was produced (a
matching VPA always yields at least the ``vpaObservedContainers`` annotation).

Beyond upstream, always: the pod the patch produces passes the API server -- every request at
most its limit, every LimitRange of the namespace met
(:mod:`kubescale.controllers.vpa.api.limit_range_fit`). Where a LimitRange overrides what the
VPA wanted (its ``minAllowed`` above a ``max``, say), the LimitRange wins, the annotation says
so and ``limit_range_conflicts`` says why, for an Event on the VPA.

Two steps beyond upstream, both off unless asked for:

* ``avoid_hpa_conflict``: resources an HPA on the VPA's target scales on
  (:mod:`kubescale.coordination.resource_ownership`) are left untouched and reported in
  ``skipped_resources`` so the caller can emit an event;
* ``largest_node_allocatable``: the pod's recommended requests are scaled down to fit the
  largest node (done inside :func:`~kubescale.controllers.vpa.api.pod_resources.pod_resources`).

The caller prepares the pod as upstream's handler does before matching: a pod without a name
(``generateName`` only) takes the request's namespace. Pod admission never denies; malformed
input raises :class:`PodAdmissionError`, which the caller answers with ``allowed: true`` and no
patch (upstream logs the error and lets the pod through).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.limit_range_rules import NamespaceLimits
from kubescale.controllers.vpa.api.limit_ranges import merged_limit_range_item
from kubescale.controllers.vpa.api.pod_patches import pod_patches
from kubescale.controllers.vpa.api.pod_resources import pod_resources
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.controllers.vpa.api.vpa_matching import target_ref_of
from kubescale.coordination.resource_ownership import hpas_scaled_resources
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import Meta
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["PodAdmission", "PodAdmissionError", "admit_pod"]


class PodAdmissionError(ValueError):
    """The pod or VPA could not be processed; the pod is admitted unchanged."""


@dataclass(frozen=True)
class PodAdmission:
    """The decision for one pod."""

    patches: list[JsonPatchOperation]
    """JSON patch operations, in upstream's order; empty when no VPA controls the pod."""
    vpa: str | None
    """Name of the controlling VPA, or ``None``."""
    applied: bool
    """At least one patch (upstream's ``applied`` label of the admission metrics)."""
    skipped_resources: frozenset[str]
    """Resources left alone because an HPA on the same target scales on them."""
    limit_range_conflicts: tuple[LimitRangeConflict, ...] = ()
    """Where a LimitRange of the namespace overrode what the VPA wanted (the LimitRange wins;
    the caller records an Event on the VPA)."""


def _vpa_name(vpa: VerticalPodAutoscaler) -> str:
    return Meta(vpa).name


def admit_pod(
    *,
    pod: Pod,
    vpa: VerticalPodAutoscaler | None,
    limit_ranges: Sequence[LimitRange],
    hpas: Sequence[HorizontalPodAutoscaler] = (),
    avoid_hpa_conflict: bool = False,
    largest_node_allocatable: Mapping[str, Quantity] | None = None,
    startup_boost: StartupBoostSettings | None = None,
) -> PodAdmission:
    """The patches for ``pod`` given its controlling ``vpa`` (from :func:`choose_vpa`).

    ``limit_ranges`` are the LimitRange objects of the pod's namespace, in the order the
    caller's cache lists them; ``hpas`` the HPAs of that namespace (read only with
    ``avoid_hpa_conflict``); ``startup_boost``: the ``CPUStartupBoost`` gate is on.
    """
    if vpa is None:
        return PodAdmission(patches=[], vpa=None, applied=False, skipped_resources=frozenset())
    try:
        skipped: frozenset[str] = frozenset()
        if avoid_hpa_conflict:
            skipped = hpas_scaled_resources(hpas, target_ref_of(vpa))
        resources = pod_resources(
            pod=pod,
            vpa=vpa,
            container_limit_range=merged_limit_range_item(limit_ranges, item_type="Container"),
            pod_limit_range=merged_limit_range_item(limit_ranges, item_type="Pod"),
            skip_resources=skipped,
            largest_node_allocatable=largest_node_allocatable,
            namespace_limits=NamespaceLimits.of(limit_ranges),
            startup_boost=startup_boost,
        )
        name = _vpa_name(vpa)
        patches = pod_patches(pod=pod, vpa_name=name, resources=resources)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as error:
        raise PodAdmissionError(f"failed to calculate resource patch for pod: {error}") from error
    return PodAdmission(
        patches=patches,
        vpa=name,
        applied=bool(patches),
        skipped_resources=skipped,
        limit_range_conflicts=resources.conflicts,
    )
