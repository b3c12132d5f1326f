"""The executor's port to a cloud provider's node groups (:class:`~.intents.ResizeNodeGroup`,
:class:`~.intents.DeleteNodes`).

The plans floor knows no cloud provider: the system that owns one (the cluster autoscaler)
hands its executor a :class:`NodeGroupWrites`. A write that fails raises a
:class:`NodeGroupWriteError` whose :attr:`~NodeGroupWriteError.outcome` says how it counts
(the same classes as any write: :class:`~kubescale.coordination.disruption_ledger.WriteOutcome`):
a refusal (nothing happened), or *unknown* (sent, no answer in time: it counts as done until
the provider's objects show otherwise). The executor keeps the error on its
:class:`~.executor.Applied` (``failure``) for the decision that asked.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from kubescale.coordination.disruption_ledger import WriteOutcome
from kubescale.plans.intents import DeleteNodes, ResizeNodeGroup

__all__ = ["NodeGroupWriteError", "NodeGroupWrites"]


class NodeGroupWriteError(Exception):
    """A node group write that failed; the message is one line for events and logs."""

    outcome: ClassVar[WriteOutcome] = WriteOutcome.REFUSED


class NodeGroupWrites(Protocol):
    """What an executor needs of a cloud provider (module docstring)."""

    async def resize_node_group(self, intent: ResizeNodeGroup) -> None: ...

    async def delete_nodes(self, intent: DeleteNodes) -> None: ...
