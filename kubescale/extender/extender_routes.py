"""``POST <prefix>/filter`` and ``POST <prefix>/prioritize`` on kubescale's TLS server.

:meth:`SchedulerExtender.mount` adds the two routes to an ``aiohttp`` application (the TLS
server ``kubescale serve`` runs). Each request is answered from the
:class:`~.cluster_cache.ClusterCache` alone — no API call — well inside kube-scheduler's default
5 s ``httpTimeout``:

* the body is decoded as ``ExtenderArgs`` (:mod:`.extender_protocol`);
* until the caches have listed, or when the request names a node the cache does not know (it
  is still syncing), the answer is an explicit ``Error`` — never a silently empty list, which
  would filter every node out;
* filter answers with :func:`~.extender_decisions.decide_filter`, prioritize with
  :func:`~.extender_decisions.decide_prioritize`.

The decision is CPU work on the serving loop, so both verbs take turns
(:class:`~kubescale.runtime.compute_turns.ComputeTurns`): one computes at a time, at most
``--extender-max-waiting-requests`` wait, and a request beyond that is answered at once with an
explicit "busy" error (kube-scheduler skips an ``ignorable`` extender's error for that pod,
which beats answering after its 5 s ``httpTimeout`` while the webhook, ``/healthz`` and the
loops wait behind a queue of filters: issue 27 item 11). In ``serve`` the turn's decision runs
on a worker thread (:mod:`.offload`), so the loop keeps answering while it computes.

With ``--extender-client-ca-file`` both verbs first check the client's certificate
(:class:`~kubescale.certs.client_identity.ClientCertificateCheck`): none, or one not issued by
that CA, is answered ``403`` with a JSON ``{"Error": ...}`` before the body is decoded.

Filter errors are a 200 with ``Error`` set (the scheduler logs that text; an ``ignorable``
extender is then skipped). Prioritize answers a plain list, so its errors are a 400 with a JSON
``{"Error": ...}`` body (kube-scheduler ignores prioritize errors either way). Input the
decoder lets through and the decisions still fail on (a gap in :mod:`.extender_protocol`'s
checks) is answered the same way — logged at warning level with its traceback, never a 500.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final, TypeVar

from aiohttp import web

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.certs.client_identity import ClientCertificateCheck
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.coordination.ports import PlacementVeto
from kubescale.objects.views import Meta
from kubescale.runtime.compute_turns import ComputeTurns

from .cluster_cache import ClusterCache
from .extender_config import ExtenderSettings
from .extender_decisions import decide_filter, decide_prioritize
from .extender_metrics import ExtenderMetrics
from .extender_protocol import (
    ExtenderArgs,
    ExtenderInputError,
    decode_args,
    encode_answer,
    filter_error,
    filter_result,
    host_priority_list,
)
from .offload import DecisionThread

__all__ = ["SchedulerExtender"]

log = component_logger("extender")

_UNKNOWN_SHOWN: Final = 5
T = TypeVar("T")


class SchedulerExtender:
    """The extender's two verbs (module docstring)."""

    def __init__(
        self,
        *,
        cache: ClusterCache,
        rules: PlacementRules,
        veto: PlacementVeto | None,
        settings: ExtenderSettings,
        clock: Clock,
        metrics: ExtenderMetrics | None = None,
        readiness: Callable[[], str | None] = lambda: None,
        client_cert: ClientCertificateCheck | None = None,
        decisions: DecisionThread | None = None,
    ) -> None:
        self.cache = cache
        self.rules = rules
        self.veto = veto
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.readiness = readiness
        self.client_cert = client_cert
        self.decisions = decisions
        """Where decisions run: a worker thread (:mod:`.offload`; the cache's writers must go
        through its :class:`~.offload.DeferredWrites`), or ``None``: on the serving loop."""
        self.turns = ComputeTurns(
            max_waiting=settings.max_waiting_requests,
            on_change=self._count_turns,
        )

    def _count_turns(self, running: int, waiting: int) -> None:
        if self.metrics is not None:
            self.metrics.waiting.set(waiting)

    def _unauthenticated(self, request: web.Request, verb: str) -> web.Response | None:
        """The ``403`` for a client without an accepted certificate, or ``None``."""
        if self.client_cert is None:
            return None
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        peer = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        refusal = self.client_cert.refusal(peer)
        if refusal is None:
            return None
        if self.metrics is not None:
            self.metrics.requests.labels(verb, "unauthenticated").inc()
        log.warning(
            "extender request refused: client certificate",
            extra={"fields": {"verb": verb, "peer": request.remote, "error": refusal}},
        )
        return web.json_response({"Error": refusal}, status=403)

    def _busy_text(self) -> str:
        return (
            f"scheduler extender busy: {self.turns.waiting} requests already waiting for their "
            "turn (--extender-max-waiting-requests); retry"
        )

    def mount(self, app: web.Application) -> None:
        app.router.add_post(self.settings.route("filter"), self.filter)
        app.router.add_post(self.settings.route("prioritize"), self.prioritize)

    def _args(self, body: bytes) -> ExtenderArgs:
        waiting = self.readiness()
        if waiting:
            raise ExtenderInputError(waiting)
        args = decode_args(body)
        if self.cache.nodes.keys() >= set(args.names):  # the usual case, in one C-level pass
            return args
        unknown = [name for name in args.names if name not in self.cache.nodes]
        if unknown:
            shown = ", ".join(unknown[:_UNKNOWN_SHOWN])
            more = f" and {len(unknown) - _UNKNOWN_SHOWN} more" if len(unknown) > 5 else ""
            raise ExtenderInputError(
                f"nodes not in the extender's cache (still syncing?): {shown}{more}"
            )
        return args

    def _observe(self, verb: str, started: float, *, ok: bool, busy: bool = False) -> None:
        if self.metrics is not None:
            result = "busy" if busy else "ok" if ok else "error"
            self.metrics.requests.labels(verb, result).inc()
            self.metrics.duration.labels(verb).observe(time.perf_counter() - started)

    def answer_filter(self, body: bytes) -> tuple[dict[str, Any], bool]:
        """The ``ExtenderFilterResult`` for a request body, and whether it is not an error."""
        try:
            args = self._args(body)
        except ExtenderInputError as err:
            log.warning("extender filter refused its input", extra={"fields": {"error": str(err)}})
            return filter_error(str(err)), False
        try:
            decision = decide_filter(
                args.pod,
                args.names,
                rules=self.rules,
                state=self.cache,
                veto=self.veto,
                now=self.clock.now(),
            )
        except Exception as err:  # a gap in the input checks: an explicit Error, not a 500
            return filter_error(_unanswerable("filter", err)), False
        if self.metrics is not None:
            for reason, count in Counter((decision.refused_by or {}).values()).items():
                self.metrics.refused.labels(reason).inc(count)
            if decision.policy_fallback:
                self.metrics.fallbacks.inc()
        if decision.policy_fallback:
            meta = Meta(args.pod).raw
            log.info(
                "descheduler policy would refuse every candidate node; refusing none",
                extra={"fields": {"pod": f"{meta.get('namespace')}/{meta.get('name')}"}},
            )
        answer = filter_result(
            args,
            passed=decision.passed,
            failed=decision.failed,
            unresolvable=decision.unresolvable,
        )
        return answer, True

    def _filter_bytes(self, body: bytes) -> tuple[bytes, bool]:
        answer, ok = self.answer_filter(body)
        return encode_answer(answer), ok  # encoding is CPU work too: with the decision

    def _prioritize_bytes(self, body: bytes) -> tuple[int, bytes]:
        try:
            args = self._args(body)
        except ExtenderInputError as err:
            return 400, json.dumps({"Error": str(err)}).encode()
        try:
            scores = decide_prioritize(args.pod, args.names, rules=self.rules, state=self.cache)
        except Exception as err:  # as in filter
            return 400, json.dumps({"Error": _unanswerable("prioritize", err)}).encode()
        return 200, json.dumps(host_priority_list(scores)).encode()

    async def _decide(self, decision: Callable[[], T]) -> T:
        """``decision()`` on the decision thread when there is one, else here."""
        if self.decisions is None:
            return decision()
        return await self.decisions.run(decision)

    async def filter(self, request: web.Request) -> web.Response:
        refused = self._unauthenticated(request, "filter")
        if refused is not None:
            return refused
        started = time.perf_counter()
        body = await request.read()
        async with self.turns.turn() as admitted:
            if not admitted:
                self._observe("filter", started, ok=False, busy=True)
                return web.json_response(filter_error(self._busy_text()))
            answer, ok = await self._decide(lambda: self._filter_bytes(body))
        self._observe("filter", started, ok=ok)
        return web.Response(body=answer, content_type="application/json")

    async def prioritize(self, request: web.Request) -> web.Response:
        refused = self._unauthenticated(request, "prioritize")
        if refused is not None:
            return refused
        started = time.perf_counter()
        body = await request.read()
        async with self.turns.turn() as admitted:
            if not admitted:
                self._observe("prioritize", started, ok=False, busy=True)
                # Not a client error: 503, with the same JSON error body as the others.
                return web.json_response(
                    {"Error": self._busy_text()}, status=503, headers={"Retry-After": "1"}
                )
            status, answer = await self._decide(lambda: self._prioritize_bytes(body))
        self._observe("prioritize", started, ok=status == 200)
        return web.Response(body=answer, status=status, content_type="application/json")


def _unanswerable(verb: str, err: Exception) -> str:
    """Log a failure on input that passed the checks (warning, with the traceback) and the
    one-line ``Error`` for it."""
    log.warning(
        "extender input passed the checks but cannot be decided",
        exc_info=True,
        extra={"fields": {"verb": verb, "error": type(err).__name__}},
    )
    detail = " ".join(str(err).split())[:200]
    return f"ExtenderArgs: cannot decide this pod: {type(err).__name__}: {detail}"
