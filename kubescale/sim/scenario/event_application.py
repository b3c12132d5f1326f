"""What a scenario's timed events do to the simulated cluster, and how they show on the timeline.

* ``apply``: as ``kubectl apply``: a new object is created through the admission chain; an
  existing one is patched with the manifest (strategic merge for built-in kinds, JSON merge
  patch for custom resources, as kubectl does), so fields the manifest leaves out — labels and
  annotations a controller added, ``spec.replicas`` of a scaled object — are kept; ``status``
  in a manifest is ignored;
* ``delete``: a DELETE with default options (a pod is deleted gracefully and finished off by the
  kubelet); what a deleted workload owned is garbage-collected by the workload controllers
  (background propagation, as upstream's garbage collector does);
* ``setLoad``: the container's usage model is replaced in the :class:`UsageBook` from now on;
* ``fault``: the API server's :class:`~kubescale.sim.apiserver.faults.FaultInjector` is told.

Each applied event becomes a :class:`~.timeline.TimelineEvent` (kinds ``apply``, ``delete``,
``set-load``, ``fault``) so it is marked in the report.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubescale.base.logs import component_logger
from kubescale.objects.selectors import label_selector_from_set
from kubescale.sim.apiserver import errors
from kubescale.sim.apiserver.patching import (
    apply_merge_patch,
    apply_strategic_merge_patch,
    supports_strategic_merge,
)
from kubescale.sim.apiserver.served_kinds import served_kind
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.writes import update_object
from kubescale.sim.cluster.trace_replay import Trace
from kubescale.sim.cluster.usage_models import UsageBook

from .scenario_format import (
    ApplyEvent,
    DeleteEvent,
    FaultEvent,
    ScenarioEvent,
    SetLoadEvent,
    SetMetricEvent,
)
from .timeline import TimelineEvent
from .usage_specs import build_usage_model

__all__ = ["apply_event"]

log = component_logger("simulation")


def _subject(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = f"{obj.get('kind')}/{meta.get('name')}"
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


async def _apply(api: ApiServer, event: ApplyEvent) -> str:
    obj = copy.deepcopy(dict(event.object))
    obj.pop("status", None)  # a user's write does not set status
    rt = api.store.type_of(obj)
    meta = obj["metadata"]
    namespace = meta.get("namespace") if rt.namespaced else None
    if api.store.peek(rt, meta["name"], namespace) is None:
        await api.create_admitted(obj)
        return "created"
    api_version, kind = str(obj["apiVersion"]), str(obj["kind"])

    def merged(current: dict[str, Any] | None) -> dict[str, Any]:
        if current is None:
            return obj
        # kubectl apply: a strategic merge patch for built-in kinds, a JSON merge patch for
        # custom resources; fields the manifest leaves out are kept.
        if supports_strategic_merge(api_version, kind):
            return apply_strategic_merge_patch(current, obj, api_version=api_version, kind=kind)
        result: dict[str, Any] = apply_merge_patch(current, obj)
        return result

    await update_object(
        api.context, rt, name=str(meta["name"]), namespace=namespace, new_body=merged
    )
    return "configured"


def _delete(api: ApiServer, event: DeleteEvent) -> str:
    rt = served_kind(event.api_version, event.kind)
    assert rt is not None  # validated
    current = api.store.peek(rt, event.name, event.namespace)
    if current is None:
        return "not found"
    api.store.delete(rt, event.name, event.namespace)
    return "deleted"


def _fault(api: ApiServer, event: FaultEvent) -> str:
    faults = api.faults
    if event.fault == "apiError":
        faults.add(
            verb=event.verb,
            resource=event.resource,
            status=event.status,
            count=event.count,
            retry_after=event.retry_after,
            delay=event.delay,
        )
        times = "until cleared" if event.count is None else f"×{event.count}"
        return f"{event.verb or '*'} {event.resource or '*'} → {event.status} {times}"
    if event.fault == "dropWatches":
        faults.drop_watches(event.resource)
        return f"dropped watches of {event.resource or 'every resource'}"
    if event.fault == "expireHistory":
        faults.expire_history()
        return "history expired"
    faults.clear()
    return "faults cleared"


async def apply_event(
    api: ApiServer,
    event: ScenarioEvent,
    *,
    t: float,
    book: UsageBook,
    traces: Mapping[str, Trace],
) -> TimelineEvent:
    """Do what ``event`` says at ``t`` (seconds since start); the timeline entry for it.

    An ``apply`` or ``delete`` the API server refuses (an invalid object, a denying webhook)
    does not stop the run: the entry's detail says why it failed, and it is logged.
    """
    if isinstance(event, ApplyEvent | DeleteEvent):
        kind = "apply" if isinstance(event, ApplyEvent) else "delete"
        subject = _subject(event.object) if isinstance(event, ApplyEvent) else _ref(event)
        try:
            detail = (
                await _apply(api, event) if isinstance(event, ApplyEvent) else _delete(api, event)
            )
        except errors.ApiError as exc:
            log.warning(
                "scenario event refused by the API server",
                extra={"fields": {"at": t, "subject": subject, "error": exc.message}},
            )
            detail = f"failed: {exc.message}"
        return TimelineEvent(time=t, kind=kind, subject=subject, detail=detail)
    if isinstance(event, SetLoadEvent):
        model = build_usage_model(event.usage, traces=traces)
        book.set_model(workload=event.workload, container=event.container, model=model)
        return TimelineEvent(
            time=t,
            kind="set-load",
            subject=f"{event.workload}/{event.container}",
            detail=f"usage model {event.usage.type}",
        )
    if isinstance(event, SetMetricEvent):
        if event.type == "Pods":
            api.metrics.set_shared_pod_metric(
                namespace=event.namespace,
                metric=event.name,
                selector=label_selector_from_set(event.selector),
                total=event.value,
            )
        else:
            api.metrics.set_external_metric(
                namespace=event.namespace,
                metric=event.name,
                value=event.value,
                metric_labels=event.labels,
            )
        return TimelineEvent(
            time=t,
            kind="set-metric",
            subject=f"{event.namespace}/{event.name}",
            detail=f"{event.type} metric {event.value}",
        )
    return TimelineEvent(time=t, kind="fault", subject="apiserver", detail=_fault(api, event))


def _ref(event: DeleteEvent) -> str:
    return _subject(
        {"kind": event.kind, "metadata": {"name": event.name, "namespace": event.namespace}}
    )
