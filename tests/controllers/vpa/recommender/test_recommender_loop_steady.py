"""A steady ``RunOnce`` does no per-pod work (issue 29), against the in-process API server.

Nothing changed since the last iteration (no pod event, metrics-server's window did not move):
``LoadPods`` feeds no pod (:mod:`.pod_feed`), ``LoadMetrics`` lists every PodMetrics (upstream's
algorithm) but parses no usage or timestamp (:class:`MetricsReader`: the CPU samples are
refused by their time, the memory ones read from the memo), and ``MaintainCheckpoints`` writes
every VPA's checkpoints without walking the pods (the model's kept index). Counted by the
counters the code exposes, never by time.
"""

from __future__ import annotations

from tests.controllers.vpa.recommender.test_recommender_loop import (
    Cluster,
    cluster,
    web_with_one_pod,
)

__all__ = ["cluster"]


async def test_a_steady_iteration_does_no_per_pod_work(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    for name in ("web-2", "web-3"):
        cluster.pod(
            name,
            labels={"app": "web"},
            containers={"app": {"cpu": "500m", "memory": "512Mi"}, "log": {"cpu": "10m"}},
        )
        cluster.usage(name, {"app": {"cpu": "1", "memory": "1000000000"}, "log": {"cpu": "5m"}})
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    feeder, state = loop.feeder, loop.feeder.state
    # First iteration: 3 pods fed; 1 timestamp + usage texts "1" (CPU), "1000000000"
    # (memory), "5m" (CPU), "0" (memory of "log": none reported, read as "0") parsed once.
    assert feeder.pods_fed == 3
    assert feeder.metrics_reader.parsed == 5
    written = [c["status"]["lastUpdateTime"] for c in cluster.checkpoints()]
    assert len(written) == 2  # one checkpoint per container name: app, log

    await cluster.advance(60)
    await cluster.run(loop)
    assert loop.iterations == 2
    assert feeder.pods_fed == 0
    assert feeder.metrics_reader.parsed == 5  # nothing parsed again
    assert state.containers_walked == 0  # the checkpoint pass read the kept index
    # ... and the checkpoints were still written, at the new time.
    assert sorted(c["status"]["lastUpdateTime"] for c in cluster.checkpoints()) == [
        "2026-01-05T00:01:00Z",
        "2026-01-05T00:01:00Z",
    ]
