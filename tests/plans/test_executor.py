"""The one plan executor, through the real client against the in-process API server.

Each intent kind is applied and its write checked in the store; a write whose answer is a 5xx
(after the commit, or before: either way unknown) counts as done; after the write gate (the
leader Lease) closes, nothing more reaches the server; with ``dry_run`` every intent is printed
as one stable line and no write request reaches the server. The metric
``kubescale_plan_intents_total`` counts each intent by actor, kind and outcome.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubescale.coordination.disruption_ledger import (
    DisruptionKind,
    DisruptionLedger,
    WriteOutcome,
    WriteResult,
)
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.errors import KubeApiError, NotLeaderError
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import CORE_EVENTS, DEPLOYMENTS, NODES, PODS
from kubescale.objects.pod import Pod
from kubescale.plans.executor import (
    DRY_RUN_PREFIX,
    Applied,
    Decision,
    PlanExecutor,
    collect_plan,
)
from kubescale.plans.intents import (
    Event,
    Evict,
    Intent,
    PatchObject,
    Resize,
    Scale,
    Taint,
    Untaint,
    WriteStatus,
    describe,
    object_ref,
    pod_ref,
)
from kubescale.plans.node_taints import tainted
from kubescale.sim.apiserver.faults import WRITE_VERBS
from kubescale.sim.apiserver.server import ApiServer
from tests.builders.meta import stored_as

NOW = datetime(2026, 1, 5, tzinfo=UTC)
ACTOR = "test-system"
CPU_500M = [{"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": "500m"}]


@pytest.fixture
async def apiserver() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=3600.0, seed=5) as server:
        yield server


@pytest.fixture
async def client(apiserver: ApiServer, tmp_path: Path) -> AsyncIterator[KubeClient]:
    path = tmp_path / "kubeconfig"
    apiserver.write_kubeconfig(path)
    kube = await connect(kubeconfig=path, registry=CollectorRegistry(), rng=random.Random(0))
    try:
        yield kube
    finally:
        await kube.close()


def running(apiserver: ApiServer, name: str) -> Pod:
    created = apiserver.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
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


def writes(apiserver: ApiServer) -> dict[str, int]:
    """Write requests the server answered, as ``verb resource[/subresource]`` → count."""
    found: dict[str, int] = {}
    for record, count in apiserver.requests.counts().items():
        if record.verb in WRITE_VERBS:
            sub = f"/{record.subresource}" if record.subresource else ""
            key = f"{record.verb} {record.resource}{sub}"
            found[key] = found.get(key, 0) + count
    return found


def executor(
    client: KubeClient, registry: CollectorRegistry, **kwargs: Any
) -> tuple[PlanExecutor, EventRecorder, DisruptionLedger]:
    events = EventRecorder(client=client, component=ACTOR)
    ledger = DisruptionLedger()
    built = PlanExecutor(client=client, ledger=ledger, events=events, registry=registry, **kwargs)
    return built, events, ledger


def counted(registry: CollectorRegistry, intent: str, outcome: str) -> float:
    value = registry.get_sample_value(
        "kubescale_plan_intents_total", {"actor": ACTOR, "intent": intent, "outcome": outcome}
    )
    return 0.0 if value is None else value


def every_kind(apiserver: ApiServer) -> list[Intent]:
    first, second, third, fourth = (running(apiserver, f"web-{i}") for i in range(4))
    ready = {**fourth, "status": {**fourth["status"], "nominatedNodeName": "node-2"}}
    return [
        Evict(actor=ACTOR, pod=first, annotations={"reason": "test"}),
        Resize(actor=ACTOR, pod=second, patches=CPU_500M),
        PatchObject(
            actor=ACTOR,
            target=pod_ref(third),
            patch={"metadata": {"annotations": {"vpaInPlaceUpdated": "true"}}},
        ),
        WriteStatus(actor=ACTOR, resource=PODS, body=ready),
        Event(actor=ACTOR, involved=third, type="Normal", reason="Tested", message="a test"),
    ]


async def test_each_intent_kind_is_applied_through_the_client(
    apiserver: ApiServer, client: KubeClient
) -> None:
    registry = CollectorRegistry()
    plan_executor, events, ledger = executor(client, registry)
    plan = every_kind(apiserver)
    try:
        results = await plan_executor.apply(plan, now=NOW)
        await events.flush()
    finally:
        await events.close()
    assert [r.outcome for r in results] == [WriteOutcome.DONE] * 5
    store = apiserver.store
    assert store.get(PODS, "web-0", "default")["metadata"].get("deletionTimestamp")
    resized = store.get(PODS, "web-1", "default")["spec"]["containers"][0]["resources"]
    assert resized["requests"]["cpu"] == "500m"
    patched = store.get(PODS, "web-2", "default")
    assert patched["metadata"]["annotations"] == {"vpaInPlaceUpdated": "true"}
    assert store.get(PODS, "web-3", "default")["status"]["nominatedNodeName"] == "node-2"
    [event] = store.list(CORE_EVENTS, namespace="default")
    assert (event["reason"], event["involvedObject"]["name"]) == ("Tested", "web-2")
    # The eviction and the resize are on the ledger, for every system's budget.
    kinds = {entry.name: entry.kind for entry in ledger.in_flight(now=NOW)}
    assert kinds == {"web-0": DisruptionKind.EVICTION, "web-1": DisruptionKind.RESIZE}
    assert writes(apiserver) == {
        "create pods/eviction": 1,
        "patch pods/resize": 1,
        "patch pods": 1,
        "update pods/status": 1,
        "create events": 1,
    }
    for kind in ("Evict", "Resize", "PatchObject", "WriteStatus", "Event"):
        assert counted(registry, kind, "done") == 1


@pytest.mark.parametrize(("status", "after_commit"), [(504, True), (500, True), (503, False)])
async def test_a_write_whose_outcome_is_unknown_counts_as_done(
    apiserver: ApiServer, client: KubeClient, status: int, after_commit: bool
) -> None:
    registry = CollectorRegistry()
    plan_executor, events, ledger = executor(client, registry)
    target = running(apiserver, "web-0")
    other = running(apiserver, "web-1")
    for resource in ("pods/eviction", "pods"):
        verb = "create" if resource == "pods/eviction" else "patch"
        # count=None: the transport's retries of an idempotent write meet the fault too
        apiserver.faults.add(
            verb=verb, resource=resource, status=status, after_commit=after_commit, count=None
        )
    try:
        evicted, patched = await plan_executor.apply(
            [
                Evict(actor=ACTOR, pod=target),
                PatchObject(actor=ACTOR, target=pod_ref(other), patch={"metadata": {}}),
            ],
            now=NOW,
        )
    finally:
        await events.close()
    for applied in (evicted, patched):
        assert applied.outcome is WriteOutcome.UNKNOWN
        assert applied.counts  # done until proven otherwise
        assert isinstance(applied.error, KubeApiError)
        assert applied.error.code == status
    # The eviction is remembered as maybe done (not confirmed) for every system's budget.
    [entry] = ledger.in_flight(now=NOW)
    assert (entry.name, entry.confirmed) == ("web-0", False)
    assert counted(registry, "Evict", "unknown") == 1
    assert counted(registry, "PatchObject", "unknown") == 1


async def test_nothing_is_written_after_the_lease_is_lost(
    apiserver: ApiServer, client: KubeClient
) -> None:
    """The gate closes after the first eviction's answer: the decision goes on yielding, but no
    later intent reaches the server, none is recorded on the ledger, each is refused."""
    holding = [True]
    gated = client.gated(lambda: holding[0])
    registry = CollectorRegistry()
    plan_executor, events, ledger = executor(gated, registry)
    pods = [running(apiserver, f"web-{i}") for i in range(3)]

    def decision() -> Decision[list[Applied]]:
        seen: list[Applied] = []
        for pod in pods:
            applied = yield Evict(actor=ACTOR, pod=pod)
            seen.append(applied)
            holding[0] = False  # the Lease is lost while the iteration runs
            seen.append(
                (yield Event(actor=ACTOR, involved=pod, type="Normal", reason="X", message="y"))
            )
        return seen

    try:
        results = await plan_executor.drive(decision(), now=NOW)
        await events.flush()
    finally:
        await events.close()
    assert [r.outcome for r in results] == [WriteOutcome.DONE] + [WriteOutcome.REFUSED] * 5
    assert all(isinstance(r.error, NotLeaderError) for r in results[1:])
    assert writes(apiserver) == {"create pods/eviction": 1}
    assert [entry.name for entry in ledger.in_flight(now=NOW)] == ["web-0"]
    assert counted(registry, "Evict", "refused") == 2
    assert counted(registry, "Event", "refused") == 3


async def test_a_dry_run_prints_each_intent_and_writes_nothing(
    apiserver: ApiServer, client: KubeClient
) -> None:
    registry = CollectorRegistry()
    lines: list[str] = []
    plan_executor, events, ledger = executor(client, registry, dry_run=True, sink=lines.append)
    plan = every_kind(apiserver)
    apiserver.requests.clear()
    try:
        results = await plan_executor.apply(plan, now=NOW)
        await events.flush()
    finally:
        await events.close()
    assert all(r.outcome is WriteOutcome.DONE and r.dry_run for r in results)
    assert writes(apiserver) == {}
    assert len(ledger) == 0
    # One stable line per intent: actor, verb, object, the change as sorted compact JSON.
    assert lines == [
        'dry-run test-system: evict pods default/web-0 annotations={"reason":"test"}',
        'dry-run test-system: resize pods default/web-1 [{"op":"add",'
        '"path":"/spec/containers/0/resources/requests/cpu","value":"500m"}]',
        'dry-run test-system: patch pods default/web-2 merge {"metadata":{"annotations":'
        '{"vpaInPlaceUpdated":"true"}}}',
        "dry-run test-system: write-status pods default/web-3 "
        '{"conditions":[{"status":"True","type":"Ready"}],"nominatedNodeName":"node-2",'
        '"phase":"Running"}',
        'dry-run test-system: event Pod default/web-2 Normal Tested "a test"',
    ]
    assert lines == [DRY_RUN_PREFIX + describe(intent) for intent in plan]
    assert counted(registry, "Evict", "dry-run") == 1


def test_collect_plan_answers_each_intent_done_without_an_executor() -> None:
    pod: Pod = {"metadata": {"name": "web-0", "namespace": "default", "uid": "u"}}

    def decision() -> Decision[int]:
        done = 0
        for _ in range(2):
            applied = yield Evict(actor=ACTOR, pod=pod)
            done += applied.counts
        return done

    plan, done = collect_plan(decision())
    assert [describe(i) for i in plan] == ["test-system: evict pods default/web-0"] * 2
    assert done == 2


def test_collect_plan_sends_the_chosen_outcomes_in_order() -> None:
    """With ``answer``, each intent gets ``answer(intent)`` (a decision test's outcomes): the
    first eviction refused (403: not counted), the second unanswered (counts as done)."""
    pod: Pod = {"metadata": {"name": "web-0", "namespace": "default", "uid": "u"}}
    outcomes = iter([WriteOutcome.REFUSED, WriteOutcome.UNKNOWN])
    asked: list[str] = []

    def decision() -> Decision[int]:
        done = 0
        for _ in range(2):
            applied = yield Evict(actor=ACTOR, pod=pod)
            done += applied.counts
        return done

    def answer(intent: Intent) -> Applied:
        asked.append(describe(intent))
        return Applied(WriteResult(next(outcomes)))

    plan, done = collect_plan(decision(), answer)
    assert asked == [describe(i) for i in plan] == ["test-system: evict pods default/web-0"] * 2
    assert done == 1  # refused 0 + unknown 1


def test_an_event_of_another_type_is_refused_when_planned() -> None:
    with pytest.raises(ValueError, match="event type 'Info'"):
        Event(actor=ACTOR, involved={}, type="Info", reason="r", message="m")


async def test_scale_taint_and_untaint_are_applied_through_the_client(
    apiserver: ApiServer, client: KubeClient
) -> None:
    """A Deployment scaled to 3 through ``/scale``; a node tainted and cordoned, tainted again
    (nothing to write: one PUT), then untainted and uncordoned; a node that is gone is done."""
    registry = CollectorRegistry()
    plan_executor, events, _ = executor(client, registry)
    deployment = apiserver.store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "app"}]},
                },
            },
        }
    )
    apiserver.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    taint = Taint(
        actor=ACTOR,
        node="n1",
        key="ToBeDeleted",
        value="1767571200",
        effect="NoSchedule",
        cordon=True,
    )
    plan: list[Intent] = [
        Scale(actor=ACTOR, target=object_ref(deployment, DEPLOYMENTS), replicas=3),
        taint,
        taint,
        Untaint(actor=ACTOR, node="n1", key="ToBeDeleted", uncordon=True),
        Untaint(actor=ACTOR, node="gone", key="ToBeDeleted"),
    ]
    try:
        results = await plan_executor.apply(plan, now=NOW)
    finally:
        await events.close()
    assert [r.outcome for r in results] == [WriteOutcome.DONE] * 5
    assert apiserver.store.get(DEPLOYMENTS, "web", "default")["spec"]["replicas"] == 3
    assert writes(apiserver) == {"patch deployments/scale": 1, "update nodes": 2}
    node = apiserver.store.get(NODES, "n1", None)
    assert node["spec"].get("taints", []) == []
    assert "unschedulable" not in node["spec"]
    assert [describe(intent) for intent in plan[1:4:2]] == [
        "test-system: taint nodes n1 ToBeDeleted=1767571200:NoSchedule cordon",
        "test-system: untaint nodes n1 ToBeDeleted uncordon",
    ]


@pytest.mark.parametrize(
    ("taints", "unschedulable", "intent", "expected"),
    [
        # absent: added (and cordoned)
        ([], False, "taint+cordon", ([{"key": "k", "value": "1", "effect": "NoSchedule"}], True)),
        # present and cordoned: nothing to write
        ([{"key": "k", "value": "0", "effect": "NoSchedule"}], True, "taint+cordon", None),
        # present, not cordoned: the cordon alone (the old value kept)
        (
            [{"key": "k", "value": "0", "effect": "NoSchedule"}],
            False,
            "taint+cordon",
            ([{"key": "k", "value": "0", "effect": "NoSchedule"}], True),
        ),
        # present, no cordon asked: nothing to write
        ([{"key": "k", "value": "0", "effect": "NoSchedule"}], False, "taint", None),
        # removed, other taints kept, uncordoned
        (
            [{"key": "o", "effect": "NoExecute"}, {"key": "k", "effect": "NoSchedule"}],
            True,
            "untaint+uncordon",
            ([{"key": "o", "effect": "NoExecute"}], False),
        ),
        # absent: nothing to write (the cordon stays: upstream only uncordons with its taint)
        ([], True, "untaint+uncordon", None),
    ],
)
def test_the_taint_change_table(
    taints: list[dict[str, str]],
    unschedulable: bool,
    intent: str,
    expected: tuple[list[dict[str, str]], bool] | None,
) -> None:
    node: dict[str, Any] = {"metadata": {"name": "n1"}, "spec": {"taints": taints}}
    if unschedulable:
        node["spec"]["unschedulable"] = True
    made: Taint | Untaint = (
        Taint(
            actor=ACTOR,
            node="n1",
            key="k",
            value="1",
            effect="NoSchedule",
            cordon="cordon" in intent,
        )
        if intent.startswith("taint")
        else Untaint(actor=ACTOR, node="n1", key="k", uncordon="uncordon" in intent)
    )
    changed = tainted(node, made)
    if expected is None:
        assert changed is None
        return
    assert changed is not None
    assert (changed["spec"]["taints"], bool(changed["spec"].get("unschedulable"))) == expected
