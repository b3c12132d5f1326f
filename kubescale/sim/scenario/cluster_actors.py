"""The simulated cluster's actors for a scenario, in the order they act each step.

node groups (:class:`~kubescale.sim.cluster.node_groups.NodeGroups`: the static nodes and the
Cluster API node groups) → workload controllers
(:class:`~kubescale.sim.cluster.workload_controllers.WorkloadControllers`) → scheduler
(:class:`~kubescale.sim.cluster.scheduler.Scheduler`, with the scenario's extenders) → kubelet
(:class:`~kubescale.sim.cluster.kubelet.Kubelet`, usage from the scenario's
:class:`~kubescale.sim.cluster.usage_models.UsageBook`). A new node is there before the scheduler
looks for room, and a pod bound in a step is started by the kubelet in the same step.

Static nodes follow the node groups' naming: an entry ``{name: worker, count: 2}`` registers
``worker-0`` and ``worker-1``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.actor import Actor
from kubescale.sim.cluster.disruption_controller import DisruptionController
from kubescale.sim.cluster.kubelet import ContainerSample, Kubelet
from kubescale.sim.cluster.node_groups import (
    MachineDeploymentGroup,
    NodeGroups,
    NodeTemplate,
    StaticNodeGroup,
)
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.scheduler_extenders import ExtenderConfig
from kubescale.sim.cluster.usage_models import UsageBook
from kubescale.sim.cluster.workload_controllers import WorkloadControllers

from .scenario_format import NodeGroupSpec, ResourceList, Scenario, StaticNodeSpec
from .timeline import TimelineEvent

__all__ = ["ClusterActors", "build_cluster_actors", "node_template"]

_DEFAULT_ZONE = "zone-a"


def node_template(
    *,
    name: str,
    allocatable: ResourceList,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    price_per_hour: float,
    instance_type: str | None,
    zones: Sequence[str],
) -> NodeTemplate:
    """The instance type of a static node entry or node group (capacity = allocatable)."""
    assert allocatable.cpu is not None  # validated: both are required
    assert allocatable.memory is not None
    return NodeTemplate(
        instance_type=instance_type or name,
        cpu=allocatable.cpu,
        memory=allocatable.memory,
        pods=int(allocatable.pods or "110"),
        labels=dict(labels),
        taints=tuple(dict(taint) for taint in taints),
        zones=tuple(zones) or (_DEFAULT_ZONE,),
        price_per_hour=price_per_hour,
    )


def _static_group(spec: StaticNodeSpec) -> StaticNodeGroup:
    return StaticNodeGroup(
        name=spec.name,
        count=spec.count,
        template=node_template(
            name=spec.name,
            allocatable=spec.allocatable,
            labels=spec.labels,
            taints=spec.taints,
            price_per_hour=spec.price_per_hour,
            instance_type=spec.instance_type,
            zones=spec.zones,
        ),
    )


def _machine_deployment(spec: NodeGroupSpec) -> MachineDeploymentGroup:
    return MachineDeploymentGroup(
        name=spec.name,
        template=node_template(
            name=spec.name,
            allocatable=spec.allocatable,
            labels=spec.labels,
            taints=spec.taints,
            price_per_hour=spec.price_per_hour,
            instance_type=spec.instance_type,
            zones=spec.zones,
        ),
        min_size=spec.min_size,
        max_size=spec.max_size,
        replicas=spec.replicas,
        provisioning_delay=spec.provisioning_delay,
        deprovisioning_delay=spec.deprovisioning_delay,
    )


class ClusterActors:
    """The actors of a run and what the report needs from them each step."""

    def __init__(
        self,
        *,
        node_groups: NodeGroups,
        controllers: WorkloadControllers,
        scheduler: Scheduler,
        kubelet: Kubelet,
        disruption: DisruptionController,
    ) -> None:
        self.node_groups = node_groups
        self.controllers = controllers
        self.scheduler = scheduler
        self.kubelet = kubelet
        self.disruption = disruption

    def in_order(self) -> tuple[Actor, ...]:
        """node groups → workload controllers → scheduler → kubelet → disruption controller
        (last, so PodDisruptionBudget status sees this step's readiness)."""
        return (self.node_groups, self.controllers, self.scheduler, self.kubelet, self.disruption)

    def samples(self) -> list[ContainerSample]:
        return self.kubelet.samples()

    def events(self) -> list[TimelineEvent]:
        """This step's events: nodes first (they happened first), then pods."""
        return [*self.node_groups.events(), *self.kubelet.events()]

    def node_prices(
        self, nodes: Sequence[Mapping[str, Any]], *, known: Mapping[str, float]
    ) -> list[tuple[str, float]]:
        """(node, price per hour) of the nodes not priced yet."""
        if all(node["metadata"]["name"] in known for node in nodes):
            return []
        return sorted(
            (name, price)
            for name, price in self.node_groups.node_prices().items()
            if name not in known
        )

    async def close(self) -> None:
        self.controllers.close()
        await self.scheduler.close()


def build_cluster_actors(
    scenario: Scenario,
    *,
    api: ApiServer,
    book: UsageBook,
    extenders: Sequence[Mapping[str, Any]] | None = None,
) -> ClusterActors:
    """The actors of ``scenario`` on ``api`` (create after the scenario's objects exist).

    ``extenders``: the scheduler's extender entries (default: the scenario's).
    """
    entries = scenario.extenders if extenders is None else extenders
    return ClusterActors(
        node_groups=NodeGroups(
            api,
            start=scenario.start,
            static=[_static_group(spec) for spec in scenario.nodes],
            machine_deployments=[_machine_deployment(spec) for spec in scenario.node_groups],
            rng=random.Random(f"nodes:{scenario.seed}"),
        ),
        controllers=WorkloadControllers(api=api),
        scheduler=Scheduler(api, extenders=[ExtenderConfig.from_dict(raw) for raw in entries]),
        kubelet=Kubelet(api, usage=book, start=scenario.start),
        disruption=DisruptionController(api),
    )
