"""The updater matches each pod against its controller's VPAs only (issue 29).

Upstream's updater finds a pod's VPAs through the VPA informer's target-ref index
(``TargetRefIndexFunc``); kubescale used to hand every updatable VPA to ``choose_vpa`` for every
pod — pods × VPAs selector checks per loop (10,000 pods × 333 VPAs = 3.3 M at the bench's 10k
size). The budget scenario of ``test_updater_loop`` (4 pods of ``web``, two evictions) plus 6
more VPAs on other Deployments: each pod is matched against exactly one candidate (``web``'s
VPA), and the outcome is the same.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kubescale.controllers.vpa.api.vpa_matching import choose_vpa
from kubescale.controllers.vpa.updater import updater_loop
from kubescale.objects.pod import Pod
from kubescale.objects.vpa import VerticalPodAutoscaler
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

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

    monkeypatch.setattr(updater_loop, "choose_vpa", counting)
    updater = await start_updater(cluster, updaters)
    await run(cluster, updater)
    # the same decision: configured 4, tolerance int(4 × 0.5) = 2 evictions
    assert len(updater.loop.evicted) == 2
    assert len(live_pods(cluster)) == 2
    # 4 pods, each matched against web's VPA alone (not 1 + 6 = 7 VPAs)
    assert candidates == [1, 1, 1, 1]
