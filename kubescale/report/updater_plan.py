"""What the VPA updater would do now, on the report's reading: its plan, nothing written.

The updater's own pure decision (:func:`~kubescale.controllers.vpa.updater.updater_decision.
decide`) runs on an :class:`~kubescale.controllers.vpa.updater.updater_decision.UpdaterSnapshot`
built from the :class:`~kubescale.report.cluster_reading.ClusterReading` (LISTs only), with a
fresh memory and upstream's default flags (``--min-replicas`` 2, ``--eviction-tolerance`` 0.5,
``--pod-update-threshold`` 0.1, the 12 h lifetime and 10 min OOM thresholds, no rate limit),
through :func:`~kubescale.plans.executor.collect_plan`: every intent is answered done as a dry
run, no executor, no client. The plan's evictions and in-place resizes are the report's
``updater_plan``, each with the reason the decision gave it
(:attr:`~kubescale.controllers.vpa.updater.update_priority.PodPriority.reason`).

The snapshot, as the updater reads it: each VPA in a mode the updater acts on (Recreate, Auto,
InPlaceOrRecreate) with a recommendation, whose target is a workload of the reading; its
updatable pods (scheduled, not finished, not being deleted) that the workload's selector
matches; the pods' controllers (ReplicaSets and the workloads: their replicas make the
eviction budget); the namespace's LimitRanges (the recommendation is capped by them). What the
report cannot know is left out: no disruption in flight (the updater's ledger lives in the
process), the HPAs are not read for ``--coordination one-brain`` (upstream's separate
programs), and the admission webhook's status Lease is not checked (the plan is what the
updater would do with a webhook running).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.api.vpa_matching import target_ref_of
from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    controller_of,
    pod_id,
)
from kubescale.controllers.vpa.updater.update_priority import (
    is_terminating,
    pod_is_updatable,
)
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.controllers.vpa.updater.updater_decision import (
    UpdaterMemory,
    UpdaterSnapshot,
    VpaSnapshot,
    decide,
    looked_at,
    vpa_key,
)
from kubescale.controllers.vpa.updater.updater_metrics import UpdaterMetrics
from kubescale.objects.pod import Pod
from kubescale.objects.scale import ReplicaCountedController
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.objects.views import meta, spec_of
from kubescale.plans.executor import collect_plan
from kubescale.plans.intents import Evict, Resize, describe
from kubescale.report.cluster_reading import ClusterReading
from kubescale.report.model_recommendations import workload_key

__all__ = ["updater_plan", "updater_snapshot"]


def _workload_pods(workload: Mapping[str, Any], pods: Sequence[Pod]) -> list[Pod]:
    """The workload's pods by its selector, in its namespace, sorted by ``namespace/name``."""
    namespace = workload_key(workload)[0]
    selector_spec = spec_of(workload).get("selector")
    try:
        selector = label_selector_from_dict(
            selector_spec if isinstance(selector_spec, Mapping) else None
        )
    except SelectorError:
        return []
    matched = [
        pod
        for pod in pods
        if meta(pod).namespace == namespace and selector.matches(meta(pod).labels)
    ]
    return sorted(matched, key=pod_id)


def _controllers(reading: ClusterReading) -> dict[ControllerKey, ReplicaCountedController]:
    """ReplicaSets and workloads by :class:`ControllerKey` (what a pod's controller names)."""
    found: dict[ControllerKey, ReplicaCountedController] = {}
    for obj in [*reading.replica_sets, *reading.workloads]:
        view = meta(obj)
        found[
            ControllerKey(namespace=view.namespace, kind=str(obj.get("kind")), name=view.name)
        ] = cast(ReplicaCountedController, obj)  # a ReplicaSet or a workload: its kind
    return found


def updater_snapshot(reading: ClusterReading, settings: UpdaterSettings) -> UpdaterSnapshot:
    """The snapshot the updater would decide on (module docstring)."""
    workloads = {workload_key(w): w for w in reading.workloads}
    controllers = _controllers(reading)
    entries: list[VpaSnapshot] = []
    terminating: Counter[ControllerKey] = Counter()
    for vpa in sorted(reading.vpas, key=vpa_key):
        if not looked_at(vpa, settings):
            continue
        ref = target_ref_of(vpa)
        workload = workloads.get((ref.namespace, ref.kind, ref.name)) if ref else None
        if workload is None:
            continue
        pods: list[Pod] = []
        for pod in _workload_pods(workload, reading.pods):
            if pod_is_updatable(pod):
                pods.append(pod)
            elif is_terminating(pod) and (owner := controller_of(pod)) is not None:
                terminating[owner] += 1
        keys = {key for pod in pods if (key := controller_of(pod)) is not None}
        namespace = vpa_key(vpa)[0]
        entries.append(
            VpaSnapshot(
                vpa=vpa,
                pods=pods,
                controllers={key: controllers[key] for key in keys if key in controllers},
                limit_ranges=[lr for lr in reading.limit_ranges if meta(lr).namespace == namespace],
            )
        )
    return UpdaterSnapshot(vpas=entries, terminating=terminating)


def updater_plan(
    reading: ClusterReading, *, now: datetime, settings: UpdaterSettings | None = None
) -> list[dict[str, Any]]:
    """The evictions and in-place resizes the updater would make now (module docstring):
    per intent ``action`` (``evict`` / ``resize``), ``namespace``, ``pod``, ``vpa``,
    ``reason`` and ``describe`` (:func:`~kubescale.plans.intents.describe`'s line), in the
    decision's order."""
    settings = settings or UpdaterSettings()
    snapshot = updater_snapshot(reading, settings)
    vpa_of = {pod_id(pod): vpa_key(entry.vpa)[1] for entry in snapshot.vpas for pod in entry.pods}
    plan, _ = collect_plan(
        decide(
            snapshot,
            UpdaterMemory.for_settings(settings),
            now,
            settings=settings,
            # the decision's gauges and counters, on a registry of this report alone
            metrics=UpdaterMetrics(CollectorRegistry()),
        )
    )
    rows: list[dict[str, Any]] = []
    for intent in plan:
        if not isinstance(intent, Evict | Resize):
            continue  # the events and the annotation patch that go with them
        view = meta(intent.pod)
        rows.append(
            {
                "action": "evict" if isinstance(intent, Evict) else "resize",
                "namespace": view.namespace,
                "pod": view.name,
                "vpa": vpa_of.get(pod_id(intent.pod), ""),
                "reason": intent.reason,
                "describe": describe(intent),
            }
        )
    return rows
