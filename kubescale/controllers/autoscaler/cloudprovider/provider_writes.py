"""The cloud provider as the plan executor's node group port, and how a loop step applies
a node group intent.

The autoscaler's writes to its node groups are intents (:class:`~kubescale.plans.intents.
ResizeNodeGroup`: upstream's ``IncreaseSize`` / ``DecreaseTargetSize``;
:class:`~kubescale.plans.intents.DeleteNodes`: ``DeleteNodes``) applied by the one
:class:`~kubescale.plans.executor.PlanExecutor`, which checks the leader Lease before each,
counts it in ``kubescale_plan_intents_total`` and prints it under ``--dry-run`` instead.
:class:`ProviderWrites` is the port the executor calls: it finds the intent's node group in
the iteration's :class:`~.cloud_provider.ProviderSnapshot` (:meth:`ProviderWrites.use`) and
calls the provider, whose :class:`~.cloud_provider.ProviderError` says how the write counts
(:class:`~.cloud_provider.WriteOutcomeUnknown`: unknown, counted as done; any other: refused).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    CloudProvider,
    NodeGroup,
    ProviderError,
    ProviderSnapshot,
)
from kubescale.plans.executor import Applied, PlanExecutor
from kubescale.plans.intents import DeleteNodes, ResizeNodeGroup
from kubescale.plans.node_groups import NodeGroupWrites

__all__ = ["ACTOR", "ProviderWrites", "node_group_failure", "write_node_group"]

ACTOR: Final = "cluster-autoscaler"
"""The autoscaler's name on its intents: the disruption ledger's actor and the ``actor`` label
of ``kubescale_plan_intents_total``."""


class ProviderWrites(NodeGroupWrites):
    """The executor's node group port over ``provider`` (module docstring)."""

    def __init__(self, provider: CloudProvider) -> None:
        self.provider = provider
        self.snapshot: ProviderSnapshot | None = None
        """The iteration's snapshot: the node groups intents name."""

    def use(self, snapshot: ProviderSnapshot) -> None:
        """The node groups of this iteration (each ``refresh``)."""
        self.snapshot = snapshot

    def _group(self, group_id: str) -> NodeGroup:
        group = self.snapshot.groups.get(group_id) if self.snapshot is not None else None
        if group is None:
            raise ProviderError(f"node group {group_id} is gone")
        return group

    async def resize_node_group(self, intent: ResizeNodeGroup) -> None:
        group = self._group(intent.group)
        if intent.delta > 0:
            await self.provider.increase_size(group, intent.delta)
        else:
            await self.provider.decrease_target_size(group, intent.delta)

    async def delete_nodes(self, intent: DeleteNodes) -> None:
        await self.provider.delete_nodes(self._group(intent.group), intent.nodes)


def node_group_failure(applied: Applied) -> ProviderError | None:
    """The provider's error for a node group intent's result: as the provider raised it, or,
    when the executor refused the intent before the provider saw it (the leader Lease lost),
    a :class:`~.cloud_provider.ProviderError` saying so; ``None`` when it was done (or
    printed by ``--dry-run``)."""
    if isinstance(applied.failure, ProviderError):
        return applied.failure
    if applied.error is not None:
        return ProviderError(str(applied.error))
    return None


async def write_node_group(
    executor: PlanExecutor, intent: ResizeNodeGroup | DeleteNodes, *, now: datetime
) -> None:
    """Apply ``intent``; raise its :func:`node_group_failure` if any (the callers handle the
    provider's errors as upstream's loop does)."""
    failure = node_group_failure(await executor.execute(intent, now=now))
    if failure is not None:
        raise failure
