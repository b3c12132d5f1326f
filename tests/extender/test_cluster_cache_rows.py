"""The extender's usage table counts every pod however many nodes there are and in whichever
order pods and nodes arrive (issue 27, 12).

The table starts with 64 rows and doubles. Before the fix the pod's row was looked up *while*
indexing the old array (``self._used[self._row(node)] += v``): the 65th, 129th, ... node first
seen through a pod grew the table, but the add went to the old 64-row array — ``IndexError``,
swallowed by the informer's handler, the pod never counted. At every start with ≥ 64 nodes
whose pods are listed before the nodes, a node at 81 % CPU then passed a 50 % LowNodeUtilization
check.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.extender.cluster_cache import ClusterCache
from kubescale.extender.extender_config import ExtenderSettings
from kubescale.extender.extender_routes import SchedulerExtender
from kubescale.extender.informer_feed import feed
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import PODS
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.scheduling.policy.utilization_args import LowNodeUtilizationArgs
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock
from tests.builders.meta import json_body
from tests.controllers.descheduler.builders import NOW, cycle_node, cycle_pod, policy

# cpu 20/50 (the 50 % check)
POLICY = policy(
    (
        "balance",
        "LowNodeUtilization",
        {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
    ),
)
NODES = 70
HOT = 64
"""The 65th node: its pod is the 65th listed (names sort by index), so its row is the 65th."""


def lnu_args() -> LowNodeUtilizationArgs:
    args = POLICY.profiles[0].args["LowNodeUtilization"]
    assert isinstance(args, LowNodeUtilizationArgs)
    return args


def name(i: int) -> str:
    return f"n{i:03d}"


def running_pods() -> list[Pod]:
    """One pod per node: 100m (2.5 % of 4 cores), and 3250m on the hot node (81.25 %)."""
    return [
        cycle_pod(f"p{i:03d}", name(i), cpu="3250m" if i == HOT else "100m", owners=[])
        for i in range(NODES)
    ]


# -- through the informers and the route ------------------------------------------------------


@pytest.fixture
async def api_client(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, KubeClient]]:
    clock = VirtualClock(NOW)
    async with ApiServer(clock=clock, bookmark_interval=3600.0, seed=5) as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        client = await connect(
            kubeconfig=kubeconfig,
            clock=SimulationClientClock(clock),
            registry=CollectorRegistry(),
            rng=random.Random(0),
        )
        try:
            yield api, client
        finally:
            await client.close()


def store(api: ApiServer, typed: Pod | Node) -> None:
    obj = json_body(typed)
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = {
        k: v for k, v in obj["metadata"].items() if k not in ("uid", "creationTimestamp")
    }
    created = api.store.create(body)
    if obj.get("status"):
        api.store.update_status({**created, "status": obj["status"]})


async def test_pods_listed_before_their_nodes_are_all_counted(
    api_client: tuple[ApiServer, KubeClient],
) -> None:
    """70 nodes; the pods informer lists (and is replayed to the cache) before the nodes
    informer starts, as at a start where the pods' list comes back first. n064 runs 3250m of
    4000m = 81.25 % > 50 %: LowNodeUtilization would evict from it, so the filter refuses it
    for a 100m pod (3350/4000 = 83.75 % after). Today its pod was lost: n064 read 0 % and
    passed."""
    api, client = api_client
    for i in range(NODES):
        store(api, cycle_node(name(i)))
    for running in running_pods():
        store(api, running)
    informers = InformerSet(client=client, rng=random.Random(1))
    informers.informer(PODS)
    informers.start()
    clock = VirtualClock(NOW)
    cache = ClusterCache(policy=POLICY, now=clock.now)
    try:
        assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
        readiness = feed(cache, informers)  # pods replayed now; the node informer starts
        assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
        assert readiness() is None
        arrays = cache.utilization(lnu_args())
        assert arrays is not None
        cpu = arrays.column["cpu"]
        assert int(arrays.used[arrays.index[name(HOT)], cpu]) == 3250
        assert int(arrays.used[:, cpu].sum()) == 3250 + 100 * (NODES - 1)
        extender = SchedulerExtender(
            cache=cache,
            rules=PlacementRules.from_policy(POLICY),
            veto=EvictionMemory(duration=timedelta(minutes=10)),
            settings=ExtenderSettings(),
            clock=clock,
            readiness=readiness,
        )
        app = web.Application()
        extender.mount(app)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            pending = cycle_pod("new", None, cpu="100m")
            body = {"Pod": pending, "NodeNames": [name(HOT), name(0)]}
            async with (
                aiohttp.ClientSession() as session,
                session.post(
                    f"http://127.0.0.1:{server.port}/scheduler/filter",
                    data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                ) as response,
            ):
                assert response.status == 200
                answer = json.loads(await response.read())
        finally:
            await server.close()
        assert answer["Error"] == ""
        assert answer["NodeNames"] == [name(0)]
        assert list(answer["FailedNodes"]) == [name(HOT)]
        assert "LowNodeUtilization" in answer["FailedNodes"][name(HOT)]
    finally:
        await informers.stop()


# -- the invariant, whatever the order --------------------------------------------------------


@st.composite
def arrivals(draw: st.DrawFn) -> tuple[int, list[tuple[str, int]]]:
    """A node count crossing 64/128/256 or not, and an interleaving of every node's and pod's
    arrival (pods before, after or between nodes), with some pods leaving again."""
    nodes = draw(st.integers(min_value=1, max_value=300))
    pods = draw(st.integers(min_value=0, max_value=2 * nodes))
    events = [("node", i) for i in range(nodes)] + [("pod", j) for j in range(pods)]
    events = draw(st.permutations(events))
    leaving = draw(st.lists(st.integers(min_value=0, max_value=max(pods - 1, 0)), max_size=10))
    events += [("gone", j) for j in sorted(set(leaving)) if j < pods]
    return nodes, events


def pod_number(j: int, nodes: int) -> Pod:
    # pod j on node (j * 7) % nodes, (j % 9 + 1) × 10m
    return cycle_pod(f"q{j:04d}", name((j * 7) % nodes), cpu=f"{(j % 9 + 1) * 10}m", owners=[])


@settings(max_examples=60, deadline=None)
@given(arrivals())
def test_usage_is_the_sum_of_the_pods_present(drawn: tuple[int, list[tuple[str, int]]]) -> None:
    nodes, events = drawn
    cache = ClusterCache(policy=POLICY, now=lambda: NOW)
    present: dict[int, Pod] = {}
    for kind, i in events:
        if kind == "node":
            cache.upsert_node(cycle_node(name(i)))
        elif kind == "pod":
            present[i] = pod_number(i, nodes)
            cache.upsert_pod(present[i])
        else:
            cache.delete_pod(present.pop(i))
    expected = {name(i): [0, 0] for i in range(nodes)}  # cpu, pods
    for j, the_pod in present.items():
        totals = expected[the_pod["spec"]["nodeName"]]
        totals[0] += (j % 9 + 1) * 10
        totals[1] += 1
    arrays = cache.utilization(lnu_args())
    assert arrays is not None
    cpu, pods = arrays.column["cpu"], arrays.column["pods"]
    got = {
        n: [int(arrays.used[i, cpu]), int(arrays.used[i, pods])] for n, i in arrays.index.items()
    }
    assert got == expected


def test_a_quantity_beyond_int64_is_held_at_the_cap_not_an_error() -> None:
    """An informer's pod with ``cpu: 99999999999999999999`` (the API server stores it): before,
    ``np.array(..., int64)`` raised OverflowError in the handler, after the pod was indexed
    by label but before its usage was counted. Now it counts, at the cap (2^52 millicores), and
    the node is simply full."""
    cache = ClusterCache(policy=POLICY, now=lambda: NOW)
    cache.upsert_node(cycle_node(name(0)))
    huge = cycle_pod("huge", name(0), cpu="99999999999999999999", owners=[])
    cache.upsert_pod(huge)
    cache.upsert_pod(cycle_pod("small", name(0), cpu="100m", owners=[]))
    arrays = cache.utilization(lnu_args())
    assert arrays is not None
    row, cpu = arrays.index[name(0)], arrays.column["cpu"]
    assert int(arrays.used[row, cpu]) == 2**52 + 100
    cache.delete_pod(huge)
    arrays = cache.utilization(lnu_args())
    assert arrays is not None
    assert int(arrays.used[row, cpu]) == 100
