"""Which pods a VPA covers: its target's selector, and whether the target is a top-most controller.

The recommender's ``LoadVPAs`` (``input/cluster_feeder.go getSelector``/``validateTargetRef``)
asks two questions of each VPA's ``spec.targetRef``:

1. the label selector of the target (``VpaTargetSelectorFetcher.Fetch``): a well-known
   controller's from its informer (``spec.selector``; a CronJob's job-template pod labels), any
   other kind's from its ``/scale`` subresource (``status.selector``);
2. whether the target is its own top-most well-known or scalable controller
   (``FindTopMostWellKnownOrScalable(target) == target``). A VPA pointing at a ReplicaSet a
   Deployment owns is "unsupported": it matches no pod.

The answer is a :class:`TargetCheck`: a selector, or ``None`` with the ``ConfigUnsupported``
message upstream writes (``Cannot read targetRef[. Reason: ...]``, ``The target ... has a
parent controller but it should point to a topmost well-known or scalable controller``).

The controller walk (:mod:`kubescale.controllers.vpa.api.controller_refs`) and the selector rules
are the admission webhook's, over the process's shared
:class:`~kubescale.kube.controller_lookups.ControllerLookups`: well-known kinds from informers,
any other kind (a custom resource with ``/scale``) from the ``/scale`` lookups that
:meth:`VpaTargets.refresh` fills from the API server. Upstream's reason strings for ``/scale``
failures carry Go client errors; here they name what was missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubescale.controllers.vpa.api.controller_refs import ControllerRef, topmost_controller
from kubescale.controllers.vpa.api.vpa_matching import target_ref_of
from kubescale.kube.controller_lookups import ControllerLookups, well_known_selector
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["TargetCheck", "VpaTargets", "target_text"]


@dataclass(frozen=True)
class TargetCheck:
    """A VPA's selector, or why it has none (the ``ConfigUnsupported`` message)."""

    selector: LabelSelector | None
    unsupported: str | None = None


def target_text(ref: ControllerRef) -> str:
    """``<apiVersion>.<kind>/<name>`` as upstream's messages print a target."""
    return f"{ref.api_version}.{ref.kind}/{ref.name}"


class VpaTargets:
    """Selectors and top-most checks of VPA targets, from the process's controller lookups."""

    def __init__(self, *, controllers: ControllerLookups) -> None:
        self.controllers = controllers

    def owner(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:  # the controller lookups' objects: a controller of any kind
        """The cached controller object
        (:data:`kubescale.controllers.vpa.api.controller_refs.OwnerLookup`)."""
        return self.controllers.owner(api_version, kind, namespace, name)

    def is_scalable(self, api_version: str, kind: str) -> bool:
        return self.controllers.is_scalable(api_version, kind)

    def check(self, vpa: VerticalPodAutoscaler) -> TargetCheck:
        """``getSelector``: the selector of a supported target, else the unsupported message."""
        ref = target_ref_of(vpa)
        if ref is None:
            return _unreadable(
                "targetRef not defined. If this is a v1beta1 object switch to v1beta2."
            )
        selector, reason = self._selector(ref)
        if selector is None:
            return _unreadable(reason)
        top = topmost_controller(
            {
                "metadata": {
                    "namespace": ref.namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": ref.api_version,
                            "kind": ref.kind,
                            "name": ref.name,
                            "controller": True,
                        }
                    ],
                }
            },
            lookup=self.owner,
            scalable_kinds=self.is_scalable,
        )
        target = target_text(ref)
        if top is None:
            return TargetCheck(
                None,
                "Unknown error during checking if target "
                f"{target} is a topmost well-known or scalable controller",
            )
        if top != ref:
            return TargetCheck(
                None,
                f"The target {target} has a parent controller but it should point to a "
                "topmost well-known or scalable controller",
            )
        return TargetCheck(selector)

    def _selector(self, ref: ControllerRef) -> tuple[LabelSelector | None, str]:
        if self.controllers.informs(ref.kind):
            obj = self.owner(ref.api_version, ref.kind, ref.namespace, ref.name)
            if obj is None:
                return None, f"{ref.kind} {ref.namespace}/{ref.name} does not exist"
            selector = well_known_selector(ref.kind, obj)
            if selector is None:
                return None, f"{ref.kind} {ref.namespace}/{ref.name} has an invalid selector"
            return selector, ""
        selector = self.controllers.selector_of(ref)
        if selector is not None:
            return selector, ""
        return None, (
            f"Unhandled targetRef {ref.api_version} / {ref.kind} / {ref.name}, last error "
            f"{ref.kind} {ref.namespace}/{ref.name} was not found through a scale subresource"
        )

    @property
    def pending(self) -> int:
        """Lookups queued for the API server by the checks so far."""
        return self.controllers.scale_lookups.pending

    async def refresh(self) -> None:
        """Ask the API server what the checks queued, and refresh stale /scale answers."""
        await self.controllers.scale_lookups.resolve_pending()
        await self.controllers.scale_lookups.refresh_stale()


def _unreadable(reason: str) -> TargetCheck:
    message = f"Cannot read targetRef. Reason: {reason}" if reason else "Cannot read targetRef"
    return TargetCheck(None, message)
