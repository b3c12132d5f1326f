"""The recommender lists the cached checkpoints only in the iterations that collect them.

Upstream's ``GarbageCollectCheckpoints`` lists the checkpoints (and every VPA) when it runs,
once ``--checkpoints-gc-interval`` (10m) has passed since the last collection
(``time.Since(lastCheckpointGC) > checkpointsGCInterval``; start-up counts as a collection);
the loop's snapshot reads them only then (``RecommenderLoop.checkpoint_listings``).
"""

from __future__ import annotations

from tests.controllers.vpa.checkpoint.test_checkpoint_store import names, upstream_checkpoint
from tests.controllers.vpa.recommender.test_recommender_loop import Cluster, cluster

__all__ = ["cluster"]  # the fixture, re-exported for pytest


async def test_checkpoints_are_listed_only_when_collected(cluster: Cluster) -> None:
    cluster.deployment("web")
    cluster.vpa("web")
    cluster.api.store.create(upstream_checkpoint("gone", "app"))
    loop = await cluster.recommender()
    await cluster.run(loop)  # t = 0: start-up, the GC clock starts
    assert loop.checkpoint_listings == 0
    # a minute apart: t = 60 … 600 s; 600 s is not more than the interval
    for _ in range(10):
        await cluster.advance(60)
        await cluster.run(loop)
    assert loop.checkpoint_listings == 0
    assert "gone-app" in names(cluster.checkpoints())
    await cluster.advance(60)  # t = 660 s > 600 s: this iteration collects
    await cluster.run(loop)
    assert loop.checkpoint_listings == 1
    assert "gone-app" not in names(cluster.checkpoints())  # the orphan is collected
    # the next collection is due more than 600 s after 660 s
    for _ in range(10):
        await cluster.advance(60)
        await cluster.run(loop)
    assert loop.checkpoint_listings == 1
    await cluster.advance(60)
    await cluster.run(loop)
    assert loop.checkpoint_listings == 2
