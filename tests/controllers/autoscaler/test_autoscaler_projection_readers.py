"""The cluster autoscaler reads only what the projected caches keep (issue 29).

The scale-up-then-drain scenario of ``test_autoscaler_e2e`` (6 pods of 500m, a small node
group scaled 1 → 2, then drained and deleted) under the projection audit
(``tests/kube/projection_audit.py``; the folder's conftest runs every test under it): the pod
and node fields the decisions depend on were read, all are in the declared projections, and
with one left out the audit names it.
"""

from __future__ import annotations

from pathlib import Path

from tests.kube.projection_audit import ProjectionAudit, without

from .test_autoscaler_e2e import test_scale_up_then_drain_and_delete as scale_up_and_down


async def test_the_autoscaler_reads_only_projected_fields(
    tmp_path: Path, projection_audit: ProjectionAudit
) -> None:
    await scale_up_and_down(tmp_path)  # asserts the scale-up, the drain and the deletion
    pod_reads = projection_audit.of("Pod")
    node_reads = projection_audit.of("Node")
    assert ("spec", "nodeName") in pod_reads  # pending pods and what runs where
    assert ("spec", "containers", "[]", "resources") in pod_reads
    assert ("status", "allocatable") in node_reads
    assert not projection_audit.dropped()
    assert ("Node", "status", "allocatable") in projection_audit.dropped(
        without("Node", "status.allocatable")
    )
