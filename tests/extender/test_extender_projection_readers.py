"""The scheduler extender reads only what the projected caches keep (issue 29).

The LowNodeUtilization scenario of ``test_descheduler_e2e`` with the extender on (two evicted
pods land on the under-utilized nodes, not back on the hot one) under the projection audit
(``tests/kube/projection_audit.py``; the folder's conftest runs every test under it): the pod
and node fields its cluster cache reads were read, all are in the declared projections, and
with one left out the audit names it.
"""

from __future__ import annotations

from pathlib import Path

from tests.kube.projection_audit import ProjectionAudit, without

from .test_descheduler_e2e import (
    test_lnu_replacements_go_to_under_utilized_nodes_with_the_extender as lnu_with_extender,
)


async def test_the_extender_reads_only_projected_fields(
    tmp_path: Path, projection_audit: ProjectionAudit
) -> None:
    await lnu_with_extender(tmp_path)  # asserts where the replacements landed
    pod_reads = projection_audit.of("Pod")
    assert ("spec", "nodeName") in pod_reads
    assert ("spec", "containers", "[]", "resources") in pod_reads
    assert ("Node", "status", "allocatable") in projection_audit.read
    assert not projection_audit.dropped()
    assert ("Pod", "spec", "nodeName") in projection_audit.dropped(without("Pod", "spec.nodeName"))
