"""The disruption ledger: evictions and resizes remembered per pod uid until the pod shows them.

Writes go through the real client to the in-process API server, whose faults fail an eviction
before it happens or commit it and then answer 500/504; the pod informer is a real one.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.coordination.disruption_ledger import (
    Disruption,
    DisruptionKind,
    DisruptionLedger,
    WriteOutcome,
    evict_pod,
    resize_applied,
    resize_pod,
    resize_targets,
    write_outcome,
)
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeTransportError
from kubescale.kube.informer import Informer
from kubescale.kube.resources import POD_DISRUPTION_BUDGETS, PODS
from kubescale.objects.containers import ResourceRequirements
from kubescale.objects.pod import Pod
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock
from tests.builders.meta import stored_as
from tests.kube.objects import PAUSE_POD, TYPED_PAUSE_POD

from .conftest import FAST_INFORMER, new_client
from .informer_checks import eventually

NOW = datetime(2026, 1, 5, tzinfo=UTC)


def _api_error(code: int, *, unanswered: int = 0) -> KubeApiError:
    err = KubeApiError(code=code, reason="", message="")
    err.unanswered_attempts = unanswered
    return err


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        # No answer at all: the request may have been served.
        (KubeTransportError("connection reset"), WriteOutcome.UNKNOWN),
        # 5xx: kube-apiserver may have committed before answering (504 after its deadline).
        (_api_error(500), WriteOutcome.UNKNOWN),
        (_api_error(503), WriteOutcome.UNKNOWN),
        (_api_error(504), WriteOutcome.UNKNOWN),
        # 404: the pod is not there.
        (_api_error(404), WriteOutcome.GONE),
        # Any other 4xx is answered before anything is changed.
        (_api_error(429), WriteOutcome.REFUSED),
        (_api_error(403), WriteOutcome.REFUSED),
        (_api_error(409), WriteOutcome.REFUSED),
        (_api_error(422), WriteOutcome.REFUSED),
        # The answer to a retry sent after an attempt that got no answer or a 5xx: that
        # attempt may have committed (a 429: it spent the budget). Unknown, counted. A 404
        # is still gone (WriteResult.maybe_ours tells it may have been this write).
        (_api_error(404, unanswered=1), WriteOutcome.GONE),
        (_api_error(429, unanswered=1), WriteOutcome.UNKNOWN),
        (_api_error(409, unanswered=2), WriteOutcome.UNKNOWN),
        (_api_error(403, unanswered=1), WriteOutcome.UNKNOWN),
    ],
)
def test_write_outcome_table(error: Exception, outcome: WriteOutcome) -> None:
    assert isinstance(error, KubeApiError | KubeTransportError)
    assert write_outcome(error) is outcome


def _eviction(uid: str, name: str, at: datetime) -> Disruption:
    return Disruption(
        kind=DisruptionKind.EVICTION,
        uid=uid,
        namespace="default",
        name=name,
        recorded_at=at,
        confirmed=False,
    )


def test_pending_until_the_pod_is_going_and_only_for_the_same_uid() -> None:
    ledger = DisruptionLedger()
    ledger.record(_eviction("u1", "web-0", NOW))
    assert ledger.pending(TYPED_PAUSE_POD(name="web-0", uid="u1"), now=NOW) is not None
    # A StatefulSet's pod recreated under the same name is another pod.
    assert ledger.pending(TYPED_PAUSE_POD(name="web-0", uid="u2"), now=NOW) is None
    # Once the pod is being deleted the eviction shows: forgotten.
    going = TYPED_PAUSE_POD(name="web-0", uid="u1", deletion_timestamp="2026-01-05T00:00:00Z")
    assert ledger.pending(going, now=NOW) is None
    assert len(ledger) == 0


def test_entries_expire_after_max_age_and_the_oldest_go_first_when_full() -> None:
    ledger = DisruptionLedger(max_age=timedelta(minutes=5), max_entries=2)
    ledger.record(_eviction("u1", "a", NOW))
    # 4m59s later it is still believed; at 5m it is not (the write did not happen after all).
    assert ledger.pending(
        TYPED_PAUSE_POD(name="a", uid="u1"), now=NOW + timedelta(minutes=4, seconds=59)
    )
    assert (
        ledger.pending(TYPED_PAUSE_POD(name="a", uid="u1"), now=NOW + timedelta(minutes=5)) is None
    )
    for index, uid in enumerate(("u2", "u3", "u4")):
        ledger.record(_eviction(uid, f"p{index}", NOW + timedelta(seconds=index)))
    assert len(ledger) == 2  # u2, the oldest, was dropped
    assert ledger.pending(TYPED_PAUSE_POD(name="p0", uid="u2"), now=NOW) is None
    assert ledger.pending(TYPED_PAUSE_POD(name="p1", uid="u3"), now=NOW) is not None
    # Recording expires what is older than max_age without being asked.
    ledger.record(_eviction("u5", "p5", NOW + timedelta(minutes=10)))
    assert len(ledger) == 1


# -- what a resize asks ---------------------------------------------------------------------


def _sized(requests: dict[str, str] | None, limits: dict[str, str] | None = None) -> Pod:
    body = TYPED_PAUSE_POD(name="web-0")
    resources: ResourceRequirements = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    if resources:
        body["spec"]["containers"][0]["resources"] = resources
    return body


def test_resize_targets_apply_the_admission_patch_operations() -> None:
    # A container without resources: admission adds {} then the requests map and each value.
    bare = _sized(None)
    patches: list[dict[str, Any]] = [
        {"op": "add", "path": "/spec/containers/0/resources", "value": {}},
        {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {}},
        {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "500m"},
        {"op": "add", "path": "/spec/containers/0/resources/requests/memory", "value": "256Mi"},
        {"op": "add", "path": "/metadata/annotations/vpaUpdates", "value": "ignored"},
    ]
    assert resize_targets(bare, patches) == {
        "app": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {}}
    }
    # A container with requests and limits: values replaced, the rest kept.
    sized = _sized({"cpu": "100m", "memory": "100Mi"}, {"memory": "200Mi"})
    patches = [
        {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "250m"},
        {"op": "add", "path": "/spec/containers/0/resources/limits/memory", "value": "512Mi"},
    ]
    assert resize_targets(sized, patches) == {
        "app": {"requests": {"cpu": "250m", "memory": "100Mi"}, "limits": {"memory": "512Mi"}}
    }


@pytest.mark.parametrize(
    ("requests", "applied"),
    [
        ({"cpu": "500m", "memory": "256Mi"}, True),
        # The same quantities written differently: "0.5" is 500m, 268435456 bytes is 256Mi.
        ({"cpu": "0.5", "memory": "268435456"}, True),
        ({"cpu": "100m", "memory": "256Mi"}, False),
        ({"memory": "256Mi"}, False),
    ],
)
def test_resize_applied_compares_quantities(requests: dict[str, str], applied: bool) -> None:
    targets = {"app": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {}}}
    assert resize_applied(_sized(requests), targets) is applied


# -- through the API server ---------------------------------------------------------------------


def _running(apiserver: ApiServer, name: str) -> Pod:
    created = apiserver.store.create(
        {
            **PAUSE_POD(name=name, labels={"app": "web"}, node_name="node-1"),
            "spec": {
                "nodeName": "node-1",
                "containers": [
                    {
                        "name": "app",
                        "image": "app",
                        "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
                    }
                ],
            },
        }
    )
    running = apiserver.store.update_status(
        {
            **created,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    return stored_as(running, Pod)


@pytest.mark.parametrize("status", [500, 504])
async def test_an_eviction_committed_then_failed_is_unknown_and_remembered(
    apiserver: ApiServer, client: KubeClient, status: int
) -> None:
    target = _running(apiserver, "web-0")
    apiserver.faults.add(verb="create", resource="pods/eviction", status=status, after_commit=True)
    ledger = DisruptionLedger()
    result = await evict_pod(client, ledger, target, now=NOW)
    assert (result.outcome, result.counts) == (WriteOutcome.UNKNOWN, True)
    assert isinstance(result.error, KubeApiError)
    assert result.error.code == status
    # It did happen; the ledger counts it until it is shown the pod going.
    assert apiserver.store.get(PODS, "web-0", "default")["metadata"].get("deletionTimestamp")
    entry = ledger.pending(target, now=NOW)
    assert entry is not None
    assert not entry.confirmed


@pytest.mark.parametrize("retry_answer", [404, 429])
async def test_an_eviction_retried_after_a_lost_answer_is_unknown_and_remembered(
    apiserver: ApiServer, kubeconfig: Path, retry_answer: int
) -> None:
    """The first POST is stored, its answer a 503 with Retry-After (a write the transport sends
    again); the retry meets 404 (the first removed the pod: grace 0) or, injected, the 429 of
    the budget the first spent. Either may be this write's doing (it is): ``maybe_ours``, on
    the ledger; the 429 is not a refusal but unknown."""
    target = _running(apiserver, "web-0")
    apiserver.faults.add(
        verb="create", resource="pods/eviction", status=503, retry_after=1, after_commit=True
    )
    if retry_answer == 429:
        apiserver.faults.add(verb="create", resource="pods/eviction", status=429)
    client = await new_client(kubeconfig, clock=SimulationClientClock(VirtualClock(NOW)))
    try:
        ledger = DisruptionLedger()
        result = await evict_pod(client, ledger, target, now=NOW, grace_period_seconds=0)
    finally:
        await client.close()
    assert isinstance(result.error, KubeApiError)
    assert (result.error.code, result.error.unanswered_attempts) == (retry_answer, 1)
    expected = WriteOutcome.GONE if retry_answer == 404 else WriteOutcome.UNKNOWN
    assert (result.outcome, result.counts, result.maybe_ours) == (expected, True, True)
    assert apiserver.store.peek(PODS, "web-0", "default") is None  # the first did evict it
    entry = ledger.pending(target, now=NOW)
    assert entry is not None
    assert not entry.confirmed


async def test_eviction_outcomes_through_the_api_server(
    apiserver: ApiServer, client: KubeClient
) -> None:
    ledger = DisruptionLedger()
    # Success: remembered as confirmed until the informer shows the pod going.
    done = _running(apiserver, "done")
    result = await evict_pod(client, ledger, done, now=NOW)
    assert result.outcome is WriteOutcome.DONE
    recorded = ledger.pending(done, now=NOW)
    assert recorded is not None
    assert recorded.confirmed
    # Refused by a PodDisruptionBudget (429): nothing happened, nothing remembered.
    refused = _running(apiserver, "refused")
    budget = apiserver.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    apiserver.store.update_status(
        {**budget, "status": {"observedGeneration": 1, "disruptionsAllowed": 0}}
    )
    result = await evict_pod(client, ledger, refused, now=NOW)
    assert (result.outcome, result.counts) == (WriteOutcome.REFUSED, False)
    assert ledger.pending(refused, now=NOW) is None
    apiserver.store.delete(POD_DISRUPTION_BUDGETS, "web", "default")
    # Another pod under the same name now (uid precondition, 409) and no pod at all (404):
    # the pod evicted is gone either way; nothing to remember.
    replaced: Pod = {**refused, "metadata": {**refused["metadata"], "uid": "an-older-uid"}}
    result = await evict_pod(client, ledger, replaced, now=NOW)
    assert (result.outcome, result.counts) == (WriteOutcome.GONE, True)
    missing = TYPED_PAUSE_POD(name="missing", uid="uid-x")
    result = await evict_pod(client, ledger, missing, now=NOW)
    assert (result.outcome, result.counts) == (WriteOutcome.GONE, True)
    assert not result.maybe_ours  # gone before this write: not this write's eviction
    assert len(ledger) == 1  # only "done"


async def test_a_resize_is_pending_until_the_pod_shows_it(
    apiserver: ApiServer, client: KubeClient
) -> None:
    target = _running(apiserver, "web-0")
    patches = [
        {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "500m"},
    ]
    apiserver.faults.add(verb="patch", resource="pods/resize", status=504, after_commit=True)
    ledger = DisruptionLedger()
    result = await resize_pod(client, ledger, target, patches, now=NOW)
    assert result.outcome is WriteOutcome.UNKNOWN
    # The informer's old copy does not show it: pending; the stored pod does: shown.
    entry = ledger.pending(target, now=NOW)
    assert entry is not None
    assert entry.kind is DisruptionKind.RESIZE
    stored = apiserver.store.get(PODS, "web-0", "default")
    assert stored["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"
    assert ledger.pending(stored_as(stored, Pod), now=NOW) is None


async def test_an_attached_informer_drops_entries_as_it_sees_pods_go(
    apiserver: ApiServer, client: KubeClient
) -> None:
    going, gone = _running(apiserver, "going"), _running(apiserver, "gone")
    informer: Informer[Any] = Informer(
        client=client, resource=PODS, settings=FAST_INFORMER, rng=random.Random(1)
    )
    ledger = DisruptionLedger()
    ledger.attach(informer)
    ledger.attach(informer)  # once per informer
    informer.start()
    try:
        assert await informer.wait_synced(within=5)
        for target in (going, gone):
            ledger.record(_eviction(target["metadata"]["uid"], target["metadata"]["name"], NOW))
        assert len(ledger) == 2
        # A graceful deletion (an update setting deletionTimestamp), and an immediate one.
        apiserver.store.delete(PODS, "going", "default", grace_period_seconds=30)
        apiserver.store.delete(PODS, "gone", "default", grace_period_seconds=0)
        await eventually(lambda: len(ledger) == 0)
    finally:
        await informer.stop()


async def test_an_eviction_carries_its_grace_period(
    apiserver: ApiServer, client: KubeClient
) -> None:
    # The cluster autoscaler evicts with its own grace period; 0 deletes at once.
    target = _running(apiserver, "web-0")
    ledger = DisruptionLedger()
    result = await evict_pod(client, ledger, target, now=NOW, grace_period_seconds=0)
    assert result.outcome is WriteOutcome.DONE
    assert apiserver.store.list(PODS, namespace="default") == []
