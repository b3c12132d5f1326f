"""The cluster autoscaler's CPU-bound steps compute off the serving event loop (issue 27 item 11).

One MachineDeployment ``small`` (2-cpu nodes, 1 replica) and a Deployment of 6 × 500m: one node
holds 4, the scheduler marks 2 Unschedulable; upstream's loop scales ``small`` 1 → 2 (a 2-cpu
node holds both: 2 × 500m ≤ 2 cpu) with one ``TriggeredScaleUp`` per pod helped.

Test hooks wrap the steps that now run on the loop's worker thread — the snapshot (the node
pieces' ``snapshot``, :mod:`~.core.snapshot_cache`), the scale-up decision
(``decide_scale_up``), the scale-down planner — recording the thread; a hook that must hold a
step waits on a ``threading.Event`` the test releases only after checking what the loop did
meanwhile. On the event loop's own thread a hook fails at once (waiting there would hang the
loop that must release it): that is the code before the change, where every step ran on the
loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kubescale.controllers.autoscaler.core import loop_scale_up
from kubescale.controllers.autoscaler.core.snapshot_cache import PodListing
from kubescale.controllers.autoscaler.scaleup.scale_up import (
    ScaleUpDecision,
    ScaleUpInputs,
    decide_scale_up,
)
from kubescale.kube.resources import DEPLOYMENTS, MACHINE_DEPLOYMENTS
from kubescale.runtime.https_server import make_https_app
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

from .sim_harness import SimCluster, app_deployment, sim_cluster
from .test_autoscaler_e2e import SETTINGS, SMALL

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "during-the-decision",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": "CREATE",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "x"}]},
        },
    },
}


@dataclass
class Hooks:
    """Threads of the offloaded steps; ``hold`` names the step that waits for ``release``."""

    loop_thread: int
    hold: str
    loop: asyncio.AbstractEventLoop
    threads: dict[str, list[int]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    pods_seen: list[int] = field(default_factory=list)

    def arrive(self, step: str) -> None:
        self.threads.setdefault(step, []).append(threading.get_ident())
        if threading.get_ident() == self.loop_thread:
            raise AssertionError(f"{step} runs on the event loop's thread")
        if step == self.hold:
            self.loop.call_soon_threadsafe(self.entered.set)
            self.release.wait()


def install(monkeypatch: pytest.MonkeyPatch, cluster: SimCluster, hold: str) -> Hooks:
    hooks = Hooks(loop_thread=threading.get_ident(), hold=hold, loop=asyncio.get_running_loop())

    pieces = cluster.loop.node_pieces
    snapshot: Callable[..., ClusterSnapshot] = pieces.snapshot

    def snapshot_hook(**kwargs: Any) -> ClusterSnapshot:
        listing: PodListing = kwargs["listing"]
        hooks.arrive("snapshot")
        hooks.pods_seen.append(len(listing.facts))
        return snapshot(**kwargs)

    def decision_hook(inputs: ScaleUpInputs) -> ScaleUpDecision:
        hooks.arrive("scale-up")
        return decide_scale_up(inputs)

    planner = cluster.loop.scale_down.planner
    update: Callable[..., Any] = planner.update

    def planner_hook(**kwargs: Any) -> Any:
        hooks.arrive("scale-down")
        return update(**kwargs)

    monkeypatch.setattr(pieces, "snapshot", snapshot_hook)
    monkeypatch.setattr(loop_scale_up, "decide_scale_up", decision_hook)
    monkeypatch.setattr(planner, "update", planner_hook)
    return hooks


def replicas(cluster: SimCluster) -> int:
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, "small", "default")
    assert md is not None
    return int(md["spec"]["replicas"])


async def actors(cluster: SimCluster) -> None:
    for actor in cluster.actors:
        await actor.step(cluster.now)
    await cluster.settle()


async def pending_pods(cluster: SimCluster) -> None:
    """Up to the iteration that scales up (t = 10 s): a first step creates the pods (4 run on
    the node, 2 are marked Unschedulable) and the loop's first iteration (no scale-up: every
    pending pod is new), then the actors once more."""
    await cluster.step()
    await actors(cluster)


async def started(cluster: SimCluster, hooks: Hooks) -> asyncio.Task[None]:
    iteration = asyncio.create_task(cluster.loop.run_once(cluster.now))
    entered = asyncio.create_task(hooks.entered.wait())
    await asyncio.wait({iteration, entered}, return_when=asyncio.FIRST_COMPLETED)
    if iteration.done():
        entered.cancel()
        iteration.result()  # a hook's error: the step ran on the loop's thread
    return iteration


async def test_steps_compute_on_a_worker_while_the_webhook_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=SETTINGS,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await pending_pods(cluster)
        webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
        app = make_https_app()
        webhook.mount(app)
        hooks = install(monkeypatch, cluster, hold="scale-up")
        try:
            async with TestClient(TestServer(app)) as http:
                iteration = await started(cluster, hooks)
                # the scale-up decision is computing (held in its hook); the loop serves
                response = await http.post(
                    "/", json=REVIEW, headers={"Content-Type": "application/json"}
                )
                answer = await response.json()
                assert response.status == 200
                assert answer["response"]["uid"] == "during-the-decision"
                assert not iteration.done()
                assert replicas(cluster) == 1  # nothing written before the decision
                hooks.release.set()
                await iteration
        finally:
            hooks.release.set()
            cluster.loop.off_loop.close()
        await cluster.events.flush()
        # every offloaded step ran on the loop's one worker thread
        assert set(hooks.threads) == {"snapshot", "scale-up", "scale-down"}
        workers = {t for threads in hooks.threads.values() for t in threads}
        assert len(workers) == 1
        assert hooks.loop_thread not in workers
        # and the decision's writes were made on the loop: small 1 → 2, one event per pod
        assert replicas(cluster) == 2
        assert len(cluster.events_with("TriggeredScaleUp")) == 2


async def test_cancelling_the_loop_while_the_decision_computes_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=SETTINGS,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await pending_pods(cluster)
        hooks = install(monkeypatch, cluster, hold="scale-up")
        try:
            iteration = await started(cluster, hooks)
            iteration.cancel()  # the Lease was lost, or SIGTERM's grace ran out
            for _ in range(10):
                await asyncio.sleep(0)
            assert not iteration.done()  # the cancellation waits for the decision ...
            hooks.release.set()  # ... which goes on to decide a scale-up nobody makes
            with pytest.raises(asyncio.CancelledError):
                await iteration
            assert not cluster.loop.off_loop.computing
            for _ in range(20):
                await asyncio.sleep(0)
            await cluster.events.flush()
            assert replicas(cluster) == 1
            assert cluster.events_with("TriggeredScaleUp") == []
            assert "scale-down" not in hooks.threads  # the iteration went no further
        finally:
            hooks.release.set()
            cluster.loop.off_loop.close()


async def test_the_snapshot_is_not_affected_by_pods_arriving_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=SETTINGS,
        objects=[app_deployment("burst", replicas=6, cpu="500m")],
    ) as cluster:
        await pending_pods(cluster)
        hooks = install(monkeypatch, cluster, hold="snapshot")
        try:
            iteration = await started(cluster, hooks)
            # While the snapshot is built: 4 more pods of 500m, marked Unschedulable by the
            # scheduler, reach the autoscaler's informer. Were they decided on, 6 pending
            # pods would need 2 new nodes (small 1 → 3).
            current = cluster.api.store.peek(DEPLOYMENTS, "burst", "default")
            assert current is not None
            cluster.api.store.update({**current, "spec": {**current["spec"], "replicas": 10}})
            await actors(cluster)
            assert len(cluster.loop.pods.lister.list()) == 10
            hooks.release.set()
            await iteration
        finally:
            hooks.release.set()
            cluster.loop.off_loop.close()
        await cluster.events.flush()
        assert hooks.pods_seen == [6]
        # decided on its snapshot: 2 pending pods, one new node (the other 4 are the next
        # iteration's)
        assert replicas(cluster) == 2
        assert len(cluster.events_with("TriggeredScaleUp")) == 2
