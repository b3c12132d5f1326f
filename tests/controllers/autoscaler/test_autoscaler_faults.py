"""The cluster autoscaler holds under faults (issue 27, items 1-3), on the simulated cluster:
the in-process API server, the Cluster API controllers and the real client.

* ``--max-nodes-total`` counts the nodes still booting (upstream's orchestrator caps
  ``len(readyNodes) + len(upcomingNodes)``);
* a new leader, or a restarted process, sees a scale-up in flight from the node groups' target
  sizes against their registered nodes (``GetUpcomingNodes`` over every group), not from the
  scale-up requests only the process that made them remembers;
* a ``/scale`` write the API server never answers does not hold the loop: it is given up at
  the iteration's write deadline (on an injected clock here) and counted as done.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from kubescale.base.clock import VirtualClock
from kubescale.base.tasks import cancel_and_wait
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    AutoscalerSettings,
    NodeGroupDefaults,
)
from kubescale.controllers.autoscaler.scaleup.scale_up import ScaleUpResult
from kubescale.kube.resources import MACHINE_DEPLOYMENTS, MACHINES
from kubescale.sim.apiserver.request_log import RequestRecord
from kubescale.sim.cluster.node_groups import MachineDeploymentGroup

from .sim_harness import START, SimCluster, app_deployment, sim_cluster, template

FAST = AutoscalerSettings(
    initial_node_group_backoff_duration=timedelta(minutes=2),
    node_defaults=NodeGroupDefaults(max_node_provision_time=timedelta(minutes=3)),
)


def replicas(cluster: SimCluster, name: str) -> int:
    md = cluster.api.store.peek(MACHINE_DEPLOYMENTS, name, "default")
    return -1 if md is None else int(md["spec"]["replicas"])


def messages(cluster: SimCluster, reason: str) -> list[str]:
    return [e["message"] for e in cluster.events_with(reason)]


def counts(cluster: SimCluster, reason: str) -> dict[str, int]:
    """Message → how many times (the recorder counts a repeated event in ``count``)."""
    return {e["message"]: int(e.get("count", 1)) for e in cluster.events_with(reason)}


def machines(cluster: SimCluster) -> list[dict[str, Any]]:
    return cluster.api.store.list(MACHINES, namespace="default")


# ---- item 1: --max-nodes-total counts upcoming nodes ------------------------------------------


def pool(name: str, label: str, *, replicas: int) -> MachineDeploymentGroup:
    # 4-cpu machines that take 10 minutes to boot: every node asked for stays upcoming
    return MachineDeploymentGroup(
        name=name,
        template=template("c4", "4", "16Gi", 0.2, labels={"pool": label}),
        min_size=0,
        max_size=20,
        replicas=replicas,
        provisioning_delay=600,
    )


async def test_max_nodes_total_counts_the_nodes_still_booting(tmp_path: Path) -> None:
    # Cap 10. Pool a has 1 node; each pod wants 3 of a node's 4 cpus, so one pod per node:
    # "wa" (10 pods, pool a) needs 9 more nodes of a, "wb" (9 pods, pool b) 9 nodes of b.
    # First scale-up: 9 nodes (1 ready + 9 ≤ 10). From then on upcoming = 9, so upstream's cap
    # is 10 − (1 ready + 9 upcoming) = 0: nothing more. Counting ready nodes only, the second
    # scan adds 10 − 1 = 9 more for the other pool: 19 nodes.
    settings = replace(FAST, max_nodes_total=10)
    async with sim_cluster(
        tmp_path,
        machine_deployments=[pool("pool-a", "a", replicas=1), pool("pool-b", "b", replicas=0)],
        settings=settings,
        objects=[
            app_deployment("wa", replicas=10, cpu="3", nodeSelector={"pool": "a"}),
            app_deployment("wb", replicas=9, cpu="3", nodeSelector={"pool": "b"}),
        ],
    ) as cluster:
        totals: list[int] = []
        for _ in range(12):  # 2 minutes of scans, all before any new node is up
            await cluster.step()
            totals.append(replicas(cluster, "pool-a") + replicas(cluster, "pool-b"))
        assert max(totals) == 10, totals  # 1 + 9, and never more
        assert totals[-1] == 10
        assert len(machines(cluster)) == 10
        # at the cap the binpacking limiter forbids new nodes (upstream's
        # ClusterCapacityThreshold: max − current ≤ 0 → −1): no option, nothing scaled
        decision = cluster.loop.report.scale_up
        assert decision is not None
        assert decision.result is ScaleUpResult.NO_OPTIONS_AVAILABLE


# ---- item 2: a new leader sees the scale-up in flight ------------------------------------------

SMALL = MachineDeploymentGroup(
    name="small",
    template=template("s2", "2", "8Gi", 0.10),
    min_size=1,
    max_size=6,
    replicas=1,
    provisioning_delay=120,
)


async def test_a_new_leader_does_not_repeat_a_scale_up_in_flight(tmp_path: Path) -> None:
    # 6 pods of 900m: two per 2-cpu node, so 3 nodes; the group has 1 → scale-up 1 → 3.
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=FAST,
        objects=[app_deployment("burst", replicas=6, cpu="900m")],
    ) as cluster:
        await cluster.run_until(lambda: replicas(cluster, "small") == 3, limit=60, what="scale-up")
        scale_ups = len(messages(cluster, "ScaledUpGroup"))
        # the leader changes while the two machines boot (they are up 120 s after the request)
        fresh = cluster.take_over()
        assert fresh.registry.scale_up_requests == {}  # it knows of no request
        for _ in range(6):
            await cluster.step()
            # target 3, 1 registered: 2 upcoming for anyone who reads the group
            assert replicas(cluster, "small") == 3
        assert len(messages(cluster, "ScaledUpGroup")) == scale_ups
        assert fresh.report.scale_up is None or not fresh.report.scaled_up
        # and the pods land on the two nodes when they come
        await cluster.run_until(
            lambda: len(cluster.running("burst")) == 6, limit=180, what="pods running"
        )
        assert replicas(cluster, "small") == 3


async def test_a_new_leader_removes_machines_that_never_register_once(tmp_path: Path) -> None:
    # The cloud has no stock beyond the first machine: the two machines of the scale-up never
    # come. The new leader first sees them when it takes over (t=20 s), so for it they are
    # unregistered from then; once max-node-provision-time (3m) has passed they are removed
    # (target 3 → 1) and, in the next iteration, the group is scaled up again for the pods still
    # pending (1 → 3, new machines) — once. Raising the size back in the iteration that removed
    # them undid the removal before Cluster API deleted the marked machines, so the same two
    # machines were removed and re-added every loop.
    starved = replace(SMALL, stock=1)
    async with sim_cluster(
        tmp_path,
        machine_deployments=[starved],
        settings=FAST,
        objects=[app_deployment("burst", replicas=6, cpu="900m")],
    ) as cluster:
        await cluster.run_until(lambda: replicas(cluster, "small") == 3, limit=60, what="scale-up")
        first = {m["metadata"]["name"] for m in machines(cluster)}
        cluster.take_over()
        sizes: list[int] = []
        for _ in range(6 * 4):  # 4 minutes
            await cluster.step()
            sizes.append(replicas(cluster, "small"))
        assert max(sizes) == 3, sizes  # the scale-up in flight is never repeated on top
        assert 1 in sizes, sizes  # the machines that never came were removed
        # each removal once (the recorder counts repeats of the same event in "count")
        removed = counts(cluster, "DeleteUnregistered")
        assert len(removed) == 2, removed
        assert set(removed.values()) == {1}, removed
        # "size set to 3 instead of 1": the first leader's scale-up and the one retry
        retried = counts(cluster, "ScaledUpGroup")
        assert retried == {
            "Scale-up: setting group MachineDeployment/default/small size to 3 instead of 1 "
            "(max: 6)": 2,
            "Scale-up: group MachineDeployment/default/small size set to 3 instead of 1 "
            "(max: 6)": 2,
        }
        now = {m["metadata"]["name"] for m in machines(cluster)}
        assert len(now) == 3
        assert len(now & first) == 1  # only the machine that came; two new ones wait for stock


# ---- item 3: a hung /scale write does not hold the loop ----------------------------------------


def scale_patches(cluster: SimCluster) -> int:
    return cluster.api.requests.count(
        verb="patch", resource="machinedeployments", subresource="scale"
    )


async def test_a_hung_scale_write_is_given_up_at_the_iterations_deadline(
    tmp_path: Path,
) -> None:
    # The API server takes every /scale patch and never answers (an hour's delay). Without a
    # deadline the client waits 30 s per try, 5 tries: the loop stands still for 150 s, then the
    # group is backed off as if the write had failed. With one, the write is given up when the
    # iteration's deadline (--scan-interval, 10 s, on an injected clock here) passes, and it
    # counts as done: the loop finishes the iteration at once, and the next one reads the size
    # back from the object.
    write_clock = VirtualClock(START)
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=FAST,
        objects=[app_deployment("burst", replicas=6, cpu="900m")],
        write_clock=write_clock,
    ) as cluster:
        group = "MachineDeployment/default/small"
        cluster.api.faults.add(
            verb="patch", resource="machinedeployments/scale", status=0, delay=3600, count=None
        )
        arrived = asyncio.Event()

        def observe(record: RequestRecord) -> None:
            if (record.verb, record.subresource) == ("patch", "scale"):
                arrived.set()

        cluster.api.context.observers.append(observe)
        step: asyncio.Future[None] | None = None
        for _ in range(6):  # the pods are pending and old enough within a few scans
            step = asyncio.ensure_future(cluster.step())
            waiter = asyncio.ensure_future(arrived.wait())
            await asyncio.wait({step, waiter}, return_when=asyncio.FIRST_COMPLETED)
            await cancel_and_wait(waiter)
            if arrived.is_set():
                break
            await step
        assert step is not None
        assert scale_patches(cluster) == 1
        assert not step.done()  # the loop waits for the server's answer
        await write_clock.advance(FAST.scan_interval)  # the iteration's deadline passes
        await step  # and the loop goes on
        assert scale_patches(cluster) == 1  # sent once: not retried, not repeated
        # counted as done: the scale-up 1 → 3 is reported and registered, nothing backs off
        assert cluster.loop.report.scaled_up == [(group, 1, 3)]
        assert cluster.loop.registry.scale_up_requests[group].increase == 2
        assert cluster.loop.registry.backoff.status(group, cluster.now) is None
        assert messages(cluster, "FailedToScaleUpGroup") == []
        assert replicas(cluster, "small") == 1  # the write never landed
        # The server answers again. The next iteration reads the size back from the object
        # (still 1: proven not done) and makes the scale-up once more — one more patch.
        cluster.api.faults.clear()
        await cluster.step()
        assert replicas(cluster, "small") == 3
        assert scale_patches(cluster) == 2
        await cluster.run_until(
            lambda: len(cluster.running("burst")) == 6, limit=180, what="pods running"
        )
        assert scale_patches(cluster) == 2
