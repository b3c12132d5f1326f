"""The descheduler reads only what the projected caches keep (issue 29).

The taint scenario of ``test_descheduler_loop`` (web-0 and web-1 on the tainted n1 are evicted,
api-0 is held by its PDB, the bare pod has no owner) run once under the projection audit
(``tests/kube/projection_audit.py``; the folder's conftest runs every test under it): the
fields the decision depends on were read, all are in the declared projections, and with one of
them left out the audit names it — this test fails as soon as a field the descheduler reads is
dropped from the projection.
"""

from __future__ import annotations

from tests.kube.projection_audit import ProjectionAudit, without

from .test_descheduler_loop import Setup, cluster, make_loop, run, setup, taints_policy, terminating

__all__ = ["setup"]


async def test_the_descheduler_reads_only_projected_fields(
    setup: Setup, projection_audit: ProjectionAudit
) -> None:
    cluster(setup.api)
    made = await make_loop(setup, taints_policy())
    try:
        await run(setup, made)
    finally:
        await made.informers.stop()
    assert terminating(setup.api) == ["web-0", "web-1"]
    node_reads = projection_audit.of("Node")
    pod_reads = projection_audit.of("Pod")
    assert ("spec", "taints") in node_reads  # RemovePodsViolatingNodeTaints
    assert ("spec", "tolerations") in pod_reads
    assert ("metadata", "ownerReferences") in pod_reads  # DefaultEvictor: bare pods stay
    assert ("spec", "nodeName") in pod_reads
    assert not projection_audit.dropped()
    assert ("Node", "spec", "taints") in projection_audit.dropped(without("Node", "spec.taints"))
    assert ("Pod", "spec", "tolerations") in projection_audit.dropped(
        without("Pod", "spec.tolerations")
    )
