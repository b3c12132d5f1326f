"""The HPA controller reads only what the projected caches keep (issue 29).

One reconcile of the scale-up scenario (``test_hpa_loop``: 2 pods at 900m of 1000m, 50 %
target) under the projection audit (``tests/kube/projection_audit.py``; the folder's conftest
runs every test under it): the fields the decision depends on were read, all of them are in the
declared projections, and with one of them left out of the Pod projection the audit names it —
so this test fails as soon as a field the HPA reads is dropped.
"""

from __future__ import annotations

from kubescale.kube.resources import DEPLOYMENTS
from tests.controllers.vpa.recommender.test_recommender_loop import NAMESPACE
from tests.kube.projection_audit import ProjectionAudit, without

from .hpa_cluster import Hpas
from .test_hpa_loop import cluster, hpas, web

__all__ = ["cluster", "hpas"]


async def test_the_hpa_reads_only_projected_fields(
    hpas: Hpas, projection_audit: ProjectionAudit
) -> None:
    web(hpas, pods=2, usage="900m")
    hpas.hpa("web", target="web")
    loop = await hpas.loop()
    await hpas.run(loop)
    # 1800m of 2000m = 90 %; 90/50 = 1.8; ceil(1.8 × 2) = 4: the pods were read
    assert hpas.cluster.api.store.get(DEPLOYMENTS, "web", NAMESPACE)["spec"]["replicas"] == 4
    pod_reads = projection_audit.of("Pod")
    # calculatePodRequests: pod-level requests first, then the containers'
    assert ("spec", "resources") in pod_reads
    assert ("spec", "containers", "[]", "resources") in pod_reads
    # groupPods: phase, the Ready condition, the start time
    assert ("status", "phase") in pod_reads
    assert ("status", "conditions") in pod_reads
    assert not projection_audit.dropped()
    assert projection_audit.dropped(without("Pod", "spec.resources")) == {
        ("Pod", "spec", "resources")
    }
    assert ("Pod", "status", "conditions") in projection_audit.dropped(
        without("Pod", "status.conditions")
    )
