"""OOMs from pod status transitions and ``Evicted`` events (upstream ``input/oom/observer.go``).

Table tests of the transitions upstream counts (and those it must not), then the two sources
end to end: a pod whose container becomes ``Terminated: OOMKilled`` in the API server, and an
``Evicted`` Event with memory annotations, each bump the VPA's memory target exactly as the
model's ``RecordOOM`` does with the same inputs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.oom_observer import (
    OomInfo,
    OomObserver,
    ooms_from_eviction_event,
    ooms_from_pod_update,
)
from kubescale.kube.resources import PODS
from kubescale.objects.event import Event
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import label_selector_from_set
from tests import builders
from tests.builders.meta import stored_as
from tests.controllers.vpa.recommender.test_recommender_loop import (
    NAMESPACE,
    START,
    Cluster,
    cluster,
    recommendation,
    web_with_one_pod,
)

__all__ = ["cluster"]  # the fixture, re-exported for pytest

FINISHED = "2026-01-05T00:01:00Z"
FINISHED_AT = datetime(2026, 1, 5, 0, 1, tzinfo=UTC)
RUNNING = {"running": {"startedAt": "2026-01-05T00:00:00Z"}}
OOM = {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": FINISHED}}
ERROR = {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": FINISHED}}
WAITING = {"waiting": {"reason": "CrashLoopBackOff"}}


def observed_pod(
    state: dict[str, Any],
    *,
    restarts: int = 0,
    last: dict[str, Any] | None = None,
    request: str | None = "512Mi",
    applied: str | None = None,
    name: str = "app",
) -> dict[str, Any]:
    """Pod ``ns/web-1`` with one container ``name`` requesting memory ``request`` (no
    requests when ``None``) and its status (``state``, ``restarts``, ``last``, the applied
    memory request): the table's columns over :func:`builders.pods.pod`."""
    status: dict[str, Any] = {"name": name, "restartCount": restarts, "state": state}
    if last is not None:
        status["lastState"] = last
    if applied is not None:
        status["resources"] = {"requests": {"memory": applied}}
    resources = {"requests": {"memory": request}} if request is not None else {}
    return builders.pods.pod(
        name="web-1",
        namespace="ns",
        containers=[builders.pods.container(name, resources=resources)],
        status={"containerStatuses": [status]},
        api_version=None,
    )


def oom(memory: int, *, at: datetime = FINISHED_AT, container: str = "app") -> OomInfo:
    return OomInfo(namespace="ns", pod="web-1", container=container, timestamp=at, memory=memory)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # Running → Terminated OOMKilled: an OOM at finishedAt with the request (512Mi).
        (observed_pod(RUNNING), observed_pod(OOM), [oom(536870912)]),
        # Already terminated by an OOM and still: the same OOM, not a new one.
        (observed_pod(OOM), observed_pod(OOM), []),
        # Terminated → Terminated OOMKilled with more restarts: a fast-failing container.
        (observed_pod(OOM, restarts=1), observed_pod(OOM, restarts=2), [oom(536870912)]),
        # Terminated by something else.
        (observed_pod(RUNNING), observed_pod(ERROR), []),
        # Running → Running, restarted, last state OOMKilled: the kubelet skipped Terminated.
        (observed_pod(RUNNING), observed_pod(RUNNING, restarts=1, last=OOM), [oom(536870912)]),
        # ... but Waiting (CrashLoopBackOff) → Running is the same OOM seen before.
        (
            observed_pod(WAITING, restarts=1, last=OOM),
            observed_pod(RUNNING, restarts=1, last=OOM),
            [],
        ),
        (
            observed_pod(WAITING, restarts=1, last=OOM),
            observed_pod(RUNNING, restarts=2, last=OOM),
            [],
        ),
        # Restarted without an OOM.
        (observed_pod(RUNNING), observed_pod(RUNNING, restarts=1, last=ERROR), []),
        # The memory is Quantity.Value(): rounded up to a whole byte.
        (observed_pod(RUNNING, request="1.5"), observed_pod(OOM, request="1.5"), [oom(2)]),
        # No request: 0 (the model then uses the container's peak).
        (observed_pod(RUNNING, request=None), observed_pod(OOM, request=None), [oom(0)]),
        # The resources the kubelet applied (status) win over the spec's.
        (observed_pod(RUNNING), observed_pod(OOM, applied="1Gi"), [oom(1073741824)]),
        # A previous OOM happened with the *old* pod's resources.
        (
            observed_pod(RUNNING, request="256Mi"),
            observed_pod(RUNNING, restarts=1, last=OOM, request="1Gi"),
            [oom(268435456)],
        ),
        # A container the old pod did not report is not compared.
        (observed_pod(RUNNING, name="other"), observed_pod(OOM), []),
    ],
)
def test_pod_transitions(old: dict[str, Any], new: dict[str, Any], expected: list[OomInfo]) -> None:
    assert ooms_from_pod_update(stored_as(old, Pod), stored_as(new, Pod)) == expected


def event(
    annotations: dict[str, str] | None, *, kind: str = "Pod", reason: str = "Evicted"
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "e1", "creationTimestamp": FINISHED}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "metadata": metadata,
        "reason": reason,
        "involvedObject": {"kind": kind, "namespace": "ns", "name": "web-1"},
    }


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {
                "offending_containers": "app",
                "offending_containers_usage": "700Mi",
                "starved_resource": "memory",
            },
            [oom(734003200)],
        ),
        # Several containers; only the memory-starved ones count.
        (
            {
                "offending_containers": "app,sidecar,log",
                "offending_containers_usage": "1Gi,200m,10Mi",
                "starved_resource": "memory,cpu,memory",
            },
            [oom(1073741824), oom(10485760, container="log")],
        ),
        # Lists of different lengths: the event is ignored.
        (
            {
                "offending_containers": "app,sidecar",
                "offending_containers_usage": "1Gi",
                "starved_resource": "memory,memory",
            },
            [],
        ),
        # An unparsable usage is skipped, the rest kept.
        (
            {
                "offending_containers": "app,sidecar",
                "offending_containers_usage": "lots,1Mi",
                "starved_resource": "memory,memory",
            },
            [oom(1048576, container="sidecar")],
        ),
        # No annotations at all: three empty lists, nothing.
        (None, []),
    ],
)
def test_eviction_events(annotations: dict[str, str] | None, expected: list[OomInfo]) -> None:
    assert ooms_from_eviction_event(stored_as(event(annotations), Event)) == expected


def test_only_evicted_events_of_pods_count() -> None:
    annotations = {
        "offending_containers": "app",
        "offending_containers_usage": "1Gi",
        "starved_resource": "memory",
    }
    assert ooms_from_eviction_event(stored_as(event(annotations, kind="Node"), Event)) == []
    assert ooms_from_eviction_event(stored_as(event(annotations, reason="Preempted"), Event)) == []


def test_the_buffer_keeps_order_and_drops_when_full() -> None:
    observer = OomObserver(capacity=2)
    for restarts in range(3):
        observer.on_pod_update(
            stored_as(observed_pod(OOM, restarts=restarts), Pod),
            stored_as(observed_pod(OOM, restarts=restarts + 1), Pod),
        )
    assert len(observer) == 2
    assert observer.dropped == 1
    assert observer.drain() == [oom(536870912), oom(536870912)]
    assert observer.drain() == []


# -- end to end ------------------------------------------------------------------------------


def _expected_memory_target(*, oom_memory: int, oom_at: datetime) -> str:
    """The model fed directly what the loop should have fed it (two loads of the same
    PodMetrics, then the OOM)."""
    state = ClusterState(config=RecommenderConfig())
    state.add_or_update_vpa(
        {
            "metadata": {"namespace": NAMESPACE, "name": "web"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        },
        selector=label_selector_from_set({"app": "web"}),
    )
    for _ in range(2):
        state.add_or_update_pod(
            namespace=NAMESPACE,
            name="web-1",
            labels={"app": "web"},
            phase="Running",
            containers={"app": {"cpu": 500, "memory": 536870912}},
            now=START,
        )
        for resource, usage in (("cpu", 1000), ("memory", 1000000000)):
            state.add_sample(
                namespace=NAMESPACE,
                pod="web-1",
                container="app",
                resource=resource,
                usage=usage,
                request=0,
                measure_start=START,
            )
    assert state.record_oom(
        namespace=NAMESPACE,
        pod="web-1",
        container="app",
        timestamp=oom_at,
        memory_request=oom_memory,
    )
    result = state.recommendation(namespace=NAMESPACE, name="web", now=oom_at)
    target: str = result.container_recommendations[0]["target"]["memory"]
    return target


async def test_an_oom_killed_container_bumps_the_memory_target(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    before = recommendation(cluster.get_vpa("web"))[0]["target"]["memory"]
    assert before == "1168723596"
    await cluster.advance(60)
    current = cluster.api.store.get(PODS, "web-1", NAMESPACE)
    status = current["status"]
    status["containerStatuses"][0]["state"] = OOM
    cluster.api.store.update_status({**current, "status": status})
    await cluster.run(loop)
    after = recommendation(cluster.get_vpa("web"))[0]["target"]["memory"]
    # max(request 512Mi, peak 1e9) = 1e9, bumped to max(+100Mi, ×1.2) = 1.2e9.
    assert after == _expected_memory_target(oom_memory=536870912, oom_at=FINISHED_AT)
    assert int(after) > 1_200_000_000


async def test_a_memory_eviction_event_bumps_the_memory_target(cluster: Cluster) -> None:
    await web_with_one_pod(cluster)
    cluster.vpa("web")
    loop = await cluster.recommender()
    await cluster.run(loop)
    await cluster.advance(60)
    cluster.api.store.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": "web-1.evicted",
                "namespace": NAMESPACE,
                "annotations": {
                    "offending_containers": "app",
                    "offending_containers_usage": "1100Mi",
                    "starved_resource": "memory",
                },
            },
            "reason": "Evicted",
            "type": "Warning",
            "message": "The node was low on resource: memory.",
            "involvedObject": {"kind": "Pod", "namespace": NAMESPACE, "name": "web-1"},
        }
    )
    await cluster.run(loop)
    after = recommendation(cluster.get_vpa("web"))[0]["target"]["memory"]
    # The usage, 1100Mi, is above the peak: 1153433600 × 1.2.
    assert after == _expected_memory_target(
        oom_memory=1153433600, oom_at=START + timedelta(seconds=60)
    )
    assert int(after) > 1_384_000_000
