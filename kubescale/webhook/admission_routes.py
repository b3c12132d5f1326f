"""The webhook's HTTP route: AdmissionReviews for pods and VPAs, answered from the caches.

Path: ``POST /``. Self-registration (:mod:`kubescale.webhook.registration`) writes a service or URL
client config without a ``path``, exactly as upstream, and kube-apiserver then posts to ``/``;
upstream's Go server answers on every path, kubescale only on ``/`` because the same TLS server
hosts the scheduler extender's routes.

Per request (upstream ``logic/server.go``, ``resource/pod/handler.go`` and
``resource/vpa/handler.go``):

1. The body limit (5 MiB) is the TLS application's: a larger body is answered ``413`` before this
   handler runs (upstream does the same); kube-apiserver then applies the webhook's
   ``failurePolicy`` (``Ignore`` by default: the pod is created unmutated). The 413 is counted
   here (``reason="body-too-large"``).
2. ``Content-Type`` must be ``application/json`` (parameters such as ``charset`` are ignored).
   Upstream writes nothing at all otherwise, which kube-apiserver treats as a failed call; here
   the answer is a well-formed AdmissionReview that allows the object unchanged.
3. The review is read (:mod:`kubescale.webhook.admission_reviews`); anything that cannot be
   processed — malformed JSON, no ``request``, no uid, no resource, an object that is not a JSON
   object, a resource other than pods and VPAs — is answered ``allowed: true`` without a patch.
4. Pods (``""/v1/pods``) are decided from the caches by
   :class:`kubescale.controllers.vpa.admission.cached_pod_admission.CachedPodAdmission` (top-most
   controller, VPA, then :func:`kubescale.controllers.vpa.api.pod_admission.admit_pod`), through
   the one memo (:mod:`kubescale.controllers.vpa.admission.admission_memo`): a decision by its
   complete inputs, and the answer by its question — the body without ``request.uid``, which is
   all that differs between the pods of a ReplicaSet (:func:`split_uid`). A pod is
   never denied: every error allows it unmutated (upstream ``DisallowIncorrectObjects() ==
   false``). VPAs
   (``autoscaling.k8s.io/*/verticalpodautoscalers``) go to
   :func:`kubescale.webhook.vpa_validation.admit_vpa`, which may deny with a ``metav1.Status``.
5. The answer carries the patches as ``patchType: JSONPatch``.

Every request that is answered without being processed is counted in
``kubescale_webhook_bad_requests_total{reason}`` and logged with the reason. Metrics as upstream:
``vpa_admission_controller_admission_pods_total{applied}`` (pods processed without error) and
``vpa_admission_controller_admission_latency_seconds{status,resource}`` (status ``error``,
``skipped`` or ``applied``; resource ``Pod``, ``VPA`` or ``unknown``; upstream's buckets). Pods
admitted unmutated because the caches were not ready or a controller of a kind seen for the
first time is still being looked up are counted in
``kubescale_webhook_pods_not_matched_total{reason}`` (``caches-not-synced``,
``controller-lookup-pending``, and ``controller-not-cached`` when a pod's ReplicaSet or other
well-known controller did not reach the informer within ``CONTROLLER_WAIT`` — the only wait on
the admission path, see
:meth:`kubescale.controllers.vpa.admission.admission_caches.AdmissionCaches.wait_for_controller`).

Beyond upstream, both off unless their flags are set: ``--cap-to-largest-node`` passes the
largest Ready node's allocatable to ``admit_pod``; ``--avoid-hpa-conflict`` passes the HPAs
scaling the VPA's target and, when resources were left alone for them, records a ``Normal``
event ``HPAConflict`` on the VPA naming the HPAs and the resources.

Beyond upstream, always: when a LimitRange of the namespace overrode what the VPA wanted (the
patched pod must pass the API server, :mod:`kubescale.controllers.vpa.api.limit_range_fit`), a
``Warning`` event ``LimitRangeConflict`` on the VPA says where and why. Both events go through
an :class:`~kubescale.webhook.event_throttle.EventThrottle`: one per VPA and message per five
minutes, however many pods of a ReplicaSet trigger it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram

from kubescale.base.logs import component_logger
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.controllers.vpa.admission.admission_memo import (
    MAX_QUESTION_BYTES,
    AdmissionMemo,
    Answered,
)
from kubescale.controllers.vpa.admission.cached_pod_admission import (
    AdmissionOptions,
    CachedPodAdmission,
    HpaConflict,
    LimitRangeOverride,
    PodDecision,
    pod_namespace,
)
from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.pod_admission import PodAdmissionError
from kubescale.coordination.resource_ownership import (
    hpa_conflict_message,
    hpa_scaled_resources,
)
from kubescale.kube.events import EventRecorder
from kubescale.objects.admission_review import AdmissionReview
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, raw_metadata
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.runtime.https_server import lean_routes
from kubescale.runtime.lean_requests import LeanAnswer
from kubescale.webhook.admission_reviews import (
    BadReview,
    ReviewRequest,
    decode_json,
    encode_json,
    parse_review,
    peek_uid,
    pod_answer_template,
    review_response,
    split_uid,
    uid_is_cut,
)
from kubescale.webhook.event_throttle import EventThrottle
from kubescale.webhook.vpa_validation import admit_vpa
from kubescale.webhook.webhook_config import WebhookSettings

__all__ = [
    "ADMISSION_PATH",
    "LATENCY_BUCKETS",
    "AdmissionAnswer",
    "AdmissionMetrics",
    "AdmissionWebhook",
]

log = component_logger("webhook")

ADMISSION_PATH: Final = "/"
JSON_CONTENT_TYPE: Final = "application/json"
LATENCY_BUCKETS: Final = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""``metrics/admission/admission.go``: the latency histogram's buckets."""

HPA_CONFLICT_REASON: Final = "HPAConflict"
LIMIT_RANGE_CONFLICT_REASON: Final = "LimitRangeConflict"
CONTROLLER_WAIT: Final = 1.0
"""Real seconds a pod's admission may wait for its controller to reach the informer cache."""

_PODS: Final = ("", "pods")
_VPAS: Final = ("autoscaling.k8s.io", "verticalpodautoscalers")


class AdmissionMetrics:
    """Upstream's admission metrics plus kubescale's counters of unprocessed requests."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._observers: dict[tuple[str, str], Histogram] = {}
        self._pod_counters: dict[bool, Counter] = {}
        self._bad_counters: dict[str, Counter] = {}
        self._not_matched_counters: dict[str, Counter] = {}
        self.pods = Counter(
            "vpa_admission_controller_admission_pods",
            "Number of Pods processed by VPA Admission Controller.",
            ["applied"],
            registry=registry,
        )
        self.latency = Histogram(
            "vpa_admission_controller_admission_latency_seconds",
            "Time spent in VPA Admission Controller.",
            ["status", "resource"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.bad_requests = Counter(
            "kubescale_webhook_bad_requests",
            "Admission requests answered without being processed (allowed, unchanged), by reason.",
            ["reason"],
            registry=registry,
        )
        self.not_matched = Counter(
            "kubescale_webhook_pods_not_matched",
            "Pods admitted unmutated because a lookup they needed was not available yet.",
            ["reason"],
            registry=registry,
        )

    def observe(self, *, status: str, resource: str, seconds: float) -> None:
        """One request's latency (the labelled child is looked up once per label pair)."""
        key = (status, resource)
        child = self._observers.get(key)
        if child is None:
            child = self._observers[key] = self.latency.labels(status=status, resource=resource)
        child.observe(seconds)

    def count_pod(self, *, applied: bool) -> None:
        child = self._pod_counters.get(applied)
        if child is None:
            child = self.pods.labels(applied="true" if applied else "false")
            self._pod_counters[applied] = child
        child.inc()

    def count_bad(self, reason: str) -> None:
        child = self._bad_counters.get(reason)
        if child is None:
            child = self._bad_counters[reason] = self.bad_requests.labels(reason=reason)
        child.inc()

    def count_not_matched(self, reason: str) -> None:
        child = self._not_matched_counters.get(reason)
        if child is None:
            child = self._not_matched_counters[reason] = self.not_matched.labels(reason=reason)
        child.inc()


@dataclass(frozen=True, kw_only=True)
class AdmissionAnswer:
    """What one request got: the review to send (as the bytes sent) and the metric labels."""

    body: bytes
    """The AdmissionReview as sent (compact UTF-8 JSON)."""
    status: str
    """``error``, ``skipped`` or ``applied``."""
    resource: str
    """``Pod``, ``VPA`` or ``unknown``."""
    bad_reason: str | None = None
    patches: Sequence[Mapping[str, object]] = field(default_factory=list)
    """The JSON patch sent (its operations, as the pod or the VPA admission built them)."""

    @property
    def review(self) -> AdmissionReview:
        """The AdmissionReview sent, read back (for tests and logs; not on the hot path)."""
        # our own encoding of review_response's AdmissionReview, not untrusted input
        return cast(AdmissionReview, decode_json(self.body))


class AdmissionWebhook:
    """The route and the decisions behind it (see the module docstring).

    ``caches`` and ``recorder`` may be attached after construction (the simulator mounts the
    route before its client exists); until ``caches`` is set and synced, pods are admitted
    unmutated.
    """

    def __init__(
        self,
        *,
        settings: WebhookSettings,
        registry: CollectorRegistry,
        caches: AdmissionCaches | None = None,
        recorder: EventRecorder | None = None,
        controller_wait: float = CONTROLLER_WAIT,
        event_throttle: EventThrottle | None = None,
    ) -> None:
        self.settings = settings
        self.controller_wait = controller_wait
        self.event_throttle = event_throttle or EventThrottle()
        self.metrics = AdmissionMetrics(registry)
        self.caches = caches
        self.recorder = recorder
        self.memo = AdmissionMemo(answer_template=pod_answer_template)
        """Pod decisions by their complete inputs and answers by their question
        (:mod:`kubescale.controllers.vpa.admission.admission_memo`)."""
        self._decider: CachedPodAdmission | None = None

    def _pod_decider(self, caches: AdmissionCaches) -> CachedPodAdmission:
        decider = self._decider
        if decider is None or decider.caches is not caches:
            self.memo.clear()
            options = AdmissionOptions(
                avoid_hpa_conflict=self.settings.avoid_hpa_conflict,
                cap_to_largest_node=self.settings.cap_to_largest_node,
                startup_boost=self.settings.startup_boost,
            )
            decider = CachedPodAdmission(caches=caches, settings=options, memo=self.memo)
            caches.on_namespace_deleted(self.event_throttle.forget_namespace)
            self._decider = decider
        return decider

    def mount(self, app: web.Application) -> None:
        """Add ``POST /`` and the 413 counter to the TLS application, and ``POST /`` of JSON to
        its lean routes (:mod:`kubescale.runtime.lean_requests`: the same answers, without
        aiohttp's request machinery, for requests of the shape kube-apiserver sends)."""
        app.router.add_post(ADMISSION_PATH, self.handle)
        app.on_response_prepare.append(self._count_refused_body)
        routes = lean_routes(app)
        if routes is not None:
            routes.add_post(ADMISSION_PATH, self.handle_lean, content_type=JSON_CONTENT_TYPE)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        body = await request.read()  # a chunked body over 5 MiB raises 413 here
        answer = await self.admit(body, content_type=request.content_type)
        response = web.Response(body=answer.body, content_type=JSON_CONTENT_TYPE, charset="utf-8")
        self._observe(answer, started)
        return response

    def handle_lean(self, body: bytes) -> LeanAnswer | Awaitable[LeanAnswer]:
        """The lean lane's ``POST /`` of ``application/json``: what :meth:`handle` answers, at
        once unless the pod's controller has to be waited for."""
        started = time.perf_counter()
        decided = self._decide(body, content_type=JSON_CONTENT_TYPE, may_wait=True)
        if isinstance(decided, AdmissionAnswer):
            self._observe(decided, started)
            return LeanAnswer(body=decided.body)
        return self._lean_after_wait(decided, body, started)

    async def _lean_after_wait(
        self, wait_for: tuple[str, str, str], body: bytes, started: float
    ) -> LeanAnswer:
        answer = await self._after_wait(wait_for, body, content_type=JSON_CONTENT_TYPE)
        self._observe(answer, started)
        return LeanAnswer(body=answer.body)

    def _observe(self, answer: AdmissionAnswer, started: float) -> None:
        self.metrics.observe(
            status=answer.status, resource=answer.resource, seconds=time.perf_counter() - started
        )

    async def _count_refused_body(self, request: web.Request, response: web.StreamResponse) -> None:
        if response.status == 413 and request.path == ADMISSION_PATH:
            self.metrics.count_bad("body-too-large")
            log.warning(
                "admission request refused: body over the 5 MiB limit",
                extra={"fields": {"reason": "body-too-large", "length": request.content_length}},
            )

    # -- the decision, without HTTP -------------------------------------------------------------

    async def admit(self, body: bytes, *, content_type: str) -> AdmissionAnswer:
        """Answer one AdmissionReview body; never raises.

        The only wait: a pod whose well-known controller (or the VPA's target) is not in the
        caches yet is decided again once the informer delivers it, or after
        ``controller_wait`` seconds.
        """
        answer = self._decide(body, content_type=content_type, may_wait=True)
        if isinstance(answer, AdmissionAnswer):
            return answer
        return await self._after_wait(answer, body, content_type=content_type)

    async def _after_wait(
        self, wait_for: tuple[str, str, str], body: bytes, *, content_type: str
    ) -> AdmissionAnswer:
        """Wait (at most ``controller_wait``) for the controller ``wait_for`` to reach the
        caches, then decide without waiting."""
        kind, namespace, name = wait_for
        caches = self.caches
        arrived = caches is not None and await caches.wait_for_controller(
            kind, namespace, name, within=self.controller_wait
        )
        log.info(
            "pod's controller was not cached yet; waited for it",
            extra={"fields": {"controller": f"{kind} {namespace}/{name}", "arrived": arrived}},
        )
        if not arrived:
            self.metrics.count_not_matched("controller-not-cached")
        final = self._decide(body, content_type=content_type, may_wait=False)
        if not isinstance(final, AdmissionAnswer):  # pragma: no cover - may_wait=False
            raise TypeError("a decision that may not wait asked to wait")
        return final

    def _decide(
        self, body: bytes, *, content_type: str, may_wait: bool
    ) -> AdmissionAnswer | tuple[str, str, str]:
        """The answer, or (``may_wait``) the controller to wait for before deciding."""
        if content_type != JSON_CONTENT_TYPE:
            return self._bad(
                BadReview(
                    reason="content-type",
                    detail=f"contentType={content_type}, expect application/json",
                    uid=peek_uid(body),
                )
            )
        known = self._known_answer(body)
        if known is not None:
            return known
        parsed = parse_review(body)
        if isinstance(parsed, BadReview):
            return self._bad(parsed)
        key = (parsed.group, parsed.resource)
        try:
            if key == _PODS:
                return self._admit_pod(parsed, body=body, may_wait=may_wait)
            if key == _VPAS:
                return self._admit_vpa(parsed)
        except PodAdmissionError as exc:
            return self._bad(
                BadReview(reason="invalid-object", detail=str(exc), uid=parsed.uid),
                resource="Pod",
            )
        except Exception as exc:
            log.exception(
                "admission failed; allowing the object unchanged",
                extra={"fields": {"uid": parsed.uid, "resource": parsed.resource}},
            )
            return self._bad(
                BadReview(reason="internal-error", detail=repr(exc), uid=parsed.uid),
                resource="Pod" if key == _PODS else "VPA",
            )
        return self._bad(
            BadReview(
                reason="unsupported-resource",
                detail=f"not supported resource type: {parsed.resource}.{parsed.group}",
                uid=parsed.uid,
            )
        )

    def _bad(self, bad: BadReview, *, resource: str = "unknown") -> AdmissionAnswer:
        self.metrics.count_bad(bad.reason)
        log.warning(
            "admission request not processed; allowing it unchanged",
            extra={"fields": {"reason": bad.reason, "detail": bad.detail, "uid": bad.uid}},
        )
        return AdmissionAnswer(
            body=encode_json(review_response(uid=bad.uid)),
            status="error",
            resource=resource,
            bad_reason=bad.reason,
        )

    def _known_answer(self, body: bytes) -> AdmissionAnswer | None:
        """The memo's answer to ``body``'s question, if it holds one still current (the pod
        is counted as the decision counts it)."""
        caches, decider = self.caches, self._decider
        if not self.memo or caches is None or decider is None or decider.caches is not caches:
            return None
        split = split_uid(body)
        if split is None:
            return None
        question, uid = split
        known = self.memo.answer(question, decider.current)
        if known is None:
            return None
        patches = known.decided.patches
        self.metrics.count_pod(applied=bool(patches))
        return AdmissionAnswer(
            body=known.body(uid),
            status="applied" if patches else "skipped",
            resource="Pod",
            patches=list(patches),
        )

    def _admit_pod(
        self, request: ReviewRequest, *, body: bytes, may_wait: bool
    ) -> AdmissionAnswer | tuple[str, str, str]:
        if request.version != "v1":
            return self._bad(
                BadReview(
                    reason="unsupported-resource",
                    detail="only v1 Pods are supported",
                    uid=request.uid,
                ),
                resource="Pod",
            )
        if not isinstance(request.object, dict):
            return self._bad(
                BadReview(
                    reason="missing-object", detail="request.object is not a Pod", uid=request.uid
                ),
                resource="Pod",
            )
        # the boundary: request.object is an object (checked above), read as the Pod it claims
        pod = cast(Pod, _with_namespace(request.object, request.namespace))
        caches = self.caches
        if caches is None:
            decision = PodDecision(not_matched="caches-not-synced")
        else:
            decision = self._pod_decider(caches).decide(pod, may_wait=may_wait)
        if decision.wait_for is not None:
            return decision.wait_for
        if decision.not_matched is not None:
            self.metrics.count_not_matched(decision.not_matched)
            log.info(
                "pod admitted without its VPA lookups complete",
                extra={"fields": {"uid": request.uid, "reason": decision.not_matched}},
            )
        if decision.hpa_conflict is not None:
            self._record_hpa_conflict(decision.hpa_conflict)
        if decision.limit_range_override is not None:
            self._record_limit_range_override(decision.limit_range_override)
        decided = decision.decided or self.memo.no_patch
        patches = decided.patches
        applied = bool(patches)
        self.metrics.count_pod(applied=applied)
        if (
            decision.answered is not None
            and decision.not_matched is None
            and decision.hpa_conflict is None
            and decision.limit_range_override is None
        ):
            self._remember(body, request.uid, decision.answered, namespace=pod_namespace(pod))
        return AdmissionAnswer(
            body=decided.head + encode_json(request.uid) + decided.tail,
            status="applied" if applied else "skipped",
            resource="Pod",
            patches=list(patches),
        )

    def _remember(self, body: bytes, uid: str, answered: Answered, *, namespace: str) -> None:
        """Keep ``answered`` under ``body``'s question when its first uid field is
        ``request.uid`` (:func:`kubescale.webhook.admission_reviews.uid_is_cut`)."""
        if self.memo.max_entries <= 0 or len(body) > MAX_QUESTION_BYTES:
            return
        split = split_uid(body)
        if split is None or split[1] != uid.encode() or not uid_is_cut(body):
            return
        self.memo.remember_answer(split[0], answered, namespace=namespace)

    def _pod_body(self, uid: str, encoded_patch: str) -> bytes:
        """``encode_json(review_response(uid=uid, encoded_patch=encoded_patch))``, spliced
        from the template the memo keeps with a decision."""
        head, tail = pod_answer_template(encoded_patch)
        return head + encode_json(uid) + tail

    def _record_hpa_conflict(self, conflict: HpaConflict) -> None:
        names = sorted(
            str(Meta(hpa).raw.get("name") or "")
            for hpa in conflict.hpas
            if hpa_scaled_resources(hpa, conflict.target) & conflict.resources
        )
        message = hpa_conflict_message(
            target=conflict.target, hpa_names=names, resources=conflict.resources
        )
        log.info("leaving resources to an HPA", extra={"fields": {"message": message}})
        self._record(conflict.vpa, type="Normal", reason=HPA_CONFLICT_REASON, message=message)

    def _record_limit_range_override(self, override: LimitRangeOverride) -> None:
        message = limit_range_override_message(override.target, override.conflicts)
        log.info("a LimitRange overrode the VPA", extra={"fields": {"message": message}})
        self._record(
            override.vpa, type="Warning", reason=LIMIT_RANGE_CONFLICT_REASON, message=message
        )

    def _record(self, vpa: VerticalPodAutoscaler, *, type: str, reason: str, message: str) -> None:
        """One event per VPA and message per throttle window (every pod of a ReplicaSet
        triggers the same one)."""
        if self.recorder is None:
            return
        metadata = Meta(vpa).raw
        key = (
            metadata.get("namespace"),
            metadata.get("name"),
            metadata.get("uid"),
            reason,
            message,
        )
        if self.event_throttle.allow(key):
            self.recorder.event(vpa, type=type, reason=reason, message=message)

    def _admit_vpa(self, request: ReviewRequest) -> AdmissionAnswer:
        if not isinstance(request.object, dict):
            return self._bad(
                BadReview(
                    reason="missing-object",
                    detail="request.object is not a VerticalPodAutoscaler",
                    uid=request.uid,
                ),
                resource="VPA",
            )
        old = request.old_object if isinstance(request.old_object, dict) else None
        result = admit_vpa(
            operation=request.operation,
            vpa=request.object,
            old_vpa=old,
            feature_gates=self.settings.feature_gates,
        )
        patches = list(result.patches)
        if not result.allowed:
            status = result.status or {"status": "Failure", "message": "invalid object"}
            log.info(
                "VPA rejected",
                extra={"fields": {"uid": request.uid, "message": status.get("message")}},
            )
            review = review_response(
                uid=request.uid, allowed=False, status=status, warnings=result.warnings
            )
            return AdmissionAnswer(body=encode_json(review), status="error", resource="VPA")
        review = review_response(uid=request.uid, patches=patches, warnings=result.warnings)
        return AdmissionAnswer(
            body=encode_json(review),
            status="applied" if patches else "skipped",
            resource="VPA",
            patches=patches,
        )


def limit_range_override_message(
    target: ControllerRef | None, conflicts: Sequence[LimitRangeConflict]
) -> str:
    """The LimitRangeConflict event's message: why, stable across the pods of a controller."""
    pods = f" for pods of {target.kind}/{target.name}" if target is not None else ""
    reasons = "; ".join(conflict.describe() for conflict in conflicts)
    return f"a LimitRange of the namespace wins over this VPA{pods}: {reasons}"


def _with_namespace(pod: dict[str, object], namespace: str) -> dict[str, object]:
    """The pod with ``metadata.namespace`` filled from the request when missing (the pod handler
    sets it for a pod created from ``generateName``). Untrusted JSON: the pod admission
    decodes it."""
    metadata = raw_metadata(pod)
    if not isinstance(metadata, dict):
        return {**pod, "metadata": {"namespace": namespace}}
    if metadata.get("namespace") or not namespace:
        return pod
    return {**pod, "metadata": {**metadata, "namespace": namespace}}
