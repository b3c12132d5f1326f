"""The VPA recommender reads only what the projected caches keep (issue 29).

The one-sample worked example of ``test_recommender_loop`` under the projection audit
(``tests/kube/projection_audit.py``; the folder's conftest runs every test under it): the pod
fields the feeder reads (labels for the VPA's selector, phase, container requests) were read,
all are in the declared projections, and with one left out the audit names it.
"""

from __future__ import annotations

from tests.kube.projection_audit import ProjectionAudit, without

from .test_recommender_loop import Cluster, cluster
from .test_recommender_loop import test_one_sample_gives_the_worked_example as one_sample

__all__ = ["cluster"]


async def test_the_recommender_reads_only_projected_fields(
    cluster: Cluster, projection_audit: ProjectionAudit
) -> None:
    await one_sample(cluster)  # asserts the worked example's recommendation
    pod_reads = projection_audit.of("Pod")
    assert ("metadata", "labels") in pod_reads
    assert ("status", "phase") in pod_reads
    assert ("spec", "containers") in pod_reads
    assert not projection_audit.dropped()
    assert ("Pod", "metadata", "labels") in projection_audit.dropped(
        without("Pod", "metadata.labels")
    )
