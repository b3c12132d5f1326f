"""The updater matches each pod against its controller's VPAs only (issue 29).

Upstream's updater finds a pod's VPAs through the VPA informer's target-ref index
(``TargetRefIndexFunc``); kubescale used to hand every updatable VPA to ``choose_vpa`` for every
pod — pods × VPAs selector checks per loop (10,000 pods × 333 VPAs = 3.3 M at the bench's 10k
size). The budget scenario of ``test_updater_loop`` (4 pods of ``web``, two evictions) plus 6
more VPAs on other Deployments: each pod is matched against exactly one candidate (``web``'s
VPA), and the outcome is the same.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from kubescale.controllers.vpa.api.vpa_matching import choose_vpa
from kubescale.controllers.vpa.updater import pod_matching
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.kube.resources import PODS, VERTICAL_POD_AUTOSCALERS
from kubescale.objects.pod import Pod
from kubescale.objects.vpa import VerticalPodAutoscaler
from tests.controllers.vpa.recommender.test_recommender_loop import NAMESPACE, Cluster, cluster

from .test_updater_loop import (
    RECOMMENDATION,
    Updater,
    live_pods,
    run,
    start_updater,
    status_lease,
    updaters,
    web,
)

__all__ = ["cluster", "updaters"]

OTHERS = 6


async def test_each_pod_is_matched_against_its_controllers_vpas_only(
    cluster: Cluster, updaters: list[Updater], monkeypatch: pytest.MonkeyPatch
) -> None:
    web(cluster)
    for index in range(OTHERS):
        other = cluster.vpa(
            f"other-{index}",
            target=("apps/v1", "Deployment", f"other-{index}"),
            spec={"updatePolicy": {"updateMode": "Recreate"}},
        )
        cluster.api.store.update_status({**other, "status": {"recommendation": RECOMMENDATION}})
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    candidates: list[int] = []

    def counting(pod: Pod, **kwargs: Any) -> VerticalPodAutoscaler | None:
        candidates.append(len(kwargs["candidate_vpas"]))
        return choose_vpa(pod, **kwargs)

    monkeypatch.setattr(pod_matching, "choose_vpa", counting)
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    # the same decision: configured 4, tolerance int(4 × 0.5) = 2 evictions
    assert len(updater.loop.evicted) == 2
    assert len(live_pods(cluster)) == 2
    # 4 pods, each matched against web's VPA alone (not 1 + 6 = 7 VPAs)
    assert candidates == [1, 1, 1, 1]


async def test_a_steady_iteration_matches_no_pod_anew(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    # web's 4 pods under its VPA, the updater in --dry-run (nothing evicted: the pods stay as
    # they are); the matcher counts the pods whose VPA an iteration chose anew (issue 29)
    web(cluster)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    settings = UpdaterSettings(status_lease_namespace=NAMESPACE, dry_run=True)
    updater = await start_updater(cluster, updaters, settings)
    matcher = updater.loop.matcher
    await run(cluster, updater)
    priorities = updater.loop.memory.priorities
    # the first iteration: 4 pods matched, 1 walk (ReplicaSet web-7d9f → Deployment web), 4
    # pods priced (each below the lower bound 400m: outside its range)
    assert (matcher.matched, matcher.walked, priorities.priced) == (4, 1, 4)
    await run(cluster, updater)
    # nothing changed: nothing re-matched, nothing priced again
    assert (matcher.matched, matcher.walked, priorities.priced) == (0, 0, 0)
    pod = cluster.api.store.get(PODS, "web-1", NAMESPACE)
    cluster.api.store.update(
        {**pod, "metadata": {**pod["metadata"], "labels": {"app": "web", "churn": "1"}}}
    )
    await run(cluster, updater)
    assert (matcher.matched, matcher.walked, priorities.priced) == (1, 0, 1)  # the pod written
    status = cluster.api.store.get(VERTICAL_POD_AUTOSCALERS, "web", NAMESPACE)
    rewritten: dict[str, Any] = copy.deepcopy(RECOMMENDATION)
    rewritten["containerRecommendations"][0]["target"]["cpu"] = "600m"
    cluster.api.store.update_status({**status, "status": {"recommendation": rewritten}})
    await run(cluster, updater)
    # the recommender's rewrite of the VPA's status changes nothing the matching reads; the
    # pods are priced against the new recommendation
    assert (matcher.matched, matcher.walked, priorities.priced) == (0, 0, 4)
    cluster.api.store.delete(PODS, "web-2", NAMESPACE, grace_period_seconds=0)
    await run(cluster, updater)
    # the deleted pod's entry released: one per live pod
    assert (matcher.matched, matcher.released, len(matcher)) == (0, 1, 3)
