"""Bad input at scale, cache by cache (issue 29): the largest objects kube-apiserver accepts,
through the real client and the shared informer set, against the in-process API server.

What kube-apiserver accepts (the in-process server keeps the same rules):

- annotations: keys + values at most ``TotalAnnotationSizeLimitB`` = 256 KiB = 262,144 bytes
  (``ValidateAnnotationsSize``); a 1 MiB annotation is refused with 422
  (``tests/kube/test_large_objects.py``). The largest accepted single annotation under
  kubectl's key ``kubectl.kubernetes.io/last-applied-configuration`` (48 bytes) has a value of
  262,144 - 48 = 262,096 bytes.
- labels: every key a qualified name (name part at most 63 characters), every value at most 63
  characters (``ValidateLabels``: a 64-character value is refused with 422); their number is
  not limited. The object as a whole is bounded by etcd's request limit (1.5 MiB =
  1,572,864 bytes, ``--max-request-bytes``) and kube-apiserver's 3 MiB body limit: 10,000
  labels with 63-character keys and values are 10,000 x (63 + 63 + 6 JSON bytes) = 1,320,000
  bytes, under both — the issue's 10,000 labels at their largest.

Each projected cache (``kubescale.objects.projection.PROJECTIONS``) must not hold the unread
last-applied annotation: the retained size of the cached object, measured by :func:`deep_size`
(every distinct dict, list, string and number reachable from it, ``sys.getsizeof`` each), stays
under 16 KiB when the object carries 262,096 bytes of it. The HPA and VPA caches keep whole
objects by design (the HPA controller writes its cached object back), so they hold it: one
copy, bounded by the server's 256 KiB cap.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import pytest

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.informer import EventHandlers, InformerSettings
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import (
    DAEMON_SETS,
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    JOBS,
    NAMESPACES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    STATEFUL_SETS,
    VERTICAL_POD_AUTOSCALERS,
    ResourceType,
)
from kubescale.kube.watch_stream import MAX_WATCH_EVENT_BYTES
from kubescale.objects.projection import projection_for
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

from .conftest import FAST_INFORMER
from .informer_checks import eventually
from .objects import PAUSE_POD

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
LIMIT = 256 * (1 << 10)  # TotalAnnotationSizeLimitB = 262,144 bytes
LARGEST = {LAST_APPLIED: "x" * (LIMIT - len(LAST_APPLIED))}  # 48 + 262,096 = 262,144: accepted
PROJECTED_BOUND = 16 * 1024
"""Retained bytes a small projected object stays under (each is a few KiB; the annotation alone
would be 262,096 bytes of string plus its header)."""

APP = {"app": "web"}
TEMPLATE = builders.workloads.pod_template(labels=APP)


def deep_size(value: Any) -> int:
    """Bytes retained by ``value``: ``sys.getsizeof`` of every distinct container, string and
    number reachable from it (each counted once, shared ones too)."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


def _named(body: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    body["metadata"]["annotations"] = dict(annotations)
    return body


BODIES: dict[str, tuple[ResourceType, Callable[[dict[str, str]], dict[str, Any]]]] = {
    "pods": (PODS, lambda a: PAUSE_POD(name="big", annotations=a)),
    "nodes": (NODES, lambda a: builders.nodes.node(name="big", annotations=a)),
    "namespaces": (NAMESPACES, lambda a: builders.meta.namespace(name="big", annotations=a)),
    "replicationcontrollers": (
        REPLICATION_CONTROLLERS,
        lambda a: builders.workloads.workload(
            "ReplicationController",
            name="big",
            annotations=a,
            api_version="v1",
            spec={"selector": APP, "template": TEMPLATE},
        ),
    ),
    "replicasets": (
        REPLICA_SETS,
        lambda a: builders.workloads.replica_set(
            name="big", annotations=a, match_labels=APP, template=TEMPLATE
        ),
    ),
    "deployments": (
        DEPLOYMENTS,
        lambda a: builders.workloads.deployment(
            name="big", annotations=a, match_labels=APP, template=TEMPLATE
        ),
    ),
    "statefulsets": (
        STATEFUL_SETS,
        lambda a: builders.workloads.stateful_set(
            name="big", annotations=a, match_labels=APP, template=TEMPLATE
        ),
    ),
    "daemonsets": (
        DAEMON_SETS,
        lambda a: builders.workloads.daemon_set(
            name="big", annotations=a, match_labels=APP, template=TEMPLATE
        ),
    ),
    "jobs": (
        JOBS,
        lambda a: builders.workloads.job(
            name="big",
            annotations=a,
            template=builders.workloads.pod_template(spec={"restartPolicy": "Never"}),
        ),
    ),
    "poddisruptionbudgets": (
        POD_DISRUPTION_BUDGETS,
        lambda a: _named(builders.pdbs.pdb(name="big", match_labels=APP, min_available=1), a),
    ),
    "horizontalpodautoscalers": (
        HORIZONTAL_POD_AUTOSCALERS,
        lambda a: builders.hpas.hpa(
            name="big",
            annotations=a,
            target=builders.hpas.scale_target_ref(name="web"),
            min_replicas=1,
            max_replicas=3,
        ),
    ),
    "verticalpodautoscalers": (
        VERTICAL_POD_AUTOSCALERS,
        lambda a: builders.vpas.vpa(name="big", annotations=a),
    ),
}


@pytest.mark.parametrize("collection", sorted(BODIES))
async def test_the_largest_accepted_annotation_is_not_held_by_projected_caches(
    apiserver: ApiServer, client: KubeClient, collection: str
) -> None:
    resource, body = BODIES[collection]
    namespace = "default" if resource.namespaced else None
    await client.create(resource, body(LARGEST), namespace=namespace)
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    informer = informers.informer(resource)
    informers.start()
    try:
        assert await informer.wait_synced(within=10)
        cached = informer.lister.get("big", namespace)
        assert cached is not None
        size = deep_size(cached)
        if projection_for(resource.group, resource.kind) is not None:
            assert LAST_APPLIED not in cached["metadata"].get("annotations", {})
            assert size < PROJECTED_BOUND, f"{collection}: {size} bytes retained"
        else:
            # whole objects: the one copy of the 262,096-byte value, no more (bounded by the
            # server's 256 KiB cap on annotations plus the object's own few KiB).
            assert cached["metadata"]["annotations"] == LARGEST
            assert LIMIT < size < LIMIT + PROJECTED_BOUND, f"{collection}: {size} bytes"
    finally:
        await informers.stop()


def _many_labels(count: int) -> dict[str, str]:
    """``count`` labels at their largest: 63-character keys and 63-character values."""
    return {
        f"label-{index:05d}".ljust(63, "k"): f"value-{index:05d}".ljust(63, "v")
        for index in range(count)
    }


@pytest.mark.parametrize(
    ("labels", "refused"),
    [
        # 63 characters: the largest accepted value (IsValidLabelValue: at most 63).
        ({"app": "v" * 63}, None),
        # 64 characters: refused, the value named.
        (
            {"app": "v" * 64},
            f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 characters',
        ),
        # a name part of 64 characters: refused (IsQualifiedName), the key named.
        (
            {"k" * 64: "v"},
            f'metadata.labels: Invalid value: "{"k" * 64}": '
            "name part must be no more than 63 characters",
        ),
    ],
)
async def test_label_keys_and_values_are_validated_as_kube_apiserver_does(
    client: KubeClient, labels: dict[str, str], refused: str | None
) -> None:
    if refused is None:
        created = await client.create(PODS, PAUSE_POD(name="p", labels=labels), namespace="default")
        assert created["metadata"]["labels"] == labels
        return
    with pytest.raises(KubeApiError) as error:
        await client.create(PODS, PAUSE_POD(name="p", labels=labels), namespace="default")
    assert error.value.code == 422
    assert error.value.message == f'Pod "p" is invalid: {refused}'


async def test_ten_thousand_largest_labels_are_cached_once_and_the_watch_streams_on(
    apiserver: ApiServer, client: KubeClient
) -> None:
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    informer = informers.informer(PODS)
    order: list[str] = []
    informer.add_handlers(
        EventHandlers(on_add=lambda obj: order.append(str(obj["metadata"]["name"])))
    )
    informers.start()
    try:
        assert await informer.wait_synced(within=10)
        labels = _many_labels(10_000)
        await client.create(PODS, PAUSE_POD(name="many-labels", labels=labels), namespace="default")
        after = await client.create(PODS, PAUSE_POD(name="after"), namespace="default")
        # the mechanism: the event after the big one arrives on the same watch, in order
        await eventually(lambda: informer.lister.get("after", "default") is not None)
        assert order == ["many-labels", "after"]
        assert (informer.stats.lists, informer.stats.errors) == (1, 0)
        assert informer.resource_version == after["metadata"]["resourceVersion"]
        cached = informer.lister.get("many-labels", "default")
        assert cached is not None
        assert cached["metadata"]["labels"] == labels
        # bounded cost: per label, the key and value strings (each 63 ASCII characters:
        # sys.getsizeof = 49 + 63 = 112 bytes) plus the dict's slot (a dict of 10,000 entries
        # is sys.getsizeof ~295 KiB, ~30 bytes per entry): ~254 bytes a label; 400 allows for
        # the rest of the pod, and a second copy of the labels (~2.5 MB) would exceed it.
        assert deep_size(cached) < 400 * 10_000
    finally:
        await informers.stop()


async def test_a_watch_event_over_the_cap_ends_the_watch_and_the_informer_relists(
    apiserver: ApiServer, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    # A cap of 64 KiB (the default is 8 MiB, above anything kube-apiserver stores) against a
    # pod carrying 262,096 bytes of annotation: its ADDED line is ~262 KB > 65,536.
    cap = 64 * 1024
    settings = dataclasses.replace(FAST_INFORMER, max_watch_event_bytes=cap)
    informers = InformerSet(client=client, settings=settings)
    informer = informers.informer(PODS)
    informers.start()
    try:
        assert await informer.wait_synced(within=10)
        await client.create(PODS, PAUSE_POD(name="big", annotations=LARGEST), namespace="default")
        await client.create(PODS, PAUSE_POD(name="after"), namespace="default")
        # the watch read at most the cap (then dropped the line), the informer re-listed: the
        # list is not line-split, so both pods arrive from it, projected.
        await eventually(lambda: informer.lister.get("after", "default") is not None)
        assert informer.stats.oversized_events >= 1
        assert informer.stats.lists >= 2
        big = informer.lister.get("big", "default")
        assert big is not None
        assert LAST_APPLIED not in big["metadata"]["annotations"]
        assert informer.synced
    finally:
        await informers.stop()
    record = next(r for r in caplog.records if r.getMessage().startswith("watch event too"))
    assert record.getMessage() == "watch event too large; dropped the watch, re-listing"
    fields = record.__dict__["fields"]
    assert fields["informer"] == informer.name
    assert fields["limit_bytes"] == cap
    assert fields["received_bytes"] > cap


def test_the_default_watch_event_cap_is_above_anything_kube_apiserver_stores() -> None:
    # etcd's request limit 1.5 MiB (1,572,864) < kube-apiserver's body limit 3 MiB (3,145,728)
    # < the cap 8 MiB (8,388,608)
    assert 1_572_864 < 3 * 1024 * 1024 < MAX_WATCH_EVENT_BYTES == 8 * 1024 * 1024
    assert InformerSettings().max_watch_event_bytes == MAX_WATCH_EVENT_BYTES
    with pytest.raises(ValueError, match="max_watch_event_bytes must be positive"):
        InformerSettings(max_watch_event_bytes=0)
