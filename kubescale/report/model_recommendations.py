"""Recommendations for workloads without a VPA, from the recommender's own model.

``kubescale report --all-workloads`` does what the VPA recommender would do if every workload
had a VPA, without creating one: each workload enters a
:class:`~kubescale.controllers.vpa.model.cluster_state.ClusterState` as an in-memory VPA on its
selector (never written to the cluster); the usage history is loaded from Prometheus when an
address is given (``InitFromHistoryProvider``, :func:`load_history`); then the pods with their
requests (``LoadPods``) and one metrics.k8s.io sample per container (``LoadRealTimeMetrics``)
— and the model's ``UpdateVPAs`` pass gives lower bound, target and upper bound exactly as the
recommender computes them (same estimators, margins, confidence and minimums).

With only the one live sample (no Prometheus) the model's confidence is as low as upstream's
after one minute of a new VPA: the target is the sample plus margin, the bounds wide. The
report says how many samples each recommendation rests on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubescale.base.times import format_time
from kubescale.controllers.vpa.model.cluster_state import ClusterState, VpaRecommendation
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.cluster_feeder import (
    container_requests,
    pod_metrics_samples,
)
from kubescale.controllers.vpa.recommender.prometheus_history import (
    HistoryLoadResult,
    HistoryProvider,
    load_history,
)
from kubescale.objects.metrics_api import PodMetrics
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["ModelRecommendations", "WorkloadKey", "model_recommendations", "workload_key"]

WorkloadKey = tuple[str, str, str]
"""(namespace, kind, name)."""


def workload_key(workload: Mapping[str, Any]) -> WorkloadKey:
    metadata = Meta(workload).raw
    return (
        str(metadata.get("namespace") or ""),
        str(workload.get("kind") or ""),
        str(metadata.get("name") or ""),
    )


@dataclass(frozen=True, kw_only=True)
class ModelRecommendations:
    """What the model recommends per workload, and what it rested on."""

    by_workload: dict[WorkloadKey, VpaRecommendation] = field(default_factory=dict)
    live_samples: int = 0
    """metrics.k8s.io samples the model accepted (one CPU and one memory per container)."""
    history: HistoryLoadResult | None = None
    """The Prometheus history load, when one was asked for."""


def _synthetic_vpa(workload: Mapping[str, Any], now: datetime) -> VerticalPodAutoscaler:
    namespace, kind, name = workload_key(workload)
    return {
        "metadata": {
            "namespace": namespace,
            "name": f"{kind.lower()}/{name}",  # in memory only: never a valid object name
            "creationTimestamp": format_time(now),
        },
        "spec": {
            "targetRef": {
                "apiVersion": str(workload.get("apiVersion") or ""),
                "kind": kind,
                "name": name,
            },
            "updatePolicy": {"updateMode": "Off"},
        },
    }


async def model_recommendations(
    *,
    workloads: Sequence[Mapping[str, Any]],
    pods: Sequence[Pod],
    pod_metrics: Sequence[PodMetrics],
    now: datetime,
    history: HistoryProvider | None = None,
    config: RecommenderConfig | None = None,
) -> ModelRecommendations:
    """The model's recommendation for each workload (see the module docstring)."""
    state = ClusterState(config=config or RecommenderConfig())
    names: dict[tuple[str, str], WorkloadKey] = {}
    for workload in workloads:
        selector_spec = spec_of(workload).get("selector")
        try:
            selector = label_selector_from_dict(
                selector_spec if isinstance(selector_spec, Mapping) else None
            )
        except SelectorError:
            continue
        vpa = _synthetic_vpa(workload, now)
        state.add_or_update_vpa(vpa, selector=selector)
        vpa_meta = Meta(vpa)
        names[(vpa_meta.namespace, vpa_meta.name)] = workload_key(workload)
    loaded = await load_history(history, state, now=now) if history is not None else None
    for pod in pods:
        metadata = Meta(pod).raw
        phase = str(status_of(pod).get("phase") or "")
        if phase == "Pending":
            continue
        state.add_or_update_pod(
            namespace=str(metadata.get("namespace") or ""),
            name=str(metadata.get("name") or ""),
            labels=dict(metadata.get("labels") or {}),
            phase=phase,
            containers=container_requests(pod),
            now=now,
        )
    accepted = state.add_samples(pod_metrics_samples(pod_metrics))
    computed = state.recommendations(now=now)
    return ModelRecommendations(
        by_workload={names[key]: rec for key, rec in computed.items() if key in names},
        live_samples=accepted,
        history=loaded,
    )
