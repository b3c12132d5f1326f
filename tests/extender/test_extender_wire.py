"""The extender over HTTP with the JSON kube-scheduler sends (reference §3).

A policy with RemovePodsViolatingNodeTaints (``includePreferNoSchedule``) and
LowNodeUtilization (cpu 20/50): n1 carries a ``PreferNoSchedule`` taint the pod does not
tolerate; n2 runs 3000m of 4000 (75% > 50: over-utilized); n3 100m (2.5%: under-utilized); n4
1000m (25%: in between). The pod asks for 500m.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from tests.builders.meta import json_body
from tests.controllers.descheduler.builders import NOW, cycle_node, cycle_pod, policy

from .extender_fixtures import running_extender

SOFT = {"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}
POLICY = policy(
    ("deschedule", "RemovePodsViolatingNodeTaints", {"includePreferNoSchedule": True}),
    (
        "balance",
        "LowNodeUtilization",
        {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
    ),
)
NODES = [cycle_node("n1", taints=[SOFT]), cycle_node("n2"), cycle_node("n3"), cycle_node("n4")]
RUNNING = [
    cycle_pod("busy", "n2", cpu="3000m"),
    cycle_pod("light", "n3", cpu="100m"),
    cycle_pod("medium", "n4", cpu="1000m"),
]


def scheduler_pod() -> dict[str, Any]:
    """A pending pod as kube-scheduler serializes it (defaults applied, fields the extender
    does not read included)."""
    the_pod = json_body(cycle_pod("web-7d9f-abcde", None, cpu="500m", memory="256Mi"))
    the_pod["metadata"].update(
        {
            "generateName": "web-7d9f-",
            "resourceVersion": "4711",
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}],
        }
    )
    the_pod["spec"].update(
        {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "hostUsers": True,  # a field from a newer API: ignored, not an error
        }
    )
    the_pod["status"] = {"phase": "Pending", "qosClass": "Burstable"}
    return the_pod


def node_list(names: list[str]) -> dict[str, Any]:
    by_name = {n["metadata"]["name"]: n for n in NODES}
    return {
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {},
        "items": [by_name[n] for n in names],
    }


@pytest.fixture
def candidates() -> list[str]:
    return ["n1", "n2", "n3", "n4"]


async def test_filter_node_cache_capable(candidates: list[str]) -> None:
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        status, answer = await ext.post(
            "filter", {"Pod": scheduler_pod(), "Nodes": None, "NodeNames": candidates}
        )
    assert status == 200
    assert answer["Error"] == ""
    assert answer["Nodes"] is None
    # n1: soft taint not tolerated → taints (unresolvable); n2: 3500/4000 = 87.5% > 50 → LNU
    assert answer["NodeNames"] == ["n3", "n4"]
    assert set(answer["FailedAndUnresolvableNodes"]) == {"n1"}
    assert "RemovePodsViolatingNodeTaints" in answer["FailedAndUnresolvableNodes"]["n1"]
    assert "maintenance=soon:PreferNoSchedule" in answer["FailedAndUnresolvableNodes"]["n1"]
    assert set(answer["FailedNodes"]) == {"n2"}
    assert "LowNodeUtilization" in answer["FailedNodes"]["n2"]
    assert list(answer) == [
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    ]


async def test_filter_with_node_objects(candidates: list[str]) -> None:
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        status, answer = await ext.post(
            "filter", {"Pod": scheduler_pod(), "Nodes": node_list(candidates), "NodeNames": None}
        )
    assert status == 200
    assert answer["NodeNames"] is None
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["n3", "n4"]
    # the Node objects are returned as received
    assert answer["Nodes"]["items"][0] == NODES[2]


async def test_pre_1_16_lowercase_keys_and_missing_fields(candidates: list[str]) -> None:
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        _, lower = await ext.post("filter", {"pod": scheduler_pod(), "nodenames": candidates})
        _, mixed = await ext.post("filter", {"POD": scheduler_pod(), "nodeNames": candidates})
        # "Nodes" missing altogether (not null): NodeNames decides
        assert lower["NodeNames"] == mixed["NodeNames"] == ["n3", "n4"]
        _, neither = await ext.post("filter", {"Pod": scheduler_pod()})
        assert neither["Error"] == "ExtenderArgs: neither NodeNames nor Nodes is set"
        assert neither["NodeNames"] is None
        assert neither["Nodes"] is None
        _, no_pod = await ext.post("filter", {"NodeNames": candidates})
        assert no_pod["Error"] == "Pod: must be a v1.Pod object, got null"
        _, lower_nodes = await ext.post(
            "filter", {"pod": scheduler_pod(), "nodes": {"items": node_list(["n3"])["items"]}}
        )
        assert [n["metadata"]["name"] for n in lower_nodes["Nodes"]["items"]] == ["n3"]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"{not json", "malformed JSON in ExtenderArgs"),
        (b"[]", "ExtenderArgs: must be a JSON object, got a list"),
        (
            json.dumps({"Pod": {"metadata": {}}, "NodeNames": ["n3"]}).encode(),
            "Pod.metadata.name: is required",
        ),
        (
            json.dumps(
                {"Pod": {"metadata": {"name": "p"}, "spec": "x"}, "NodeNames": ["n3"]}
            ).encode(),
            "Pod.spec: must be an object, got a string",
        ),
        (
            json.dumps(
                {
                    "Pod": {"metadata": {"name": "p"}, "spec": {"tolerations": {}}},
                    "NodeNames": ["n3"],
                }
            ).encode(),
            "Pod.spec.tolerations: must be a list of objects",
        ),
        (
            json.dumps({"Pod": {"metadata": {"name": "p"}}, "NodeNames": "n3"}).encode(),
            "NodeNames: must be a list of node names",
        ),
        (
            json.dumps(
                {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n3", "n9", "n8"]}
            ).encode(),
            "nodes not in the extender's cache (still syncing?): n9, n8",
        ),
    ],
)
async def test_bad_input_is_a_clear_error(raw: bytes, error: str) -> None:
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        status, answer = await ext.post("filter", None, raw=raw)
        assert status == 200
        assert answer["Error"].startswith(error)
        assert answer["NodeNames"] is None
        assert answer["Nodes"] is None
        status, answer = await ext.post("prioritize", None, raw=raw)
        assert status == 400
        assert answer["Error"].startswith(error)


async def test_unsynced_caches_are_an_error() -> None:
    async with running_extender(
        POLICY, nodes=NODES, readiness=lambda: "extender caches not synced: pods"
    ) as ext:
        _, answer = await ext.post("filter", {"Pod": scheduler_pod(), "NodeNames": ["n3"]})
    assert answer["Error"] == "extender caches not synced: pods"


async def test_unknown_pod_fields_are_ignored() -> None:
    the_pod = scheduler_pod()
    the_pod["spec"]["somethingNew"] = {"shape": [1, 2]}
    the_pod["futureTopLevel"] = True
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        _, answer = await ext.post("filter", {"Pod": the_pod, "NodeNames": ["n3", "n4"]})
    assert answer == {
        "Nodes": None,
        "NodeNames": ["n3", "n4"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


async def test_prioritize_prefers_under_utilized_nodes(candidates: list[str]) -> None:
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        status, answer = await ext.post(
            "prioritize", {"Pod": scheduler_pod(), "Nodes": None, "NodeNames": candidates}
        )
    assert status == 200
    # n3 (2.5% cpu) is LowNodeUtilization's under-utilized node: 5 + 5; others neutral 5
    assert answer == [
        {"Host": "n1", "Score": 10},
        {"Host": "n2", "Score": 5},
        {"Host": "n3", "Score": 10},
        {"Host": "n4", "Score": 5},
    ]


async def test_recently_descheduled_nodes_are_unresolvable() -> None:
    the_pod = scheduler_pod()
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        ext.memory.record(cycle_pod("old", "n3"), "n3", NOW - timedelta(minutes=1))
        _, answer = await ext.post("filter", {"Pod": the_pod, "NodeNames": ["n3", "n4"]})
        assert answer["NodeNames"] == ["n4"]
        assert answer["FailedAndUnresolvableNodes"] == {
            "n3": "recently descheduled ReplicaSet/web from n3"
        }
        # after the memory's 10 minutes the node is open again
        clock = ext.extender.clock
        assert isinstance(clock, VirtualClock)
        await clock.advance(600)
        _, answer = await ext.post("filter", {"Pod": the_pod, "NodeNames": ["n3", "n4"]})
        assert answer["NodeNames"] == ["n3", "n4"]


async def test_policy_never_strands_a_pod() -> None:
    # only n1 (soft taint) and n2 (over-utilized) are offered: refusing both would leave the
    # pod Pending, so neither is refused
    async with running_extender(POLICY, nodes=NODES, pods=RUNNING) as ext:
        _, answer = await ext.post("filter", {"Pod": scheduler_pod(), "NodeNames": ["n1", "n2"]})
    assert answer["NodeNames"] == ["n1", "n2"]
    assert answer["FailedNodes"] == answer["FailedAndUnresolvableNodes"] == {}


async def test_five_thousand_node_names() -> None:
    nodes = [cycle_node(f"node-{i:04d}") for i in range(5000)]
    pods = [cycle_pod(f"p{i}", f"node-{i:04d}", cpu="3000m", owners=[]) for i in range(0, 5000, 7)]
    names = [f"node-{i:04d}" for i in range(5000)]
    async with running_extender(POLICY, nodes=nodes, pods=pods) as ext:
        _, answer = await ext.post("filter", {"Pod": scheduler_pod(), "NodeNames": names})
    # every 7th node runs 3000m + 500m > 50% → refused by LowNodeUtilization
    assert len(answer["FailedNodes"]) == len(range(0, 5000, 7)) == 715
    assert len(answer["NodeNames"]) == 5000 - 715
    assert answer["NodeNames"][:3] == ["node-0001", "node-0002", "node-0003"]
