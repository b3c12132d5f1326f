"""What the updater does to a pod once its budget allows: evict it, or resize it in place.

Each action is a decision (:data:`~kubescale.plans.executor.Decision`): it yields the
intents (:mod:`kubescale.plans.intents`) and receives each one's outcome from the
:class:`~kubescale.plans.executor.PlanExecutor`, which makes the evictions and resizes
through the disruption ledger (an outcome unknown counts as done, :attr:`Applied.counts`) and
checks the leader Lease before each write. No client here. The rest of upstream's
``EvictViaEviction API`` / ``InPlaceUpdate`` side effects:

* eviction (``policy/v1`` Eviction, PodDisruptionBudgets enforced by the API server): on success
  ``vpa_updater_evicted_pods_total`` and the events ``EvictedByVPA`` (pod) and ``EvictedPod``
  (VPA); on failure ``vpa_updater_failed_eviction_attempts_total{reason}`` (``DisruptionBudget``
  for a 429), the outcome unknown logged as a warning;
* resize: ``PATCH pods/<name>/resize`` with the container-resource operations admission would
  apply (:func:`resize_patches`), then the annotation ``vpaInPlaceUpdated: "true"``;
  ``vpa_updater_in_place_updated_pods_total`` and the event ``InPlaceResizedByVPA``, or
  ``vpa_updater_failed_in_place_update_attempts_total{reason}``. A resize that was done stays
  done when the annotation cannot be written (upstream would then evict the pod as well).

In a dry run (``--dry-run``) every intent is answered done without being sent; the updater's
own metrics then count nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.views import mapping, meta, raw_spec
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.plans.executor import Applied, Decision
from kubescale.plans.intents import Event, Evict, PatchObject, Resize, pod_ref

__all__ = ["ACTOR", "IN_PLACE_UPDATED_ANNOTATION", "PodActions", "resize_patches"]

log = component_logger("vpa-updater")

ACTOR: Final = "vpa-updater"
"""The updater's name on the disruption ledger (what it counts alone with ``--coordination
separate``) and on its intents."""

IN_PLACE_UPDATED_ANNOTATION: Final = "vpaInPlaceUpdated"
_CONTAINER_RESOURCES_PREFIX = "/spec/containers/"
_NOTHING_TO_DO: Final = Applied(WriteResult(WriteOutcome.DONE))
_REFUSED: Final = Applied(WriteResult(WriteOutcome.REFUSED))


# JSON patch operations as :class:`PodAdmission` holds them: raw JSON.
def resize_patches(patches: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The admission patch operations a ``resize`` applies: container resources only."""
    return [
        dict(op)
        for op in patches
        if str(op.get("path", "")).startswith(_CONTAINER_RESOURCES_PREFIX)
        and "/resources" in str(op.get("path", ""))
    ]


def _container_names(pod: Pod) -> list[str]:
    """Each ``spec.containers`` entry's name, in order (``""`` for a malformed entry)."""
    containers = mapping(raw_spec(pod)).get("containers")  # entries may be malformed
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
    """The updater's actions on pods, with their metrics, events and logs (module docstring)."""

    def __init__(self, *, metrics: UpdaterMetrics) -> None:
        self.metrics = metrics

    def evict(
        self, pod: Pod, vpa: VerticalPodAutoscaler, *, size: str, reason: str = ""
    ) -> Decision[Applied]:
        """Evict ``pod`` (``reason``: why, :attr:`~.update_priority.PodPriority.reason`)."""
        result = yield Evict(actor=ACTOR, pod=pod, reason=reason)
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
        if not result.dry_run:
            self.metrics.evicted_pods.labels(size).inc()
            log.info("evicted pod", extra={"fields": {"pod": pod_id(pod)}})
        yield Event(
            actor=ACTOR,
            involved=pod,
            type="Normal",
            reason="EvictedByVPA",
            message="Pod was evicted by VPA Updater to apply resource recommendation.",
        )
        yield Event(
            actor=ACTOR,
            involved=vpa,
            type="Normal",
            reason="EvictedPod",
            message=(f"VPA Updater evicted Pod {meta(pod).name} to apply resource recommendation."),
        )
        return result

    def unboost(
        self,
        pod: Pod,
        vpa: VerticalPodAutoscaler,
        limit_ranges: Sequence[LimitRange],
        expired: Sequence[str],
        *,
        size: str,
    ) -> Decision[Applied]:
        """Lower an expired CPU startup boost in place (upstream's ``InPlaceUpdate`` from the
        boost worker): the resources admission would give the pod without a boost -- the
        recommendation, when the VPA's mode applies one -- and for a boosted container that gets
        no recommended CPU, its original CPU request and limit from the boost annotation; then
        the expired boost annotations are removed."""
        patches: list[dict[str, Any]] = []
        if update_mode(vpa) != UPDATE_MODE_OFF:
            try:
                admitted = admit_pod(pod=pod, vpa=vpa, limit_ranges=limit_ranges)
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
        result = _NOTHING_TO_DO
        if patches:
            reason = f"CPU startup boost expired: {', '.join(sorted(expired_names))}"
            result = yield Resize(actor=ACTOR, pod=pod, patches=patches, reason=reason)
            if result.error is not None:
                failure = result.error
                reason = failure.reason if isinstance(failure, KubeApiError) else "Error"
                self.metrics.failed_in_place_updates.labels(size, reason).inc()
                log.info(
                    "unboost resize failed",
                    extra={"fields": {"pod": pod_id(pod), "error": str(failure)}},
                )
                return result
        yield from self._after_resize(
            pod,
            dict.fromkeys(expired),
            size=size,
            resized=bool(patches),
            warning="pod unboosted, but its boost annotations could not be removed",
            dry_run=result.dry_run,
        )
        return result

    def resize(
        self,
        pod: Pod,
        vpa: VerticalPodAutoscaler,
        limit_ranges: Sequence[LimitRange],
        *,
        size: str,
        hpas: Sequence[HorizontalPodAutoscaler] = (),
        reason: str = "",
    ) -> Decision[Applied]:
        """Resize ``pod`` in place to what the webhook would give it (``hpas``: with
        ``--coordination one-brain``, the HPAs whose resources it leaves alone; ``reason``:
        why, :attr:`~.update_priority.PodPriority.reason`)."""
        try:
            admitted = admit_pod(
                pod=pod,
                vpa=vpa,
                limit_ranges=limit_ranges,
                hpas=hpas,
                avoid_hpa_conflict=bool(hpas),
            )
        except PodAdmissionError as err:
            self.metrics.failed_in_place_updates.labels(size, "Error").inc()
            log.error(
                "cannot compute resize", extra={"fields": {"pod": pod_id(pod), "error": str(err)}}
            )
            return _REFUSED
        patches = resize_patches(admitted.patches)
        if not patches:
            return _REFUSED
        result = yield Resize(actor=ACTOR, pod=pod, patches=patches, reason=reason)
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
        yield from self._after_resize(
            pod,
            {IN_PLACE_UPDATED_ANNOTATION: "true"},
            size=size,
            resized=True,
            warning="pod resized, but its annotation could not be written",
            dry_run=result.dry_run,
        )
        return result

    def _after_resize(
        self,
        pod: Pod,
        annotations: Mapping[str, str | None],
        *,
        size: str,
        resized: bool,
        warning: str,
        dry_run: bool,
    ) -> Decision[None]:
        """Merge-patch ``annotations`` onto the pod (``None`` removes one; a failure is only
        logged), then, if ``resized``, the metric and the event ``InPlaceResizedByVPA``."""
        patched = yield PatchObject(
            actor=ACTOR,
            target=pod_ref(pod),
            patch={"metadata": {"annotations": dict(annotations)}},
            patch_type="merge",
        )
        if patched.error is not None:
            log.warning(
                warning, extra={"fields": {"pod": pod_id(pod), "error": str(patched.error)}}
            )
        if resized:
            if not dry_run:
                self.metrics.in_place_updated_pods.labels(size).inc()
            yield Event(
                actor=ACTOR,
                involved=pod,
                type="Normal",
                reason="InPlaceResizedByVPA",
                message="Pod was resized in place by VPA Updater.",
            )
