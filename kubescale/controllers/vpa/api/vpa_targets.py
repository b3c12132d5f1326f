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

The controller walk and the selector rules are the admission webhook's
(:mod:`kubescale.controllers.vpa.api.controller_refs`,
:func:`kubescale.webhook.webhook_caches.well_known_selector`); kinds without an informer
(ReplicationControllers, custom resources with ``/scale``) go through a
:class:`kubescale.webhook.scale_lookups.ScaleLookups` cache that :meth:`VpaTargets.refresh` fills
from the API server. Upstream's reason strings for ``/scale`` failures carry Go client errors; here
they name what was missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubescale.controllers.vpa.api.controller_refs import ControllerRef, topmost_controller
from kubescale.kube.informer import Informer
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.selectors import LabelSelector
from kubescale.webhook.scale_lookups import ScaleLookups
from kubescale.webhook.webhook_caches import WELL_KNOWN_INFORMED, well_known_selector

__all__ = ["TargetCheck", "VpaTargets", "target_text"]

_REPLICATION_CONTROLLER = "ReplicationController"


@dataclass(frozen=True)
class TargetCheck:
    """A VPA's selector, or why it has none (the ``ConfigUnsupported`` message)."""

    selector: LabelSelector | None
    unsupported: str | None = None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def target_ref(vpa: Mapping[str, Any]) -> ControllerRef | None:
    """The VPA's ``spec.targetRef`` as a controller key in the VPA's namespace."""
    spec = vpa.get("spec")
    ref = spec.get("targetRef") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping):
        return None
    metadata = vpa.get("metadata") or {}
    return ControllerRef(
        api_version=_text(ref.get("apiVersion")),
        kind=_text(ref.get("kind")),
        name=_text(ref.get("name")),
        namespace=_text(metadata.get("namespace")),
    )


def target_text(ref: ControllerRef) -> str:
    """``<apiVersion>.<kind>/<name>`` as upstream's messages print a target."""
    return f"{ref.api_version}.{ref.kind}/{ref.name}"


class VpaTargets:
    """Selectors and top-most checks of VPA targets, from informers and a /scale cache."""

    def __init__(self, *, informers: InformerSet, scale_lookups: ScaleLookups) -> None:
        self.scale_lookups = scale_lookups
        self._controllers: dict[str, Informer] = {
            kind: informers.informer(rt) for kind, rt in WELL_KNOWN_INFORMED.items()
        }

    def owner(
        self, api_version: str, kind: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        """The cached controller object
        (:data:`kubescale.controllers.vpa.api.controller_refs.OwnerLookup`)."""
        informer = self._controllers.get(kind)
        if informer is not None:
            return informer.lister.get(name, namespace) if namespace and name else None
        return self.scale_lookups.lookup(api_version, kind, namespace, name)

    def is_scalable(self, api_version: str, kind: str) -> bool:
        if kind in self._controllers:
            return True
        return self.scale_lookups.is_scalable(api_version, kind)

    def check(self, vpa: Mapping[str, Any]) -> TargetCheck:
        """``getSelector``: the selector of a supported target, else the unsupported message."""
        ref = target_ref(vpa)
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
        if ref.kind in self._controllers or ref.kind == _REPLICATION_CONTROLLER:
            obj = self.owner(ref.api_version, ref.kind, ref.namespace, ref.name)
            if obj is None:
                return None, f"{ref.kind} {ref.namespace}/{ref.name} does not exist"
            selector = well_known_selector(ref.kind, obj)
            if selector is None:
                return None, f"{ref.kind} {ref.namespace}/{ref.name} has an invalid selector"
            return selector, ""
        # Both lookups run so that first sight queues the kind and the object together.
        scalable = self.scale_lookups.is_scalable(ref.api_version, ref.kind)
        selector = self.scale_lookups.selector(ref.api_version, ref.kind, ref.namespace, ref.name)
        if scalable and selector is not None:
            return selector, ""
        return None, (
            f"Unhandled targetRef {ref.api_version} / {ref.kind} / {ref.name}, last error "
            f"{ref.kind} {ref.namespace}/{ref.name} was not found through a scale subresource"
        )

    @property
    def pending(self) -> int:
        """Lookups queued for the API server by the checks so far."""
        return self.scale_lookups.pending

    async def refresh(self) -> None:
        """Ask the API server what the checks queued, and refresh stale /scale answers."""
        await self.scale_lookups.resolve_pending()
        await self.scale_lookups.refresh_stale()


def _unreadable(reason: str) -> TargetCheck:
    message = f"Cannot read targetRef. Reason: {reason}" if reason else "Cannot read targetRef"
    return TargetCheck(None, message)
