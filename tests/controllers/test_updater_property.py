"""Property: one updater loop never evicts more than its budget, the PDB or the rate limit allow.

For any replica count, ``--min-replicas``, ``--eviction-tolerance``, PodDisruptionBudget
(``disruptionsAllowed`` as the disruption controller wrote it) and ``--eviction-rate-limit`` /
``--eviction-rate-burst``, one ``run_once`` of the real loop — through the real client against
the in-process API server, whose eviction subresource enforces the PDB — evicts:

- nothing from a group below ``minReplicas``;
- at most upstream's budget, ``max(int(replicas × tolerance), 1)`` (the at-least-one rule);
- at most ``disruptionsAllowed`` (the loop only evicts through the Eviction API, so a PDB
  cannot be bypassed);
- at most ``burst`` when rate-limited (the bucket starts full and no time passes in one loop).
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.kube.client import connect
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.runner import SimulationClientClock

from .test_recommender_loop import NAMESPACE, START, Cluster
from .test_updater_loop import Updater, live_pods, pdb, run, start_updater, status_lease, web


@asynccontextmanager
async def _cluster() -> AsyncIterator[Cluster]:
    clock = VirtualClock(START)
    with tempfile.TemporaryDirectory() as tmp:
        async with ApiServer(clock=clock, bookmark_interval=3600.0, seed=3) as api:
            api.store.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            )
            kubeconfig = Path(tmp) / "kubeconfig"
            api.write_kubeconfig(kubeconfig)
            client = await connect(
                kubeconfig=kubeconfig,
                clock=SimulationClientClock(clock),
                registry=CollectorRegistry(),
                rng=random.Random(0),
            )
            built = Cluster(api=api, client=client, clock=clock)
            try:
                yield built
            finally:
                for informers in built.loops:
                    await informers.stop()
                await client.close()


async def _one_loop(
    *,
    replicas: int,
    min_replicas: int,
    tolerance: float,
    disruptions_allowed: int | None,
    rate: tuple[float, int] | None,
) -> int:
    async with _cluster() as cluster:
        web(cluster, replicas=replicas)
        if disruptions_allowed is not None:
            pdb(cluster, disruptions_allowed=disruptions_allowed)
        status_lease(cluster, renewed_ago=timedelta(seconds=5))
        rate_limit, burst = rate if rate is not None else (-1.0, 1)
        updaters: list[Updater] = []
        updater = await start_updater(
            cluster,
            updaters,
            UpdaterSettings(
                status_lease_namespace=NAMESPACE,
                min_replicas=min_replicas,
                eviction_tolerance=tolerance,
                eviction_rate_limit=rate_limit,
                eviction_rate_burst=burst,
            ),
        )
        try:
            await run(cluster, updater)
            evicted = len(updater.loop.evicted)
            assert len(live_pods(cluster)) == replicas - evicted
            return evicted
        finally:
            await updater.events.close()


@settings(max_examples=12, deadline=None)
@given(
    replicas=st.integers(1, 6),
    min_replicas=st.integers(1, 4),
    tolerance=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
    disruptions_allowed=st.none() | st.integers(0, 6),
    rate=st.none() | st.tuples(st.sampled_from([0.5, 1.0]), st.integers(1, 3)),
)
def test_one_loop_never_exceeds_any_budget(
    replicas: int,
    min_replicas: int,
    tolerance: float,
    disruptions_allowed: int | None,
    rate: tuple[float, int] | None,
) -> None:
    evicted = asyncio.run(
        _one_loop(
            replicas=replicas,
            min_replicas=min_replicas,
            tolerance=tolerance,
            disruptions_allowed=disruptions_allowed,
            rate=rate,
        )
    )
    if replicas < min_replicas:
        assert evicted == 0
        return
    budget = max(int(replicas * tolerance), 1)
    assert evicted <= budget
    if disruptions_allowed is not None:
        assert evicted <= disruptions_allowed
    if rate is not None:
        assert evicted <= rate[1]
    if disruptions_allowed is None and rate is None:
        assert evicted == budget  # the budget is used, not just respected
