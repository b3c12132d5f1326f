"""Objects far larger than usual, through the in-process API server and an informer (issue 29).

kube-apiserver's limits, which the in-process server keeps:

- ``ValidateAnnotationsSize`` (apimachinery ``pkg/api/validation/objectmeta.go``): the keys and
  values of an object's annotations total at most ``TotalAnnotationSizeLimitB`` = 256 KiB =
  262,144 bytes, else ``422 Invalid``: ``metadata.annotations: Too long: must have at most
  262144 bytes`` — so a 1 MiB annotation never reaches a watcher;
- labels have no count limit (each key and value is validated, not their number): a pod with
  10,000 labels is stored and streamed like any other.

The informer must take such objects in its stride: keep streaming the events after them (no
re-list, no error), hold each once (the cache and the handlers share the one decoded object)
and let it go when it is deleted.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.resources import PODS
from kubescale.sim.apiserver.server import ApiServer

from .conftest import FAST_INFORMER
from .informer_checks import eventually
from .objects import PAUSE_POD

LIMIT = 256 * (1 << 10)  # TotalAnnotationSizeLimitB
TOO_LONG = 'Pod "{name}" is invalid: metadata.annotations: Too long: must have at most 262144 bytes'


def annotated(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    body = PAUSE_POD(name=name)
    body["metadata"]["annotations"] = annotations
    return body


@pytest.mark.parametrize(
    ("annotations", "accepted"),
    [
        # key "a" (1 byte) + 262,143 bytes of value = 262,144: exactly the limit, accepted.
        ({"a": "x" * (LIMIT - 1)}, True),
        # one byte more: 262,145 > 262,144.
        ({"a": "x" * LIMIT}, False),
        # the total counts, not the largest: two of 131,072 + 2-byte keys = 262,148.
        ({"k1": "x" * (LIMIT // 2), "k2": "x" * (LIMIT // 2)}, False),
        # bytes, not characters: 87,382 three-byte "€" = 262,146 bytes + key 1 = 262,147.
        ({"a": "€" * 87_382}, False),
        # the case: a 1 MiB annotation.
        ({"a": "x" * (1 << 20)}, False),
    ],
)
async def test_annotations_over_256_kib_are_refused_as_kube_apiserver_does(
    client: KubeClient, annotations: dict[str, str], accepted: bool
) -> None:
    if accepted:
        created = await client.create(PODS, annotated("big", annotations), namespace="default")
        assert created["metadata"]["annotations"] == annotations
        return
    with pytest.raises(KubeApiError) as refused:
        await client.create(PODS, annotated("big", annotations), namespace="default")
    assert refused.value.code == 422
    assert refused.value.message == TOO_LONG.format(name="big")


async def test_an_update_past_the_annotation_limit_is_refused(client: KubeClient) -> None:
    await client.create(PODS, annotated("grows", {"a": "x" * (LIMIT - 1)}), namespace="default")
    with pytest.raises(KubeApiError) as refused:
        await client.patch(
            PODS, "grows", {"metadata": {"annotations": {"b": "y"}}}, namespace="default"
        )
    assert refused.value.code == 422
    assert refused.value.message == TOO_LONG.format(name="grows")


@pytest.fixture
async def informer(client: KubeClient) -> AsyncIterator[Informer[Any]]:
    inf: Informer[Any] = Informer(
        client=client, resource=PODS, settings=FAST_INFORMER, rng=random.Random(1)
    )
    try:
        yield inf
    finally:
        await inf.stop()


async def test_the_watch_streams_on_past_huge_objects(
    apiserver: ApiServer, client: KubeClient, informer: Informer[Any]
) -> None:
    received: dict[str, dict[str, Any]] = {}

    def on_add(obj: dict[str, Any]) -> None:
        received[obj["metadata"]["name"]] = obj

    informer.add_handlers(EventHandlers(on_add=on_add))
    informer.start()
    assert await informer.wait_synced(within=5)
    labels = {f"label-{index:05d}": f"value-{index:05d}" for index in range(10_000)}
    await client.create(PODS, PAUSE_POD(name="many-labels", labels=labels), namespace="default")
    await client.create(
        PODS, annotated("largest-annotation", {"a": "x" * (LIMIT - 1)}), namespace="default"
    )
    with pytest.raises(KubeApiError):
        await client.create(
            PODS, annotated("mebibyte", {"a": "x" * (1 << 20)}), namespace="default"
        )
    await client.create(PODS, PAUSE_POD(name="after"), namespace="default")
    await eventually(lambda: informer.lister.get("after", "default") is not None)
    # Every event arrived on the one watch: no re-list, no error, nothing refused came through.
    assert (informer.stats.lists, informer.stats.errors, informer.stats.gone) == (1, 0, 0)
    assert informer.stats.events == 3
    assert sorted(received) == ["after", "largest-annotation", "many-labels"]
    many = informer.lister.get("many-labels", "default")
    assert many is not None
    assert len(many["metadata"]["labels"]) == 10_000
    # Held once: the cache keeps the very object the handlers were given, not a copy.
    assert many is received["many-labels"]
    assert informer.lister.get("largest-annotation", "default") is received["largest-annotation"]
    # And let go when deleted; the watch still streams.
    await client.delete(PODS, "many-labels", namespace="default", grace_period_seconds=0)
    await client.delete(PODS, "largest-annotation", namespace="default", grace_period_seconds=0)
    await client.create(PODS, PAUSE_POD(name="last"), namespace="default")
    await eventually(lambda: informer.lister.get("last", "default") is not None)
    assert informer.lister.get("many-labels", "default") is None
    assert informer.lister.get("largest-annotation", "default") is None
    assert (informer.stats.lists, informer.stats.errors) == (1, 0)
