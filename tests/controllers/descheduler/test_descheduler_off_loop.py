"""The descheduling cycle computes off the serving event loop (issue 27 item 11).

``test_descheduler_loop``'s cluster (n1 tainted ``NoSchedule``: web-0 and web-1 evicted, api-0
refused by its PDB, the bare pod protected). A test hook wraps the cycle: its first step records
the thread it runs on and waits on a ``threading.Event`` the test releases only after it has
checked what the loop did meanwhile. On the event loop's own thread the hook fails at once
(waiting there would hang the loop that must release it): that is today's code before the
change, where the cycle ran on the loop.
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

from kubescale.controllers.descheduler import descheduler_loop
from kubescale.controllers.descheduler.descheduling_cycle import CycleReport, descheduling_cycle
from kubescale.controllers.descheduler.framework.eviction import EvictionRequest
from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind, DisruptionLedger
from kubescale.kube.resources import CORE_EVENTS
from kubescale.runtime.https_server import make_https_app
from kubescale.scheduling.cycle_view import CycleView
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

from . import test_descheduler_loop as base
from .builders import cycle_pod

setup = base.setup  # the API server and client fixture
Setup = base.Setup

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "during-the-cycle",
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


class CycleHook:
    """Wraps ``descheduling_cycle``: the first step records its thread and the view's pods,
    then waits for :attr:`release`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop_thread = threading.get_ident()
        self.threads: list[int] = []
        self.release = threading.Event()
        self.entered = asyncio.Event()
        self.views: list[CycleView] = []
        self.pods_seen: list[list[str]] = []
        self._loop = asyncio.get_running_loop()
        original = descheduling_cycle

        def hooked(**kwargs: Any) -> Generator[EvictionRequest, bool, CycleReport]:
            def steps() -> Generator[EvictionRequest, bool, CycleReport]:
                self.threads.append(threading.get_ident())
                if threading.get_ident() == self.loop_thread:
                    raise AssertionError("the descheduling cycle runs on the event loop's thread")
                view: CycleView = kwargs["view"]
                self.views.append(view)
                self._loop.call_soon_threadsafe(self.entered.set)
                self.release.wait()
                self.pods_seen.append(sorted(p["metadata"]["name"] for p in view.pods))
                return (yield from original(**kwargs))

            return steps()

        monkeypatch.setattr(descheduler_loop, "descheduling_cycle", hooked)


async def _settle(setup: Setup, made: base.Loop) -> None:
    target = str(setup.api.store.resource_version)
    for _ in range(100):
        setup.api.bookmark_watches()
        if await made.loop.wait_for_resource_version(target, within=0.1):
            return
    raise AssertionError(f"the informers did not reach resourceVersion {target}")


async def test_cycle_computes_on_a_worker_while_the_webhook_answers(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    base.cluster(setup.api)
    made = await base.make_loop(setup, base.taints_policy())
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    app = make_https_app()
    webhook.mount(app)
    hook = CycleHook(monkeypatch)
    try:
        async with TestClient(TestServer(app)) as http:
            await _settle(setup, made)
            cycle = asyncio.create_task(made.loop.run_once(setup.clock.now()))
            entered = asyncio.create_task(hook.entered.wait())
            await asyncio.wait({cycle, entered}, return_when=asyncio.FIRST_COMPLETED)
            if cycle.done():
                cycle.result()  # the hook's error: the cycle ran on the loop's thread
            # the decision is computing (blocked in the hook); the event loop still serves
            response = await http.post(
                "/", json=REVIEW, headers={"Content-Type": "application/json"}
            )
            answer = await response.json()
            assert response.status == 200
            assert answer["response"]["uid"] == "during-the-cycle"
            assert not cycle.done()
            assert base.terminating(setup.api) == []  # nothing written before the decision
            hook.release.set()
            await cycle
        assert hook.threads
        assert hook.threads[0] != hook.loop_thread
        # the writes were made on the loop once the decision asked for them
        assert base.terminating(setup.api) == ["web-0", "web-1"]
        await made.events.flush()
        reasons = sorted(
            (e["involvedObject"]["name"], e["reason"])
            for e in setup.api.store.snapshots(CORE_EVENTS)
        )
        assert reasons == [
            ("web-0", "RemovePodsViolatingNodeTaints"),
            ("web-1", "RemovePodsViolatingNodeTaints"),
        ]
    finally:
        hook.release.set()
        await made.loop.close()
        await made.events.close()
        await made.informers.stop()


async def test_cancelling_the_loop_while_the_cycle_computes_writes_nothing(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    base.cluster(setup.api)
    made = await base.make_loop(setup, base.taints_policy())
    hook = CycleHook(monkeypatch)
    try:
        await _settle(setup, made)
        cycle = asyncio.create_task(made.loop.run_once(setup.clock.now()))
        entered = asyncio.create_task(hook.entered.wait())
        await asyncio.wait({cycle, entered}, return_when=asyncio.FIRST_COMPLETED)
        if cycle.done():
            cycle.result()  # the hook's error: the cycle ran on the loop's thread
        cycle.cancel()  # the Lease was lost, or SIGTERM's grace ran out
        for _ in range(10):
            await asyncio.sleep(0)
        assert not cycle.done()  # the cancellation waits for the step computing ...
        hook.release.set()  # ... which goes on to its first eviction request ...
        with pytest.raises(asyncio.CancelledError):
            await cycle
        await made.loop.off_loop.idle()
        for _ in range(20):
            await asyncio.sleep(0)
        await made.events.flush()
        # ... which nobody makes: no eviction, no event, nothing remembered
        assert base.terminating(setup.api) == []
        assert setup.api.store.snapshots(CORE_EVENTS) == []
        assert len(made.memory) == 0
        assert len(made.loop.disruptions) == 0
    finally:
        hook.release.set()
        await made.loop.close()
        await made.events.close()
        await made.informers.stop()


async def test_the_cycle_decides_on_its_snapshot_not_on_events_arriving_meanwhile(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    base.cluster(setup.api)
    # one brain: the cycle also reads the disruption ledger, which the loop writes meanwhile
    ledger = DisruptionLedger()
    made = await base.make_loop(setup, base.taints_policy(), disruptions=ledger, one_brain=True)
    hook = CycleHook(monkeypatch)
    try:
        await _settle(setup, made)
        cycle = asyncio.create_task(made.loop.run_once(setup.clock.now()))
        entered = asyncio.create_task(hook.entered.wait())
        await asyncio.wait({cycle, entered}, return_when=asyncio.FIRST_COMPLETED)
        if cycle.done():
            cycle.result()  # the hook's error: the cycle ran on the loop's thread
        # While the cycle computes: a new pod on the tainted node reaches the informer, and
        # another system records an eviction on the ledger (the cycle reads a detached copy,
        # refreshed after each of its evictions; no limit is set, so it changes no answer).
        base.create_pod(setup.api, cycle_pod("web-2", "n1", cpu="100m", labels={"app": "web"}))
        await _settle(setup, made)
        assert made.loop.pods.lister.get("web-2", "default") is not None
        ledger.record(
            Disruption(
                uid="other-system",
                namespace="default",
                name="elsewhere",
                actor="vpa-updater",
                kind=DisruptionKind.EVICTION,
                recorded_at=setup.clock.now(),
                confirmed=True,
            )
        )
        hook.release.set()
        await cycle
        # the cycle saw the pods of its snapshot (web-2 arrived after it started) ...
        assert hook.pods_seen == [["api-0", "bare", "web-0", "web-1"]]
        # ... and evicted from them only; web-2 is the next cycle's
        assert base.terminating(setup.api) == ["web-0", "web-1"]
        assert made.loop.last_report is not None
        assert sorted(r.pod for r in made.loop.last_report.evicted) == [
            "default/web-0",
            "default/web-1",
        ]
    finally:
        hook.release.set()
        await made.loop.close()
        await made.events.close()
        await made.informers.stop()


def test_detached_ledger_is_a_copy() -> None:
    ledger = DisruptionLedger()
    now = base.START
    first = Disruption(
        uid="a",
        namespace="default",
        name="a",
        actor="descheduler",
        kind=DisruptionKind.EVICTION,
        recorded_at=now,
        confirmed=True,
    )
    ledger.record(first)
    copy = ledger.detached()
    ledger.record(
        Disruption(
            uid="b",
            namespace="default",
            name="b",
            actor="descheduler",
            kind=DisruptionKind.EVICTION,
            recorded_at=now,
            confirmed=True,
        )
    )
    assert [e.uid for e in copy.in_flight(now=now)] == ["a"]
    assert [e.uid for e in ledger.in_flight(now=now)] == ["a", "b"]
    # reading the copy expires its entries, never the original's
    later = now + timedelta(hours=1)
    assert copy.in_flight(now=later) == []
    assert len(ledger) == 2
