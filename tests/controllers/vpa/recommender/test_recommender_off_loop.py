"""The recommender's model steps compute off the serving event loop (issue 27 item 11).

``test_recommender_loop``'s worked example (one pod of ``web`` using 1 core and 1e9 bytes: target
1168m / 1168723596). Hooks on the model (:class:`ClusterState`) record the thread each heavy
step runs on -- every pod fed (``LoadPods``), the samples (``LoadMetrics``) and the
recommendation pass (``UpdateVPAs``) -- and the recommendation pass waits on a
``threading.Event`` the test releases only after the webhook has answered meanwhile. On the
event loop's own thread the hook fails at once (waiting there would hang the loop that must
release it): that is the code before the change, where the steps ran on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.runtime.https_server import make_https_app
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

from .test_recommender_loop import Cluster, cluster, recommendation, web_with_one_pod

__all__ = ["cluster"]  # the fixture, re-exported for pytest

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "during-the-recommendation",
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


class ModelHook:
    """Wraps the model's heavy steps: each records its thread; the recommendation pass then
    waits for :attr:`release`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread = threading.get_ident()
        self.threads: dict[str, list[int]] = {}
        self.release = threading.Event()
        self.entered = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        for step in ("add_or_update_pod", "add_samples"):
            monkeypatch.setattr(ClusterState, step, self._recorded(step))
        original = ClusterState.recommendations

        def recommendations(state: ClusterState, *args: Any, **kwargs: Any) -> Any:
            self._record("recommendations")
            self._loop.call_soon_threadsafe(self.entered.set)
            self.release.wait()
            return original(state, *args, **kwargs)

        monkeypatch.setattr(ClusterState, "recommendations", recommendations)

    def _record(self, step: str) -> None:
        self.threads.setdefault(step, []).append(threading.get_ident())
        if threading.get_ident() == self.loop_thread:
            raise AssertionError(f"the model's {step} runs on the event loop's thread")

    def _recorded(self, step: str) -> Any:
        original = getattr(ClusterState, step)

        def wrapped(state: ClusterState, *args: Any, **kwargs: Any) -> Any:
            self._record(step)
            return original(state, *args, **kwargs)

        return wrapped


async def test_model_steps_compute_on_a_worker_while_the_webhook_answers(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    app = make_https_app()
    webhook.mount(app)
    hook = ModelHook(monkeypatch)
    try:
        async with TestClient(TestServer(app)) as http:
            iteration = asyncio.create_task(cluster.run(loop))
            entered = asyncio.create_task(hook.entered.wait())
            await asyncio.wait({iteration, entered}, return_when=asyncio.FIRST_COMPLETED)
            if iteration.done():
                iteration.result()  # the hook's error: a step ran on the loop's thread
            # the recommendation pass is computing (blocked in the hook); the loop still serves
            response = await http.post(
                "/", json=REVIEW, headers={"Content-Type": "application/json"}
            )
            answer = await response.json()
            assert response.status == 200
            assert answer["response"]["uid"] == "during-the-recommendation"
            assert not iteration.done()
            assert recommendation(cluster.get_vpa("web")) == []  # nothing written yet
            hook.release.set()
            await iteration
        # each heavy step ran, on the worker (one thread, not the loop's)
        assert set(hook.threads) == {"add_or_update_pod", "add_samples", "recommendations"}
        workers = {thread for threads in hook.threads.values() for thread in threads}
        assert len(workers) == 1
        assert hook.loop_thread not in workers
        # and the status written on the loop afterwards is the worked example's
        # (P90 of one sample: 1.0 core -> 1.01628 x 1.15 = 1168m; 1e9 B -> 1168723596)
        targets = [entry["target"] for entry in recommendation(cluster.get_vpa("web"))]
        assert targets == [{"cpu": "1168m", "memory": "1168723596"}]
    finally:
        hook.release.set()
        loop.close()


async def test_pods_arriving_while_the_model_computes_wait_for_the_next_iteration(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    hook = ModelHook(monkeypatch)
    try:
        iteration = asyncio.create_task(cluster.run(loop))
        entered = asyncio.create_task(hook.entered.wait())
        await asyncio.wait({iteration, entered}, return_when=asyncio.FIRST_COMPLETED)
        if iteration.done():
            iteration.result()
        # a second pod reaches the informer while the recommendation pass computes: the
        # model fed this iteration is the snapshot taken before (one pod)
        cluster.pod("web-2", labels={"app": "web"}, containers={"app": {"cpu": "500m"}})
        target = str(cluster.api.store.resource_version)
        for _ in range(100):
            cluster.api.bookmark_watches()
            if await loop.cache.wait_for_resource_version(target, within=0.1):
                break
        assert loop.feeder.pods.lister.get("web-2", "shop") is not None
        assert sorted(loop.feeder.state.pod_keys()) == [("shop", "web-1")]
        hook.release.set()
        await iteration
        await cluster.run(loop)  # the next iteration feeds it
        assert sorted(loop.feeder.state.pod_keys()) == [("shop", "web-1"), ("shop", "web-2")]
    finally:
        hook.release.set()
        loop.close()
