"""The updater's CPU startup unboost (gate ``CPUStartupBoost``) against the in-process API
server, through the real client (upstream ``RunBoostWorker`` / ``CanUnboost`` /
``GetExpiredStartupCPUBoostAnnotations``, reference §1.5 and §3.2).

Four pods of ``web`` were boosted at admission: each runs with cpu 400m / limit 800m and carries
``vpaCpuStartupBoost/app`` recording its original cpu 100m / limit 200m. The pods became Ready
at the cluster's start; the boost lasts ``durationSeconds: 60``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kubescale.controllers.vpa.updater.update_priority import UpdateSettings
from kubescale.controllers.vpa.updater.updater_config import UpdaterSettings
from kubescale.kube.resources import PODS
from tests.controllers.vpa.recommender.test_recommender_loop import NAMESPACE, Cluster, cluster
from tests.controllers.vpa.updater.test_updater_loop import (
    RECOMMENDATION,
    Updater,
    event_reasons,
    run,
    start_updater,
    status_lease,
    updaters,
)

__all__ = ["cluster", "updaters"]  # the fixtures, re-exported for pytest

ORIGINAL = '{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m"}}'
GATED = UpdaterSettings(
    status_lease_namespace=NAMESPACE, priority=UpdateSettings(cpu_startup_boost=True)
)


def boosted_web(cluster: Cluster, *, mode: str, recommendation: bool, replicas: int = 4) -> None:
    deployment = cluster.deployment("web")
    replica_set = cluster.replica_set("web-7d9f", owner=deployment)
    cluster.api.store.update({**replica_set, "spec": {**replica_set["spec"], "replicas": replicas}})
    ready_at = cluster.now.strftime("%Y-%m-%dT%H:%M:%SZ")
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": replica_set["metadata"]["name"],
        "uid": replica_set["metadata"]["uid"],
        "controller": True,
    }
    for index in range(replicas):
        container = {
            "name": "app",
            "image": "app",
            "resources": {
                "requests": {"cpu": "400m", "memory": "100Mi"},
                "limits": {"cpu": "800m"},
            },
        }
        created = cluster.api.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"web-{index}",
                    "namespace": NAMESPACE,
                    "labels": {"app": "web"},
                    "ownerReferences": [owner],
                    "annotations": {"vpaCpuStartupBoost/app": ORIGINAL},
                },
                "spec": {"nodeName": "node-1", "containers": [container]},
            }
        )
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "image": "app",
                    "imageID": "",
                    "state": {"running": {"startedAt": ready_at}},
                }
            ],
        }
        cluster.api.store.update_status({**created, "status": status})
    boost = {"cpu": {"type": "Factor", "factor": 4, "durationSeconds": 60}}
    vpa = cluster.vpa("web", spec={"updatePolicy": {"updateMode": mode}, "startupBoost": boost})
    if recommendation:
        cluster.api.store.update_status({**vpa, "status": {"recommendation": RECOMMENDATION}})


def stored(cluster: Cluster, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.api.store.get(PODS, name, NAMESPACE)
    return found


async def test_nothing_happens_before_the_boost_expires(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    boosted_web(cluster, mode="Recreate", recommendation=True)
    updater = await start_updater(cluster, updaters, GATED)
    await cluster.advance(60)  # exactly 60 s after Ready: not past the duration
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    await run(cluster, updater)
    # The loop ran (not skipped for a stale status), and boosted pods are neither unboosted
    # yet nor evicted, though their memory (100Mi) is below the lower bound (200Mi).
    assert updater.loop.skipped_stale_status == 0
    assert updater.loop.resized == []
    assert updater.loop.evicted == []


async def test_an_expired_boost_is_lowered_in_place_to_the_recommendation(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    # 61 s after Ready with durationSeconds 60: expired. Mode Recreate with a recommendation:
    # the resize applies what admission would give without the boost -- the target 500m /
    # 256Mi, limit 800m x 500m / 400m = 1000m = "1" -- within the budget: int(4 x 0.5) = 2 of
    # 4 pods this loop; the boost annotation of each resized pod is removed.
    boosted_web(cluster, mode="Recreate", recommendation=True)
    updater = await start_updater(cluster, updaters, GATED)
    await cluster.advance(61)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    await run(cluster, updater)
    assert updater.loop.evicted == []
    assert len(updater.loop.resized) == 2
    for pod_id in updater.loop.resized:
        resized = stored(cluster, pod_id.partition("/")[2])
        assert resized["spec"]["containers"][0]["resources"] == {
            "requests": {"cpu": "500m", "memory": "256Mi"},
            "limits": {"cpu": "1"},
        }
        assert "vpaCpuStartupBoost/app" not in resized["metadata"]["annotations"]
    assert event_reasons(cluster) == [("Pod", "InPlaceResizedByVPA")] * 2


async def test_mode_off_restores_the_original_cpu_from_the_annotation(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    # Mode Off and no recommendation: the boost-only VPA is still handled; the unboost restores
    # cpu 100m / limit 200m from the annotation (memory untouched).
    boosted_web(cluster, mode="Off", recommendation=False)
    updater = await start_updater(cluster, updaters, GATED)
    await cluster.advance(61)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    await run(cluster, updater)
    assert len(updater.loop.resized) == 2
    resized = stored(cluster, updater.loop.resized[0].partition("/")[2])
    assert resized["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "100m", "memory": "100Mi"},
        "limits": {"cpu": "200m"},
    }


async def test_without_the_gate_boosted_pods_are_ordinary_pods(
    cluster: Cluster, updaters: list[Updater]
) -> None:
    # Gate off: a boost-only VPA in mode Off is not acted on at all.
    boosted_web(cluster, mode="Off", recommendation=False)
    updater = await start_updater(cluster, updaters)
    await cluster.advance(61)
    status_lease(cluster, renewed_ago=timedelta(seconds=5))
    await run(cluster, updater)
    assert updater.loop.resized == []
    assert stored(cluster, "web-0")["metadata"]["annotations"]["vpaCpuStartupBoost/app"] == ORIGINAL
