"""The HPA loop under faults (issue 27, HPA items 7-9): the real client against the in-process
API server, whose fault injector also covers the metrics APIs (``<resource>.<group>``).

Healthy HPA ``web``: two pods requesting 1000m, using 900m, target 50% → 90/50 = 1.8 →
ceil(1.8 × 2) = 4, limit max(2 × 2, 4) = 4 → scaled to 4 in one pass (reference §1.6, §2.3).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.controllers.hpa.hpa_decision import HpaDecision
from kubescale.controllers.hpa.hpa_loop import (
    DEADLINE_EXCEEDED,
    DeadlineExceeded,
    _Deadline,
)
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

from .hpa_cluster import NAMESPACE, Hpas

__all__ = ["cluster"]

WEB = {"app": "web"}
WORKER = {"app": "worker"}
QUICK_DOWN = {"scaleDown": {"stabilizationWindowSeconds": 0}}
"""No downscale window: the default policy (Percent 100 / 15 s) lets 4 → 1 in one pass."""


@pytest.fixture
async def hpas(cluster: Cluster) -> AsyncIterator[Hpas]:
    built = Hpas(cluster)
    yield built
    await built.close()


def web(hpas: Hpas) -> None:
    hpas.deployment("web", replicas=2)
    for i in range(2):
        hpas.pod(f"web-{i}", labels=WEB, usage="900m")
    hpas.hpa("web", target="web")


def worker(hpas: Hpas, metrics: list[dict[str, Any]], *, replicas: int = 4) -> None:
    hpas.deployment("worker", replicas=replicas, labels=WORKER)
    for i in range(replicas):
        hpas.pod(f"worker-{i}", labels=WORKER, usage="100m")
    hpas.hpa("worker", target="worker", min_replicas=1, metrics=metrics, behavior=QUICK_DOWN)


def external(name: str, target: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "External", "external": {"metric": {"name": name}, "target": target}}]


def pods_metric(name: str, average: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": name},
                "target": {"type": "AverageValue", "averageValue": average},
            },
        }
    ]


# --- item 8: unparseable external values fail the metric, never sum to 0 -------------------------


@pytest.mark.parametrize(
    "values",
    [
        ("NaN",),
        ("garbage",),
        # one good series and one bad: upstream's decode fails the whole list, not just the item
        ("5", "NaN"),
    ],
)
async def test_unparseable_external_value_fails_the_metric_and_holds(
    hpas: Hpas, values: tuple[str, ...]
) -> None:
    for i, value in enumerate(values):
        hpas.cluster.api.metrics.set_external_metric(
            namespace=NAMESPACE, metric="queue", value=value, metric_labels={"series": str(i)}
        )
    # target Value 100: had the bad values been dropped the sum would be 0 (or 5) → ratio ≤ 0.05
    # → ceil(0.05 × 4 ready) = 1 → min 1, and no window holds it: 4 → 1
    worker(hpas, external("queue", {"type": "Value", "value": "100"}))
    loop = await hpas.loop()
    await hpas.run(loop)
    assert hpas.replicas("worker") == 4
    status, reason, message = hpas.conditions("worker")["ScalingActive"]
    assert (status, reason) == ("False", "FailedGetExternalMetric")
    assert message.startswith(
        "the HPA was unable to compute the replica count: unable to get external metric "
        f"{NAMESPACE}/queue/<nil>: unable to fetch metrics from external metrics API: "
    )
    assert "quantities must match the regular expression" in message
    reasons = [reason for _, reason, _ in await hpas.events("worker")]
    assert reasons == ["FailedGetExternalMetric", "FailedComputeMetricsReplicas"]


# --- item 9: one HPA's bad answer is its own failure --------------------------------------------


@dataclass(frozen=True)
class Broken:
    resource: str | None
    """The fault rule's resource (None: no fault)."""
    body: str | None
    metrics: list[dict[str, Any]]
    reason: str
    """The expected condition and event reason."""
    text: str
    """Expected in the condition's and the event's message."""
    unvalidated: bool = False
    """The HPA is one kube-apiserver refuses today: stored past its validation (an object
    written before the rule existed, or straight to etcd)."""


BROKEN_ANSWERS = [
    pytest.param(
        Broken(
            "queue.external.metrics.k8s.io",
            "<html>502 Bad Gateway</html>",
            external("queue", {"type": "Value", "value": "100"}),
            "FailedGetExternalMetric",
            "unable to fetch metrics from external metrics API: the server answered a body that "
            "is not JSON",
        ),
        id="external-non-json",
    ),
    pytest.param(
        Broken(
            "queue.external.metrics.k8s.io",
            '{"kind": "ExternalMetricValueList", "items": "oops"}',
            external("queue", {"type": "Value", "value": "100"}),
            "FailedGetExternalMetric",
            "unable to fetch metrics from external metrics API: json: cannot unmarshal string "
            "into Go struct field ExternalMetricValueList.items",
        ),
        id="external-items-not-a-list",
    ),
    pytest.param(
        Broken(
            "queue.external.metrics.k8s.io",
            '{"items": [1, 2]}',
            external("queue", {"type": "Value", "value": "100"}),
            "FailedGetExternalMetric",
            "unable to fetch metrics from external metrics API: json: cannot unmarshal number "
            "into Go struct field ExternalMetricValueList.items of type object",
        ),
        id="external-items-not-objects",
    ),
    pytest.param(
        Broken(
            "queue.external.metrics.k8s.io",
            '{"items": null}',  # Go decodes null as an empty list
            external("queue", {"type": "Value", "value": "100"}),
            "FailedGetExternalMetric",
            "no metrics returned from external metrics API",
        ),
        id="external-items-null",
    ),
    pytest.param(
        Broken(
            "queue.external.metrics.k8s.io",
            '{"items": [{"metricName": "queue", "value": "1e400"}]}',
            external("queue", {"type": "Value", "value": "100"}),
            "FailedGetExternalMetric",
            "unable to fetch metrics from external metrics API: quantity '1e400' does not fit in "
            "int64 milli-units",
        ),
        id="external-value-1e400",
    ),
    pytest.param(
        Broken(
            "pods.custom.metrics.k8s.io/qps",
            '["not", "an", "object"]',
            pods_metric("qps", "10"),
            "FailedGetPodsMetric",
            "unable to fetch metrics from custom metrics API: json: cannot unmarshal array into "
            "MetricValueList",
        ),
        id="pods-array-body",
    ),
    pytest.param(
        Broken(
            None,
            None,
            # a target of 0 (kube-apiserver refuses it, older objects or another writer may not):
            # 4 / 0 has no replica count
            external("queue", {"type": "Value", "value": "0"}),
            "FailedGetExternalMetric",
            "invalid metric value or target: ",
            unvalidated=True,
        ),
        id="external-target-0",
    ),
]


@pytest.mark.parametrize("case", BROKEN_ANSWERS)
async def test_a_bad_answer_fails_only_its_hpa(hpas: Hpas, case: Broken) -> None:
    reason, text = case.reason, case.text
    web(hpas)
    hpas.cluster.api.metrics.set_external_metric(namespace=NAMESPACE, metric="queue", value="4")
    for i in range(4):
        hpas.cluster.api.metrics.set_pod_metric(
            namespace=NAMESPACE, pod=f"worker-{i}", metric="qps", value="1", pod_labels=WORKER
        )
    with hpas.past_validation() if case.unvalidated else contextlib.nullcontext():
        worker(hpas, case.metrics)
    if case.resource is not None:
        hpas.cluster.api.faults.add(resource=case.resource, status=0, body=case.body, count=None)
    loop = await hpas.loop()
    await hpas.run(loop)  # the pass completes: the bad answer did not fail it

    assert hpas.replicas("web") == 4  # the healthy HPA reacted in the same pass
    assert hpas.replicas("worker") == 4  # the broken one did not scale on it
    status, got_reason, message = hpas.conditions("worker")["ScalingActive"]
    assert (status, got_reason) == ("False", reason)
    assert text in message
    events = await hpas.events("worker")
    assert [(kind, why) for kind, why, _ in events] == [
        ("Warning", reason),
        ("Warning", "FailedComputeMetricsReplicas"),
    ]
    assert text in events[0][2]


async def test_an_unexpected_error_is_its_hpas_own(
    hpas: Hpas, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in one reconcile (here a decision that raises for ``worker`` only) gives that HPA a
    condition and an event; the pass goes on for the others."""
    web(hpas)
    worker(hpas, external("queue", {"type": "Value", "value": "100"}))
    hpas.cluster.api.metrics.set_external_metric(namespace=NAMESPACE, metric="queue", value="4")
    loop = await hpas.loop()
    compute = HpaDecision._compute

    def broken(self: HpaDecision, *args: Any, **kwargs: Any) -> Any:
        if self.snapshot.spec.name == "worker":
            raise RuntimeError("boom")
        return compute(self, *args, **kwargs)

    monkeypatch.setattr(HpaDecision, "_compute", broken)
    await hpas.run(loop)
    assert hpas.replicas("web") == 4
    assert hpas.replicas("worker") == 4
    assert hpas.conditions("worker")["ScalingActive"] == (
        "False",
        "FailedComputeMetricsReplicas",
        "the HPA was unable to compute the replica count: internal error: RuntimeError: boom",
    )
    assert (await hpas.events("worker"))[-1] == (
        "Warning",
        "FailedComputeMetricsReplicas",
        "internal error: RuntimeError: boom",
    )


# --- item 7: one hung dependency stalls only the HPA that uses it -------------------------------

SYNC = 15.0
"""``--horizontal-pod-autoscaler-sync-period`` default."""
DEADLINE = 30.0
"""``--hpa-reconcile-timeout`` default."""
WEB_KEY = (NAMESPACE, "web")
WORKER_KEY = (NAMESPACE, "worker")


def hung_worker(hpas: Hpas) -> None:
    """``web`` healthy; ``worker``'s external metric API holds every request (never answers)."""
    web(hpas)
    worker(hpas, external("queue", {"type": "Value", "value": "100"}))
    hpas.cluster.api.metrics.set_external_metric(namespace=NAMESPACE, metric="queue", value="4")
    hpas.cluster.api.faults.add(
        resource="queue.external.metrics.k8s.io", status=0, hang=True, count=None
    )


async def test_a_hung_metrics_api_stalls_only_its_hpa(hpas: Hpas) -> None:
    hung_worker(hpas)
    loop = await hpas.loop(clock=hpas.cluster.clock)
    await hpas.settle(loop)
    first = loop.start_pass(hpas.now)
    assert set(first) == {WEB_KEY, WORKER_KEY}
    await first[WEB_KEY]  # web's reconcile ends while worker's read is held; no clock moved
    assert hpas.replicas("web") == 4
    assert not first[WORKER_KEY].done()
    assert loop.in_flight() == {WORKER_KEY}

    # one sync period later web is reconciled again; worker, still in flight, is not restarted
    for i in (2, 3):
        hpas.pod(f"web-{i}", labels=WEB, usage="900m")
    await hpas.cluster.advance(SYNC)
    await hpas.settle(loop)
    second = loop.start_pass(hpas.now)
    assert set(second) == {WEB_KEY}
    await second[WEB_KEY]
    # 4 pods × 900m of 4000m = 90%; 90/50 = 1.8; ceil(1.8 × 4) = 8; limit max(2 × 4, 4) = 8
    assert hpas.replicas("web") == 8
    assert not first[WORKER_KEY].done()

    # worker's own deadline, 30 s after its reconcile started: its read fails, nothing scales
    await hpas.cluster.advance(DEADLINE - SYNC)
    await first[WORKER_KEY]
    assert loop.in_flight() == frozenset()
    assert hpas.replicas("worker") == 4
    assert hpas.conditions("worker")["ScalingActive"] == (
        "False",
        "FailedGetExternalMetric",
        "the HPA was unable to compute the replica count: unable to get external metric "
        f"{NAMESPACE}/queue/<nil>: unable to fetch metrics from external metrics API: "
        "context deadline exceeded",
    )
    reasons = [reason for _, reason, _ in await hpas.events("worker")]
    assert reasons == ["FailedGetExternalMetric", "FailedComputeMetricsReplicas"]


async def test_a_pass_waits_at_most_one_sync_period(hpas: Hpas) -> None:
    """``run_once`` ends one sync period after it started (on the loop's clock) even while a
    reconcile is held; that reconcile goes on."""
    hung_worker(hpas)
    loop = await hpas.loop(clock=hpas.cluster.clock)
    await hpas.settle(loop)
    passing = asyncio.create_task(loop.run_once(hpas.now))
    try:
        await hpas.cluster.advance(SYNC - 1)
        assert not passing.done()  # within its sync period it waits for its reconciles
        await hpas.cluster.advance(1)
        assert passing.done()
        await passing
        assert WORKER_KEY in loop.in_flight()
    finally:
        passing.cancel()


def widget_crd() -> dict[str, Any]:
    """A custom kind with ``/scale``: its Scale is read from the API server, not a cache."""
    scale = {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}, "scale": scale},
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }


async def test_a_hung_scale_stalls_only_its_hpa(hpas: Hpas) -> None:
    web(hpas)
    store = hpas.cluster.api.store
    store.create(widget_crd())
    pool = store.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "pool", "namespace": NAMESPACE},
            "spec": {"replicas": 2},
        }
    )
    store.update_status({**pool, "status": {"replicas": 2, "selector": "app=pool"}})
    hpas.hpa("pool", target="pool", kind="Widget", api_version="example.com/v1")
    hpas.cluster.api.faults.add(
        verb="get", resource="widgets/scale", status=0, hang=True, count=None
    )
    loop = await hpas.loop(clock=hpas.cluster.clock)
    await hpas.settle(loop)
    started = loop.start_pass(hpas.now)
    pool_key = (NAMESPACE, "pool")
    await started[WEB_KEY]
    assert hpas.replicas("web") == 4
    assert not started[pool_key].done()
    await hpas.cluster.advance(DEADLINE)  # pool's own deadline
    await started[pool_key]
    assert hpas.conditions("pool")["AbleToScale"] == (
        "False",
        "FailedGetScale",
        "the HPA controller was unable to get the target's current scale: "
        "context deadline exceeded",
    )
    assert await hpas.events("pool") == [("Warning", "FailedGetScale", "context deadline exceeded")]


# --- the deadline's own rules (no API server needed) --------------------------------------------


async def guarded(clock: VirtualClock, held: asyncio.Event, calls: int = 1) -> None:
    """A reconcile with a 30 s deadline making ``calls`` calls that wait on ``held``."""
    deadline = _Deadline(clock, DEADLINE)
    try:
        for _ in range(calls):
            await deadline.call(held.wait())
    finally:
        deadline.close()


async def test_a_deadline_fails_the_call_in_progress_and_every_later_one() -> None:
    clock = VirtualClock()
    held = asyncio.Event()
    failures: list[str] = []

    async def reconcile() -> None:
        deadline = _Deadline(clock, DEADLINE)
        try:
            for _ in range(2):
                try:
                    await deadline.call(held.wait())
                except DeadlineExceeded as err:
                    failures.append(str(err))
        finally:
            deadline.close()

    task = asyncio.create_task(reconcile())
    await clock.advance(DEADLINE - 1)
    assert not task.done()
    assert failures == []
    await clock.advance(1)
    await task
    assert failures == [DEADLINE_EXCEEDED, DEADLINE_EXCEEDED]
    assert task.cancelling() == 0  # the deadline's cancellation was taken back


async def test_a_deadline_never_swallows_a_cancellation_aimed_at_the_reconcile() -> None:
    # cancelled while its deadline is far: a cancellation
    clock = VirtualClock()
    task = asyncio.create_task(guarded(clock, asyncio.Event()))
    await clock.advance(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # cancelled in the very tick its deadline passes: still a cancellation, not a timeout
    clock = VirtualClock(settle_rounds=0)  # advance() wakes the timer without running it
    task = asyncio.create_task(guarded(clock, asyncio.Event()))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await clock.advance(DEADLINE)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_null_external_value_is_zero_as_upstream_decodes_it(hpas: Hpas) -> None:
    """``"value": null`` is not garbage to Go's decoder: it is the zero Quantity, and upstream
    scales on it. Sum 0 / target 100 = ratio 0 → ceil(0 × 4 ready) = 0 → min 1; no window: 4 → 1.
    """
    worker(hpas, external("queue", {"type": "Value", "value": "100"}))
    hpas.cluster.api.faults.add(
        resource="queue.external.metrics.k8s.io",
        status=0,
        body='{"items": [{"metricName": "queue", "value": null}]}',
        count=None,
    )
    loop = await hpas.loop()
    await hpas.run(loop)
    assert hpas.replicas("worker") == 1
    assert hpas.get_hpa("worker")["status"]["currentMetrics"] == [
        {"type": "External", "external": {"metric": {"name": "queue"}, "current": {"value": "0"}}}
    ]
