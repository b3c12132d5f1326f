"""The VPA recommender's loop with a pod far larger than usual (issue 29): 10,000 labels.

kube-apiserver puts no limit on the number of labels (each key and value is validated, not
their count), so such a pod is a legal object. The recommender keys its aggregates by the pod's
label set (upstream ``AggregateStateKey``: namespace, container, labels); the pod must be fed,
matched by its VPA's selector, recommended for and checkpointed like any other, next to a plain
pod of the same Deployment.
"""

from __future__ import annotations

from kubescale.kube.resources import PODS

from .test_recommender_loop import NAMESPACE, Cluster, cluster, recommendation

__all__ = ["cluster"]  # the fixture, re-exported for pytest

LABELS = {f"label-{index:05d}": f"value-{index:05d}" for index in range(10_000)}


async def test_a_pod_with_10000_labels_is_recommended_for(cluster: Cluster) -> None:
    deployment = cluster.deployment("web")
    replica_set = cluster.replica_set("web-7d9f", owner=deployment)
    for name, labels in (("web-1", {"app": "web", **LABELS}), ("web-2", {"app": "web"})):
        cluster.pod(
            name,
            labels=labels,
            containers={"app": {"cpu": "500m", "memory": "512Mi"}},
            owner=replica_set,
        )
        cluster.usage(name, {"app": {"cpu": "1", "memory": "1000000000"}})
    assert len(cluster.api.store.get(PODS, "web-1", NAMESPACE)["metadata"]["labels"]) == 10_001
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    assert loop.feeder.state.pod_keys() == [(NAMESPACE, "web-1"), (NAMESPACE, "web-2")]
    (app,) = recommendation(cluster.get_vpa("web"))
    assert app["containerName"] == "app"
    assert app["target"]["cpu"]  # both pods' samples recommend a target
    (checkpoint,) = cluster.checkpoints()
    # Two pods' first CPU samples, one per label set, merged into the VPA's one container.
    assert checkpoint["status"]["totalSamplesCount"] == 2
    # A second iteration with the huge pod still there works the same way.
    await cluster.advance(60)
    await cluster.run(loop)
    assert recommendation(cluster.get_vpa("web"))
