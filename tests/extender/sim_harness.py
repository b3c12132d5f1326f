"""The simulated cluster with kubescale's descheduler loop and scheduler extender attached.

The in-process API server and the cluster's actors (workload controllers, the simulated
kube-scheduler, kubelets, the disruption controller) step on a virtual clock; the descheduler
loop runs ``run_once(now)`` with a real :class:`~kubescale.kube.client.KubeClient`; the
extender serves its routes over HTTPS (its own CA) from a :class:`ClusterCache` fed by the same
shared informers, and the simulated scheduler calls it as a KubeSchedulerConfiguration
``extenders`` entry (``nodeCacheCapable``, ``ignorable``, weight 1) — or not at all
(``extender=False``), which is upstream's situation.
"""

from __future__ import annotations

import asyncio
import base64
import random
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.certs.authority import generate_ca, issue_serving_certificate
from kubescale.controllers.descheduler.descheduler_config import DeschedulerSettings
from kubescale.controllers.descheduler.descheduler_loop import DeschedulerLoop
from kubescale.controllers.descheduler.descheduler_metrics import DeschedulerMetrics
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.extender.cluster_cache import ClusterCache
from kubescale.extender.extender_config import ExtenderSettings
from kubescale.extender.extender_metrics import ExtenderMetrics
from kubescale.extender.extender_routes import SchedulerExtender
from kubescale.extender.informer_feed import feed
from kubescale.kube.client import connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import NODES, PODS
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.disruption_controller import DisruptionController
from kubescale.sim.cluster.kubelet import Kubelet
from kubescale.sim.cluster.node_templates import NodeTemplate, build_node
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.scheduler_extenders import ExtenderConfig
from kubescale.sim.cluster.usage_models import UsageBook
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from kubescale.sim.scenario.runner import SimulationClientClock

START = datetime(2026, 3, 2, 8, tzinfo=UTC)
STEP = 30.0


@dataclass
class Harness:
    clock: VirtualClock
    api: ApiServer
    loop: DeschedulerLoop
    events: EventRecorder
    informers: InformerSet
    memory: EvictionMemory
    cache: ClusterCache
    scheduler: Scheduler
    controllers: WorkloadControllers
    kubelet: Kubelet
    disruption: DisruptionController
    extender_metrics: ExtenderMetrics

    async def settle(self) -> None:
        """The informers (the loop's and the extender's) reflect the store as it is now."""
        target = str(self.api.store.resource_version)
        for _ in range(100):
            self.api.bookmark_watches()
            if await self.informers.wait_for_resource_version(target, within=0.1):
                return
        raise AssertionError("the informers did not catch up with the store")

    async def step(self) -> None:
        """One step: controllers, then (caches settled) the scheduler, the kubelets and the
        disruption controller; then the clock moves on."""
        now = self.clock.now()
        await self.controllers.step(now)
        await self.settle()
        await self.scheduler.step(now)
        await self.kubelet.step(now)
        await self.disruption.step(now)
        await self.clock.advance(STEP)

    async def deschedule(self) -> None:
        await self.settle()
        await self.loop.run_once(self.clock.now())
        await self.events.flush()

    # ---------------------------------------------------------------------- cluster

    def add_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        labels: Mapping[str, str] | None = None,
    ) -> None:
        template = NodeTemplate(instance_type="m", cpu=cpu, memory=memory, labels=labels or {})
        self.api.store.create(
            build_node(
                name=name,
                template=template,
                zone="zone-a",
                provider_id=f"sim://{name}",
                address="10.0.0.1",
                ready_since=self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
        )

    def taint_node(self, name: str, taint: Mapping[str, str]) -> None:
        current = self.api.store.get(NODES, name)
        spec = {**(current.get("spec") or {}), "taints": [dict(taint)]}
        self.api.store.update({**current, "spec": spec})

    def deploy(
        self,
        name: str,
        *,
        replicas: int,
        cpu: str,
        memory: str,
        pod_spec: Mapping[str, Any] | None = None,
    ) -> None:
        labels = {"app": name}
        self.api.store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            **(pod_spec or {}),
                            "containers": [
                                {
                                    "name": "app",
                                    "image": f"{name}:1",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                                }
                            ],
                        },
                    },
                },
            }
        )

    def placement(self, app: str) -> dict[str, int]:
        """Node → how many live (not terminating) pods of ``app`` are bound there."""
        counts: dict[str, int] = {}
        for pod in self.api.store.snapshots(PODS):
            meta, spec = pod["metadata"], pod.get("spec") or {}
            if (meta.get("labels") or {}).get("app") != app or meta.get("deletionTimestamp"):
                continue
            if spec.get("nodeName"):
                counts[spec["nodeName"]] = counts.get(spec["nodeName"], 0) + 1
        return dict(sorted(counts.items()))

    def pods_of(self, app: str) -> dict[str, str]:
        """Live pod name → node of ``app`` ("" while pending)."""
        return {
            p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or ""
            for p in self.api.store.snapshots(PODS)
            if (p["metadata"].get("labels") or {}).get("app") == app
            and not p["metadata"].get("deletionTimestamp")
        }


async def _https_extender(
    stack: AsyncExitStack, extender: SchedulerExtender, directory: Path
) -> dict[str, Any]:
    """Serve the extender over HTTPS; its KubeSchedulerConfiguration ``extenders`` entry."""
    now = datetime.now(UTC)
    ca = generate_ca(common_name="extender-e2e-ca", now=now, days=1, key_type="ecdsa")
    serving = issue_serving_certificate(
        ca=ca, names=["127.0.0.1", "localhost"], now=now, days=1, key_type="ecdsa"
    )
    (directory / "cert.pem").write_bytes(serving.cert_pem)
    (directory / "key.pem").write_bytes(serving.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    app = web.Application()
    extender.mount(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    return {
        "urlPrefix": f"https://127.0.0.1:{port}/scheduler",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": 1,
        "nodeCacheCapable": True,
        "ignorable": True,
        "enableHTTPS": True,
        "httpTimeout": "5s",
        "tlsConfig": {"caData": base64.b64encode(ca.cert_pem).decode()},
    }


@asynccontextmanager
async def simulated_cluster(
    policy: DeschedulerPolicy,
    tmp_path: Path,
    *,
    extender: bool = True,
    dry_run: bool = False,
    memory: timedelta = timedelta(minutes=10),
) -> AsyncIterator[Harness]:
    clock = VirtualClock(START)
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(
            ApiServer(clock=clock, bookmark_interval=3600.0, seed=11)
        )
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        client = await connect(
            kubeconfig=kubeconfig,
            clock=SimulationClientClock(clock),
            registry=CollectorRegistry(),
            rng=random.Random(3),
        )
        stack.push_async_callback(client.close)
        informers = InformerSet(client=client, rng=random.Random(4))
        remembered = EvictionMemory(duration=memory)
        cache = ClusterCache(policy=policy, now=clock.now)
        readiness = feed(cache, informers)
        events = EventRecorder(client=client, component="descheduler")
        stack.push_async_callback(events.close)
        loop = DeschedulerLoop(
            client=client,
            informers=informers,
            settings=DeschedulerSettings(policy=policy, dry_run=dry_run),
            policy=policy,
            metrics=DeschedulerMetrics(CollectorRegistry()),
            events=events,
            memory=remembered,
        )
        stack.push_async_callback(loop.close)
        informers.start()
        stack.push_async_callback(informers.stop)
        assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
        metrics = ExtenderMetrics(CollectorRegistry())
        served = SchedulerExtender(
            cache=cache,
            rules=PlacementRules.from_policy(policy),
            veto=remembered,
            settings=ExtenderSettings(),
            clock=clock,
            metrics=metrics,
            readiness=readiness,
        )
        entries: Sequence[dict[str, Any]] = ()
        if extender:
            entries = [await _https_extender(stack, served, tmp_path)]
        scheduler = Scheduler(api, extenders=[ExtenderConfig.from_dict(e) for e in entries])
        stack.push_async_callback(scheduler.close)
        controllers = WorkloadControllers(api=api)
        stack.callback(controllers.close)
        yield Harness(
            clock=clock,
            api=api,
            loop=loop,
            events=events,
            informers=informers,
            memory=remembered,
            cache=cache,
            scheduler=scheduler,
            controllers=controllers,
            kubelet=Kubelet(api, usage=UsageBook(seed=11), start=START),
            disruption=DisruptionController(api),
            extender_metrics=metrics,
        )
