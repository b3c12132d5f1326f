"""The VPA updater reads only what the projected caches keep (issue 29).

The eviction-budget scenario of ``test_updater_loop`` (4 replicas, tolerance 50 %: two
evictions) under the projection audit (``tests/kube/projection_audit.py``; the folder's conftest
runs every test under it): the pod fields the decision depends on were read, all are in the
declared projections, and with one left out the audit names it.
"""

from __future__ import annotations

from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster
from tests.kube.projection_audit import ProjectionAudit, without

from .test_updater_loop import Updater, updaters
from .test_updater_loop import (
    test_the_budget_lets_half_of_the_replicas_go_per_loop as budget_scenario,
)

__all__ = ["cluster", "updaters"]


async def test_the_updater_reads_only_projected_fields(
    cluster: Cluster, updaters: list[Updater], projection_audit: ProjectionAudit
) -> None:
    await budget_scenario(cluster, updaters)  # asserts the two evictions
    pod_reads = projection_audit.of("Pod")
    assert ("spec", "containers", "[]", "resources") in pod_reads  # requests vs. recommendation
    assert ("metadata", "ownerReferences") in pod_reads  # the eviction budget per controller
    assert ("status", "phase") in pod_reads
    assert not projection_audit.dropped()
    assert ("Pod", "metadata", "ownerReferences") in projection_audit.dropped(
        without("Pod", "metadata.ownerReferences")
    )
