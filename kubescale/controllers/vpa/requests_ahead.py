"""The VPA's answer to the coordination layer's port
:class:`~kubescale.coordination.ports.RequestsAhead`: the requests the admission webhook would give
a pod, for the cluster autoscaler's binpacking.

The VPA provides it; the autoscaler only holds the port, and the wiring
(:mod:`kubescale.components`) plugs this provider in (the autoscaler imports no VPA module).
Built only when the coordination asks for it (one brain): it reads the webhook's own cached
decision on the shared cache (:class:`~.admission.cached_pod_admission.CachedPodAdmission`),
applied by the pure :func:`~kubescale.coordination.requests_ahead.pod_with_admitted_resources`.
"""

from __future__ import annotations

from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.controllers.vpa.admission.admission_memo import Answered
from kubescale.controllers.vpa.admission.cached_pod_admission import (
    AdmissionOptions,
    CachedPodAdmission,
)
from kubescale.controllers.vpa.api.pod_admission import PodAdmissionError
from kubescale.controllers.vpa.api.pod_patches import OBSERVED_CONTAINERS_ANNOTATION
from kubescale.coordination.requests_ahead import AheadAnswer, pod_with_admitted_resources
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of

__all__ = ["WebhookRequestsAhead"]


class WebhookRequestsAhead:
    """:class:`~kubescale.coordination.ports.RequestsAhead` from the webhook's decision."""

    def __init__(self, cache: SharedCache) -> None:
        # Optional: on a cluster without the VPA's CRDs the autoscaler still starts, and
        # binpacks pods with their own requests (the admission caches never sync).
        with cache.informers.optional():
            self.admission = CachedPodAdmission(
                caches=AdmissionCaches(cache=cache, watch_hpas=True),
                settings=AdmissionOptions(avoid_hpa_conflict=True),
            )

    def requests_for(self, pod: Pod) -> Pod:
        """``pod`` with the requests the VPA will give it (a pending pod: the webhook's; a
        scheduled one: the larger of its own and the webhook's), or ``pod`` itself."""
        return self.answer_for(pod).pod

    def answer_for(self, pod: Pod) -> AheadAnswer:
        """:meth:`requests_for`'s answer; its basis is the webhook's remembered answer
        (:attr:`~.admission.cached_pod_admission.PodDecision.answered`) when the match was
        made from informers only, else none (asked again next time)."""
        scheduled = bool(spec_of(pod).get("nodeName"))
        annotations = Meta(pod).annotations
        if scheduled and OBSERVED_CONTAINERS_ANNOTATION not in annotations:
            # never admitted with a VPA: no VPA update coming (and no cost)
            return AheadAnswer(pod=pod, pod_only=True)
        try:
            decision = self.admission.decide(pod, may_wait=False)  # reads it, never changes it
        except PodAdmissionError:
            return AheadAnswer(pod=pod)
        basis = decision.answered
        if not decision.patches:
            return AheadAnswer(pod=pod, basis=basis)
        ahead = pod_with_admitted_resources(pod, decision.patches, only_raise=scheduled)
        return AheadAnswer(pod=ahead, basis=basis)

    def still_current(self, answer: AheadAnswer) -> bool:
        """Whether the same pod gets ``answer`` again: the caches are synced and the objects its
        decision read are still theirs (:meth:`CachedPodAdmission.current`)."""
        if answer.pod_only:
            return True
        basis = answer.basis
        if not isinstance(basis, Answered) or not self.admission.caches.synced:
            return False
        return self.admission.current(basis)
