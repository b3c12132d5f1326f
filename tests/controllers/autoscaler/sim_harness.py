"""A simulated cluster with the cluster autoscaler's loop attached, stepped on a virtual clock.

The in-process API server and the simulated cluster's actors (Cluster API node groups, workload
controllers, scheduler, kubelet, disruption controller) step every ``step`` simulated seconds,
in the simulator's order; after them the autoscaler's informers are settled to the store (a
BOOKMARK at its resourceVersion on every watch) and ``run_once(now)`` runs on a real
``KubeClient``. Node lifetimes are kept for node-hours and cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubescale.base.clock import Clock, VirtualClock
from kubescale.controllers.autoscaler.config.autoscaler_config import AutoscalerSettings
from kubescale.controllers.autoscaler.core.autoscaler_loop import AutoscalerLoop
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import CORE_EVENTS, NODES, PODS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.disruption_controller import DisruptionController
from kubescale.sim.cluster.kubelet import Kubelet
from kubescale.sim.cluster.node_groups import (
    MachineDeploymentGroup,
    NodeGroups,
    NodeTemplate,
    StaticNodeGroup,
)
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.usage_models import UsageBook
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from kubescale.sim.scenario.runner import SimulationClientClock
from tests import builders

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def template(instance_type: str, cpu: str, memory: str, price: float, **kw: Any) -> NodeTemplate:
    return NodeTemplate(
        instance_type=instance_type, cpu=cpu, memory=memory, price_per_hour=price, **kw
    )


@dataclass
class SimCluster:
    api: ApiServer
    clock: VirtualClock
    client: KubeClient
    loop: AutoscalerLoop
    groups: NodeGroups
    actors: list[Any]
    registry: CollectorRegistry
    events: EventRecorder
    step_seconds: float = 10.0
    node_seconds: dict[str, float] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)

    @property
    def now(self) -> datetime:
        return self.clock.now()

    @property
    def t(self) -> float:
        return (self.clock.now() - START).total_seconds()

    async def settle(self) -> None:
        target = str(self.api.store.resource_version)
        for _ in range(100):
            self.api.bookmark_watches()
            if await self.loop.wait_for_resource_version(target, within=0.1):
                return
        raise AssertionError("the autoscaler's informers did not catch up")

    async def step(self) -> None:
        """One step at the current time (actors, then the loop), then the clock moves on."""
        now = self.clock.now()
        for actor in self.actors:
            await actor.step(now)
        await self.settle()
        await self.loop.run_once(now)
        await self.events.flush()
        for node in self.api.store.snapshots(NODES):
            name = node["metadata"]["name"]
            self.node_seconds[name] = self.node_seconds.get(name, 0.0) + self.step_seconds
        self.timeline.append(
            {
                "t": self.t,
                "nodes": sorted(n["metadata"]["name"] for n in self.api.store.snapshots(NODES)),
                "scaled_up": list(self.loop.report.scaled_up),
                "deleted": list(self.loop.report.deleted),
                "evicted": list(self.loop.report.evicted),
            }
        )
        await self.clock.advance(self.step_seconds)

    async def run_for(self, seconds: float) -> None:
        for _ in range(int(seconds // self.step_seconds)):
            await self.step()

    async def run_until(self, condition: Any, *, limit: float, what: str) -> None:
        waited = 0.0
        while not condition():
            if waited >= limit:
                raise AssertionError(f"{what}: not reached within {limit:g} s")
            await self.step()
            waited += self.step_seconds

    def take_over(self) -> AutoscalerLoop:
        """A new leader (or a restarted process): a loop with no memory replaces the current
        one, on the same client, caches, metrics and event recorder — what the component does
        at the start of a new term of leadership."""
        old = self.loop
        self.loop = AutoscalerLoop(
            client=old.client,
            informers=old.informers,
            settings=old.settings,
            metrics=old.metrics,
            events=old.events,
            rng=random.Random(self.loop.iterations),
            write_clock=old.write_deadline.clock,
        )
        return self.loop

    # ------------------------------------------------------------------------ queries

    def pods(self, prefix: str = "") -> list[dict[str, Any]]:
        return [
            p
            for p in self.api.store.snapshots(PODS)
            if p["metadata"]["name"].startswith(prefix)
            and not p["metadata"].get("deletionTimestamp")
        ]

    def running(self, prefix: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(prefix) if (p.get("status") or {}).get("phase") == "Running"]

    def node_names(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.api.store.snapshots(NODES))

    def events_with(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.store.snapshots(CORE_EVENTS) if e.get("reason") == reason]

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.registry.get_sample_value(name, labels or {})
        return 0.0 if value is None else value

    def node_hours_and_cost(self) -> tuple[float, float]:
        prices = self.groups.node_prices()
        hours = sum(self.node_seconds.values()) / 3600
        cost = sum(
            seconds / 3600 * prices.get(name, 0.0) for name, seconds in self.node_seconds.items()
        )
        return hours, cost


@contextlib.asynccontextmanager
async def sim_cluster(
    tmp_path: Path,
    *,
    machine_deployments: Sequence[MachineDeploymentGroup] = (),
    static: Sequence[StaticNodeGroup] = (),
    settings: AutoscalerSettings,
    objects: Sequence[dict[str, Any]] = (),
    seed: int = 1,
    crd_dirs: Sequence[Path] = (),
    write_clock: Clock | None = None,
) -> AsyncIterator[SimCluster]:
    """``crd_dirs``: CRDs the API server loads (Cluster API at v1beta2: ``capi_v1beta2_crds``).
    ``write_clock``: the clock of the loop's per-iteration deadline for provider calls (the
    real clock by default; a test that hangs a write injects a virtual one)."""
    clock = VirtualClock(START)
    async with ApiServer(clock=clock, crd_dirs=list(crd_dirs), seed=seed) as api:
        for obj in objects:
            api.store.create(obj)
        groups = NodeGroups(
            api,
            start=START,
            static=static,
            machine_deployments=machine_deployments,
            rng=random.Random(seed),
        )
        controllers = WorkloadControllers(api=api)
        scheduler = Scheduler(api)
        kubelet = Kubelet(api, usage=UsageBook(seed=seed), start=START)
        disruption = DisruptionController(api)
        api.write_kubeconfig(tmp_path / "kubeconfig")
        async with await connect(
            kubeconfig=tmp_path / "kubeconfig",
            clock=SimulationClientClock(clock),
            registry=CollectorRegistry(),
            rng=random.Random(seed),
        ) as client:
            informers = InformerSet(client=client, rng=random.Random(seed))
            registry = CollectorRegistry()
            events = EventRecorder(client=client, component="cluster-autoscaler")
            loop = AutoscalerLoop(
                client=client,
                informers=informers,
                settings=settings,
                metrics=AutoscalerMetrics(registry),
                events=events,
                rng=random.Random(seed),
                write_clock=write_clock,
            )
            informers.start()
            try:
                assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
                yield SimCluster(
                    api=api,
                    clock=clock,
                    client=client,
                    loop=loop,
                    groups=groups,
                    actors=[groups, controllers, scheduler, kubelet, disruption],
                    registry=registry,
                    events=events,
                )
            finally:
                await events.close()
                await informers.stop()
                controllers.close()
                await scheduler.close()


def app_deployment(
    name: str, *, replicas: int, cpu: str, memory: str = "256Mi", **pod_spec: Any
) -> dict[str, Any]:
    """Deployment ``name`` (labelled ``app: name``, as are its pods) of ``replicas`` pods, one
    container ``app`` requesting ``cpu``/``memory``; ``pod_spec`` adds pod spec fields."""
    labels = {"app": name}
    return builders.workloads.deployment(
        name=name,
        labels=labels,
        replicas=replicas,
        match_labels=labels,
        template=builders.workloads.pod_template(
            labels=labels,
            containers=[
                builders.pods.container(image="app", requests={"cpu": cpu, "memory": memory})
            ],
            spec=pod_spec,
        ),
    )
