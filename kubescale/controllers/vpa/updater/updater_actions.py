"""What the updater does to a pod once its budget allows: evict it, or resize it in place.

Both writes go through :mod:`kubescale.kube.disruption_ledger` (:func:`evict_pod`,
:func:`resize_pod`), which records each eviction or resize that was done or whose outcome is
unknown until the pods' informer shows it; the :class:`~kubescale.kube.disruption_ledger.
WriteResult` tells the loop whether its budget counts the write (:attr:`WriteResult.counts`).
Here are the rest of upstream's ``EvictViaEviction API`` / ``InPlaceUpdate`` side effects:

* eviction (``policy/v1`` Eviction, PodDisruptionBudgets enforced by the API server): on success
  ``vpa_updater_evicted_pods_total`` and the events ``EvictedByVPA`` (pod) and ``EvictedPod``
  (VPA); on failure ``vpa_updater_failed_eviction_attempts_total{reason}`` (``DisruptionBudget``
  for a 429), the outcome unknown logged as a warning;
* resize: ``PATCH pods/<name>/resize`` with the container-resource operations admission would
  apply (:func:`resize_patches`), then the annotation ``vpaInPlaceUpdated: "true"``;
  ``vpa_updater_in_place_updated_pods_total`` and the event ``InPlaceResizedByVPA``, or
  ``vpa_updater_failed_in_place_update_attempts_total{reason}``. A resize that was done stays
  done when the annotation cannot be written (upstream would then evict the pod as well).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.api.pod_admission import PodAdmissionError, admit_pod
from kubescale.controllers.vpa.api.startup_boost import (
    CPU,
    STARTUP_BOOST_ANNOTATION_PREFIX,
    unboosted_resources,
)
from kubescale.controllers.vpa.api.vpa_policy import UPDATE_MODE_OFF, update_mode
from kubescale.controllers.vpa.updater.eviction_restriction import pod_id
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.kube.client import KubeClient
from kubescale.kube.disruption_ledger import (
    DisruptionLedger,
    WriteOutcome,
    WriteResult,
    evict_pod,
    resize_pod,
)
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import PODS
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.views import meta, spec_of

__all__ = ["IN_PLACE_UPDATED_ANNOTATION", "PodActions", "resize_patches"]

log = component_logger("vpa-updater")

ACTOR: Final = "vpa-updater"
"""The updater's name on the disruption ledger (what it counts alone with ``--coordination
separate``)."""

IN_PLACE_UPDATED_ANNOTATION: Final = "vpaInPlaceUpdated"
_CONTAINER_RESOURCES_PREFIX = "/spec/containers/"


def resize_patches(patches: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The admission patch operations a ``resize`` applies: container resources only."""
    return [
        dict(op)
        for op in patches
        if str(op.get("path", "")).startswith(_CONTAINER_RESOURCES_PREFIX)
        and "/resources" in str(op.get("path", ""))
    ]


def _container_names(pod: Mapping[str, Any]) -> list[str]:
    """Each ``spec.containers`` entry's name, in order (``""`` for a malformed entry)."""
    containers = spec_of(pod).get("containers")
    return [
        str(c.get("name") or "") if isinstance(c, Mapping) else ""
        for c in (containers if isinstance(containers, list) else [])
    ]


def _failure_reason(error: KubeError) -> str:
    if not isinstance(error, KubeApiError):
        return "Error"
    if error.code == 429:
        return "DisruptionBudget"
    return error.reason or str(error.code)


class PodActions:
    """The updater's writes to pods, with their metrics, events and logs (module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        ledger: DisruptionLedger,
        metrics: UpdaterMetrics,
        events: EventRecorder,
    ) -> None:
        self.client = client
        self.ledger = ledger
        self.metrics = metrics
        self.events = events

    async def evict(
        self, pod: Mapping[str, Any], vpa: Mapping[str, Any], *, size: str, now: datetime
    ) -> WriteResult:
        result = await evict_pod(self.client, self.ledger, pod, now=now, actor=ACTOR)
        error = result.error
        if error is not None:
            self.metrics.failed_evictions.labels(size, _failure_reason(error)).inc()
            fields = {"pod": pod_id(pod), "error": str(error)}
            if result.outcome is WriteOutcome.UNKNOWN:
                log.warning(
                    "eviction outcome unknown: counted as evicted until the pod is seen again",
                    extra={"fields": fields},
                )
            else:
                log.info("evicting pod failed", extra={"fields": fields})
            return result
        self.metrics.evicted_pods.labels(size).inc()
        log.info("evicted pod", extra={"fields": {"pod": pod_id(pod)}})
        self.events.event(
            pod,
            type="Normal",
            reason="EvictedByVPA",
            message="Pod was evicted by VPA Updater to apply resource recommendation.",
        )
        self.events.event(
            vpa,
            type="Normal",
            reason="EvictedPod",
            message=(f"VPA Updater evicted Pod {meta(pod).name} to apply resource recommendation."),
        )
        return result

    async def unboost(
        self,
        pod: Mapping[str, Any],
        vpa: Mapping[str, Any],
        limit_ranges: Sequence[dict[str, Any]],
        expired: Sequence[str],
        *,
        size: str,
        now: datetime,
    ) -> WriteResult:
        """Lower an expired CPU startup boost in place (upstream's ``InPlaceUpdate`` from the
        boost worker): the resources admission would give the pod without a boost -- the
        recommendation, when the VPA's mode applies one -- and for a boosted container that gets
        no recommended CPU, its original CPU request and limit from the boost annotation; then
        the expired boost annotations are removed."""
        patches: list[dict[str, Any]] = []
        if update_mode(vpa) != UPDATE_MODE_OFF:
            try:
                admitted = admit_pod(pod=dict(pod), vpa=dict(vpa), limit_ranges=limit_ranges)
            except PodAdmissionError as err:
                log.info(
                    "cannot compute the recommendation for an unboost",
                    extra={"fields": {"pod": pod_id(pod), "error": str(err)}},
                )
            else:
                patches = resize_patches(admitted.patches)
        containers = _container_names(pod)
        expired_names = {key.removeprefix(STARTUP_BOOST_ANNOTATION_PREFIX) for key in expired}
        restored = unboosted_resources(pod, sorted(expired_names))
        for index, name in enumerate(containers):
            if name not in restored:
                continue
            for list_name, values in zip(("requests", "limits"), restored[name], strict=True):
                path = f"/spec/containers/{index}/resources/{list_name}/cpu"
                if CPU in values and not any(op["path"] == path for op in patches):
                    patches.append({"op": "add", "path": path, "value": str(values[CPU])})
        result = WriteResult(WriteOutcome.DONE)
        if patches:
            result = await resize_pod(self.client, self.ledger, pod, patches, now=now, actor=ACTOR)
            if result.error is not None:
                failure = result.error
                reason = failure.reason if isinstance(failure, KubeApiError) else "Error"
                self.metrics.failed_in_place_updates.labels(size, reason).inc()
                log.info(
                    "unboost resize failed",
                    extra={"fields": {"pod": pod_id(pod), "error": str(failure)}},
                )
                return result
        await self._after_resize(
            pod,
            dict.fromkeys(expired),
            size=size,
            resized=bool(patches),
            warning="pod unboosted, but its boost annotations could not be removed",
        )
        return result

    async def resize(
        self,
        pod: Mapping[str, Any],
        vpa: Mapping[str, Any],
        limit_ranges: Sequence[dict[str, Any]],
        *,
        size: str,
        now: datetime,
        hpas: Sequence[HorizontalPodAutoscaler] = (),
    ) -> WriteResult:
        """Resize ``pod`` in place to what the webhook would give it (``hpas``: with
        ``--coordination one-brain``, the HPAs whose resources it leaves alone)."""
        try:
            admitted = admit_pod(
                pod=dict(pod),
                vpa=dict(vpa),
                limit_ranges=limit_ranges,
                hpas=hpas,
                avoid_hpa_conflict=bool(hpas),
            )
        except PodAdmissionError as err:
            self.metrics.failed_in_place_updates.labels(size, "Error").inc()
            log.error(
                "cannot compute resize", extra={"fields": {"pod": pod_id(pod), "error": str(err)}}
            )
            return WriteResult(WriteOutcome.REFUSED)
        patches = resize_patches(admitted.patches)
        if not patches:
            return WriteResult(WriteOutcome.REFUSED)
        result = await resize_pod(self.client, self.ledger, pod, patches, now=now, actor=ACTOR)
        failure = result.error
        if failure is not None:
            reason = failure.reason if isinstance(failure, KubeApiError) else "Error"
            self.metrics.failed_in_place_updates.labels(size, reason).inc()
            message = (
                "in-place resize outcome unknown: counted as resized, no eviction instead"
                if result.outcome is WriteOutcome.UNKNOWN
                else "in-place resize failed"
            )
            log.info(message, extra={"fields": {"pod": pod_id(pod), "error": str(failure)}})
            return result
        # The resize is done: a missing annotation is no reason to evict the pod as well.
        await self._after_resize(
            pod,
            {IN_PLACE_UPDATED_ANNOTATION: "true"},
            size=size,
            resized=True,
            warning="pod resized, but its annotation could not be written",
        )
        return result

    async def _after_resize(
        self,
        pod: Mapping[str, Any],
        annotations: Mapping[str, str | None],
        *,
        size: str,
        resized: bool,
        warning: str,
    ) -> None:
        """Merge-patch ``annotations`` onto the pod (``None`` removes one; a failure is only
        logged), then, if ``resized``, the metric and the event ``InPlaceResizedByVPA``."""
        view = meta(pod)
        try:
            await self.client.patch(
                PODS,
                view.name,
                {"metadata": {"annotations": dict(annotations)}},
                namespace=view.namespace,
                patch_type="merge",
            )
        except KubeError as err:
            log.warning(warning, extra={"fields": {"pod": pod_id(pod), "error": str(err)}})
        if resized:
            self.metrics.in_place_updated_pods.labels(size).inc()
            self.events.event(
                pod,
                type="Normal",
                reason="InPlaceResizedByVPA",
                message="Pod was resized in place by VPA Updater.",
            )
