"""The webhook's caches read only what the projected caches keep (issue 29).

The admission request carries the whole pod; what the webhook reads from informers of
projected kinds is the nodes (``--cap-to-largest-node``: the largest Ready allocatable) and
namespaces. The node scenario of ``test_webhook_caches`` under the projection audit
(``tests/kube/projection_audit.py``; the folder's conftest runs every test under it): the node
fields were read, all are in the declared projection, and with one left out the audit names it.
"""

from __future__ import annotations

from tests.kube.projection_audit import ProjectionAudit, without

from .test_webhook_caches import (
    Caches,
    api,
    clock,
    kube,
    setup,
)
from .test_webhook_caches import (
    test_largest_node_allocatable_follows_node_changes as node_scenario,
)

__all__ = ["api", "clock", "kube", "setup"]


async def test_the_webhook_reads_only_projected_fields(
    setup: Caches, projection_audit: ProjectionAudit
) -> None:
    await node_scenario(setup)  # asserts the largest allocatable as nodes change
    node_reads = projection_audit.of("Node")
    assert ("status", "allocatable") in node_reads
    assert ("status", "conditions") in node_reads  # only Ready nodes count
    assert not projection_audit.dropped()
    assert ("Node", "status", "allocatable") in projection_audit.dropped(
        without("Node", "status.allocatable")
    )
