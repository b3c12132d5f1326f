"""The simulated cluster's nodes: static node groups and Cluster API node groups, with prices.

:class:`NodeGroups` is the actor that runs first in every step (node groups → workload
controllers → scheduler → kubelet). On its first step it registers the static nodes of every
:class:`StaticNodeGroup` (``<group>-<i>``, Ready, ``spec.providerID: sim://<node>``) and creates
the MachineDeployment of every :class:`~.machine_controllers.MachineDeploymentGroup`, whose
initial machines are up at once; from then on the Cluster API controllers
(:mod:`.machine_controllers`) follow ``spec.replicas`` — what a cluster autoscaler sets through
the ``/scale`` subresource — adding nodes after the group's provisioning delay and removing the
machines it marks with ``cluster.x-k8s.io/delete-machine``.

:meth:`NodeGroups.events` gives this step's ``node-added`` / ``node-removed`` events;
:meth:`NodeGroups.node_prices` the price per hour of every node that ever existed (the cost
report integrates over each node's lifetime); :meth:`NodeGroups.group_of` a node's group.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime

from kubescale.kube.resources import NODES
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.storage import format_time
from kubescale.sim.cluster.cluster_events import NODE_ADDED, NODE_REMOVED, TimelineEvent

from .machine_controllers import MachineDeploymentController
from .machine_lifecycle import NodeChange
from .node_templates import MachineDeploymentGroup, NodeTemplate, StaticNodeGroup, build_node

__all__ = [
    "MachineDeploymentGroup",
    "NodeGroups",
    "NodeTemplate",
    "StaticNodeGroup",
]


class NodeGroups:
    """An :class:`~kubescale.sim.cluster.actor.Actor` owning every node of the simulated cluster."""

    def __init__(
        self,
        api: ApiServer,
        *,
        start: datetime,
        static: Sequence[StaticNodeGroup] = (),
        machine_deployments: Sequence[MachineDeploymentGroup] = (),
        rng: random.Random | None = None,
    ) -> None:
        names = [g.name for g in static] + [g.name for g in machine_deployments]
        if len(set(names)) != len(names):
            raise ValueError("node group names must be unique")
        self._api = api
        self._store = api.store
        self._start = start
        self._static = list(static)
        self._addresses = 0
        self._registered = False
        self._events: list[TimelineEvent] = []
        self._prices: dict[str, float] = {}
        self._groups: dict[str, str] = {}
        rng = rng if rng is not None else random.Random(0)
        self._controllers = [
            MachineDeploymentController(api, group, rng=rng, next_address=self._next_address)
            for group in machine_deployments
        ]
        self._templates = {g.name: g.template for g in static} | {
            g.name: g.template for g in machine_deployments
        }

    def _next_address(self) -> str:
        self._addresses += 1
        return f"10.0.{self._addresses // 250}.{self._addresses % 250 + 1}"

    # --------------------------------------------------------------------------- outputs

    def events(self) -> list[TimelineEvent]:
        """This step's ``node-added`` and ``node-removed`` events."""
        return list(self._events)

    def node_prices(self) -> dict[str, float]:
        """Price per hour of every node this actor ever registered, by node name."""
        return dict(self._prices)

    def group_prices(self) -> dict[str, float]:
        """Price per hour of one node of each group, by group name."""
        return {name: template.price_per_hour for name, template in self._templates.items()}

    def group_of(self, node: str) -> str | None:
        """The group a node belongs (or belonged) to."""
        return self._groups.get(node)

    # ------------------------------------------------------------------------------ step

    async def step(self, now: datetime) -> None:
        self._events = []
        t = (now - self._start).total_seconds()
        changes: list[NodeChange] = []
        if not self._registered:
            self._registered = True
            self._register_static(now, changes)
        for controller in self._controllers:
            controller.step(now, changes)
        for change in changes:
            if change.added:
                self._prices[change.node] = self._templates[change.group].price_per_hour
                self._groups[change.node] = change.group
            self._events.append(
                TimelineEvent(
                    time=t,
                    kind=NODE_ADDED if change.added else NODE_REMOVED,
                    subject=change.node,
                    detail=change.detail,
                )
            )

    def _register_static(self, now: datetime, changes: list[NodeChange]) -> None:
        for group in self._static:
            for index in range(group.count):
                name = f"{group.name}-{index}"
                if self._store.peek(NODES, name) is not None:
                    continue
                zone = group.template.zone(index)
                self._store.create(
                    build_node(
                        name=name,
                        template=group.template,
                        zone=zone,
                        provider_id=f"sim://{name}",
                        address=self._next_address(),
                        ready_since=format_time(now),
                    )
                )
                changes.append(
                    NodeChange(
                        added=True,
                        node=name,
                        group=group.name,
                        detail=f"group {group.name} ({group.template.instance_type}, {zone})",
                    )
                )
