"""The executor's writes added for the cluster autoscaler and the VPA recommender, through the
real client against the in-process API server: ``WriteConfigMap`` (GET, then create or update
with the data and annotations merged over the stored ones), ``PatchOrCreate`` (patch; create
on 404), ``DeleteObject`` (a 404 is *gone*), and the node group intents ``ResizeNodeGroup`` /
``DeleteNodes`` through a system's node group port (its error kept, counted by its outcome);
refused once the Lease is lost, printed by a dry run, each counted in
``kubescale_plan_intents_total``.
"""

from __future__ import annotations

from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry

from kubescale.coordination.disruption_ledger import WriteOutcome
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import NotLeaderError
from kubescale.kube.resources import CONFIG_MAPS
from kubescale.objects.node import Node
from kubescale.plans.intents import (
    DeleteNodes,
    DeleteObject,
    Intent,
    ObjectRef,
    PatchOrCreate,
    ResizeNodeGroup,
    WriteConfigMap,
    describe,
)
from kubescale.plans.node_groups import NodeGroupWriteError
from kubescale.sim.apiserver.server import ApiServer
from tests.plans.test_executor import ACTOR, NOW, apiserver, client, counted, executor, writes

__all__ = ["apiserver", "client"]  # the fixtures, re-exported for pytest

GROUP = "MachineDeployment/default/small"
STATUS = WriteConfigMap(
    actor=ACTOR,
    namespace="kube-system",
    name="status",
    data={"status": "one"},
    annotations={"last-updated": "t1"},
)


class Unanswered(NodeGroupWriteError):
    outcome: ClassVar[WriteOutcome] = WriteOutcome.UNKNOWN


class Groups:
    """A node group port that records what it was asked and answers as told."""

    def __init__(self, fail: NodeGroupWriteError | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail

    async def resize_node_group(self, intent: ResizeNodeGroup) -> None:
        self.calls.append(f"resize {intent.group} {intent.delta:+d}")
        if self.fail is not None:
            raise self.fail

    async def delete_nodes(self, intent: DeleteNodes) -> None:
        self.calls.append(f"delete {intent.group} {','.join(intent.names)}")
        if self.fail is not None:
            raise self.fail


def a_node(name: str) -> Node:
    return {"metadata": {"name": name}, "spec": {"providerID": f"capi://{name}"}}


async def test_a_config_map_is_created_then_updated_with_its_other_keys_kept(
    apiserver: ApiServer, client: KubeClient
) -> None:
    registry = CollectorRegistry()
    plan_executor, events, _ = executor(client, registry)
    try:
        [created] = await plan_executor.apply([STATUS], now=NOW)
        stored = apiserver.store.get(CONFIG_MAPS, "status", "kube-system")
        assert created.stored is not None
        assert created.stored["metadata"]["uid"] == stored["metadata"]["uid"]
        assert (stored["data"], stored["metadata"]["annotations"]) == (
            {"status": "one"},
            {"last-updated": "t1"},
        )
        # someone else's key and annotation on the same ConfigMap survive the next write
        apiserver.store.update(
            {
                **stored,
                "metadata": {**stored["metadata"], "annotations": {"last-updated": "t1", "x": "y"}},
                "data": {"status": "one", "other": "kept"},
            }
        )
        second = WriteConfigMap(
            actor=ACTOR,
            namespace="kube-system",
            name="status",
            data={"status": "two"},
            annotations={"last-updated": "t2"},
        )
        [updated] = await plan_executor.apply([second], now=NOW)
    finally:
        await events.close()
    assert updated.outcome is WriteOutcome.DONE
    stored = apiserver.store.get(CONFIG_MAPS, "status", "kube-system")
    assert stored["data"] == {"status": "two", "other": "kept"}
    assert stored["metadata"]["annotations"] == {"last-updated": "t2", "x": "y"}
    assert writes(apiserver) == {"create configmaps": 1, "update configmaps": 1}
    assert counted(registry, "WriteConfigMap", "done") == 2


async def test_patch_or_create_and_delete(apiserver: ApiServer, client: KubeClient) -> None:
    registry = CollectorRegistry()
    plan_executor, events, _ = executor(client, registry)
    body = {"metadata": {"name": "cp", "namespace": "default"}, "data": {"n": "1"}}
    write = PatchOrCreate(
        actor=ACTOR, resource=CONFIG_MAPS, body=body, patch={"data": {"n": "2"}}, patch_type="merge"
    )
    gone = DeleteObject(actor=ACTOR, target=ObjectRef(CONFIG_MAPS, "default", "cp"))
    try:
        # the patch meets a 404: created as ``body``; then patched; deleted; deleted again: gone
        results = await plan_executor.apply([write], now=NOW)
        assert apiserver.store.get(CONFIG_MAPS, "cp", "default")["data"] == {"n": "1"}
        results += await plan_executor.apply([write], now=NOW)
        assert apiserver.store.get(CONFIG_MAPS, "cp", "default")["data"] == {"n": "2"}
        results += await plan_executor.apply([gone, gone], now=NOW)
    finally:
        await events.close()
    assert [r.outcome for r in results] == [WriteOutcome.DONE] * 3 + [WriteOutcome.GONE]
    assert apiserver.store.peek(CONFIG_MAPS, "cp", "default") is None
    assert writes(apiserver) == {
        "patch configmaps": 2,
        "create configmaps": 1,
        "delete configmaps": 2,
    }
    assert counted(registry, "DeleteObject", "gone") == 1


@pytest.mark.parametrize(
    ("fail", "outcome"),
    [
        (None, WriteOutcome.DONE),
        (NodeGroupWriteError("min size reached"), WriteOutcome.REFUSED),
        (Unanswered("no answer within the deadline"), WriteOutcome.UNKNOWN),
    ],
)
async def test_node_group_intents_go_through_the_port(
    client: KubeClient, fail: NodeGroupWriteError | None, outcome: WriteOutcome
) -> None:
    registry = CollectorRegistry()
    groups = Groups(fail)
    plan_executor, events, _ = executor(client, registry, node_groups=groups)
    try:
        results = await plan_executor.apply(
            [
                ResizeNodeGroup(actor=ACTOR, group=GROUP, delta=2),
                DeleteNodes(actor=ACTOR, group=GROUP, nodes=[a_node("n1"), a_node("n2")]),
            ],
            now=NOW,
        )
    finally:
        await events.close()
    assert groups.calls == [f"resize {GROUP} +2", f"delete {GROUP} n1,n2"]
    assert [r.outcome for r in results] == [outcome] * 2
    assert all(r.failure is fail for r in results)
    assert all(r.counts == (outcome is not WriteOutcome.REFUSED) for r in results)
    assert counted(registry, "ResizeNodeGroup", outcome.value) == 1
    assert counted(registry, "DeleteNodes", outcome.value) == 1


async def test_node_group_intents_are_refused_after_the_lease_is_lost(client: KubeClient) -> None:
    groups = Groups()
    registry = CollectorRegistry()
    plan_executor, events, _ = executor(client.gated(lambda: False), registry, node_groups=groups)
    try:
        [applied] = await plan_executor.apply(
            [ResizeNodeGroup(actor=ACTOR, group=GROUP, delta=-1)], now=NOW
        )
    finally:
        await events.close()
    assert groups.calls == []
    assert applied.outcome is WriteOutcome.REFUSED
    assert isinstance(applied.error, NotLeaderError)


async def test_a_dry_run_prints_the_new_intents_and_writes_nothing(
    apiserver: ApiServer, client: KubeClient
) -> None:
    groups = Groups()
    lines: list[str] = []
    plan_executor, events, _ = executor(
        client, CollectorRegistry(), dry_run=True, sink=lines.append, node_groups=groups
    )
    plan: list[Intent] = [
        ResizeNodeGroup(actor=ACTOR, group=GROUP, delta=2),
        ResizeNodeGroup(actor=ACTOR, group=GROUP, delta=-1),
        DeleteNodes(actor=ACTOR, group=GROUP, nodes=[a_node("n1")]),
        STATUS,
        PatchOrCreate(
            actor=ACTOR,
            resource=CONFIG_MAPS,
            body={"metadata": {"name": "cp", "namespace": "default"}},
            patch=[{"op": "replace", "path": "/data", "value": {}}],
        ),
        DeleteObject(actor=ACTOR, target=ObjectRef(CONFIG_MAPS, "default", "cp")),
    ]
    try:
        results = await plan_executor.apply(plan, now=NOW)
    finally:
        await events.close()
    assert all(r.dry_run for r in results)
    assert groups.calls == []
    assert writes(apiserver) == {}
    assert lines == [
        f"dry-run {ACTOR}: increase-size node-group {GROUP} delta=+2",
        f"dry-run {ACTOR}: decrease-target-size node-group {GROUP} delta=-1",
        f'dry-run {ACTOR}: delete-nodes node-group {GROUP} ["n1"]',
        f'dry-run {ACTOR}: write-configmap configmaps kube-system/status {{"status":"one"}} '
        'annotations={"last-updated":"t1"}',
        f"dry-run {ACTOR}: patch-or-create configmaps default/cp json "
        '[{"op":"replace","path":"/data","value":{}}]',
        f"dry-run {ACTOR}: delete configmaps default/cp",
    ]
    assert lines == [f"dry-run {describe(intent)}" for intent in plan]


def test_a_resize_by_zero_is_not_an_intent() -> None:
    with pytest.raises(ValueError, match="resize by 0"):
        ResizeNodeGroup(actor=ACTOR, group=GROUP, delta=0)
