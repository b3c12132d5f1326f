"""The updater's decision computes off the serving event loop, and pods meet only the VPAs
indexed under their controller (issue 27 item 11).

``test_updater_loop``'s cluster: ``web`` (4 under-provisioned pods, a ``Recreate`` VPA whose
lower bound is above their requests; budget ``int(4 x 0.5) = 2`` evictions a loop). A hook
wraps the decision: its first step records the thread it runs on and waits on a
``threading.Event`` the test releases only after the webhook has answered meanwhile. On the
event loop's own thread the hook fails at once (waiting there would hang the loop that must
release it): that is the code before the change, where the decision ran on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.api.vpa_matching import choose_vpa
from kubescale.controllers.vpa.updater import pod_matching, updater_loop
from kubescale.controllers.vpa.updater.updater_decision import decide
from kubescale.objects.pod import Pod
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.runtime.https_server import make_https_app
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster

from .test_updater_loop import (
    RECOMMENDATION,
    Updater,
    cluster,
    live_pods,
    run,
    settle,
    start_updater,
    status_lease,
    updaters,
    web,
)

__all__ = ["cluster", "updaters"]  # the fixtures, re-exported for pytest

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


class DecisionHook:
    """Wraps ``decide``: its first step records its thread, then waits for :attr:`release`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread = threading.get_ident()
        self.threads: list[int] = []
        self.release = threading.Event()
        self.entered = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        original = decide

        def hooked(*args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
            def steps() -> Generator[Any, Any, None]:
                self.threads.append(threading.get_ident())
                if threading.get_ident() == self.loop_thread:
                    raise AssertionError("the updater's decision runs on the event loop's thread")
                self._loop.call_soon_threadsafe(self.entered.set)
                self.release.wait()
                yield from original(*args, **kwargs)

            return steps()

        monkeypatch.setattr(updater_loop, "decide", hooked)


async def test_the_decision_computes_on_a_worker_while_the_webhook_answers(
    cluster: Cluster, updaters: list[Updater], monkeypatch: pytest.MonkeyPatch
) -> None:
    web(cluster)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    app = make_https_app()
    webhook.mount(app)
    hook = DecisionHook(monkeypatch)
    try:
        async with TestClient(TestServer(app)) as http:
            await settle(cluster, updater)
            iteration = asyncio.create_task(updater.loop.run_once(cluster.now))
            entered = asyncio.create_task(hook.entered.wait())
            await asyncio.wait({iteration, entered}, return_when=asyncio.FIRST_COMPLETED)
            if iteration.done():
                iteration.result()  # the hook's error: the decision ran on the loop's thread
            response = await http.post(
                "/", json=REVIEW, headers={"Content-Type": "application/json"}
            )
            answer = await response.json()
            assert response.status == 200
            assert answer["response"]["uid"] == "during-the-decision"
            assert not iteration.done()
            assert len(live_pods(cluster)) == 4  # nothing evicted before the decision
            hook.release.set()
            await iteration
            await updater.events.flush()
        assert hook.threads
        assert hook.loop_thread not in hook.threads
        # the evictions it asked for were made on the loop: int(4 x 0.5) = 2
        assert len(updater.loop.evicted) == 2
        assert len(live_pods(cluster)) == 2
    finally:
        hook.release.set()
        updater.loop.close()


async def test_a_pod_meets_only_the_vpas_indexed_under_its_controller(
    cluster: Cluster, updaters: list[Updater], monkeypatch: pytest.MonkeyPatch
) -> None:
    # web's 4 pods, and three VPAs on other targets: upstream's lister is indexed by target
    # (TargetRefIndexFunc), so each pod's candidates are the one VPA on its ReplicaSet
    web(cluster)
    for other in ("api", "db", "cache"):
        vpa = cluster.vpa(
            other,
            target=("apps/v1", "Deployment", other),
            spec={"updatePolicy": {"updateMode": "Recreate"}},
        )
        cluster.api.store.update_status({**vpa, "status": {"recommendation": RECOMMENDATION}})
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    updater = await start_updater(cluster, updaters)
    candidates: list[list[str]] = []
    original = choose_vpa

    def counted(pod: Pod, **kwargs: Any) -> VerticalPodAutoscaler | None:
        candidates.append(sorted(v["metadata"]["name"] for v in kwargs["candidate_vpas"]))
        return original(pod, **kwargs)

    monkeypatch.setattr(pod_matching, "choose_vpa", counted)
    try:
        await run(cluster, updater)
        # 4 pods, each offered the one VPA targeting its top-most controller (Deployment web);
        # before, every pod was offered all 4 VPAs (pods x VPAs targetRef reads)
        assert candidates == [["web"]] * 4
        assert len(updater.loop.evicted) == 2  # the same decision: int(4 x 0.5) = 2
    finally:
        updater.loop.close()
