"""What a shared informer caches when its requesters say what they read (issue 29).

``InformerSet.reading`` lets a requester declare the fields it reads of a kind; the informer
caches the widest of its requesters' declared reads, or the kind's own projection as soon as one
requester did not declare. Against the in-process API server: a Deployment stored with its pod
template and managedFields, cached by a Deployments informer from the shared set.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.kube.client import KubeClient
from kubescale.kube.controller_lookups import LOOKUP_READS
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import DEPLOYMENTS, REPLICA_SETS
from kubescale.objects.projection import PROJECTIONS, Projection, projection_of
from kubescale.objects.replica_set import ReplicaSet
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

from .conftest import FAST_INFORMER

DEPLOYMENT = ("apps", "Deployment")
TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
}


def _stored() -> dict[str, Any]:
    body = builders.workloads.deployment(
        name="web",
        match_labels={"app": "web"},
        template=TEMPLATE,
        owner_references=[
            {"apiVersion": "example.com/v1", "kind": "App", "name": "a", "uid": "u1"}
        ],
    )
    body["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    return body


async def _cached(informers: InformerSet) -> dict[str, Any]:
    (informer,) = informers.informers
    informers.start()
    try:
        await informer.wait_synced()
        cached: dict[str, Any] | None = informer.lister.get("web", "default")
    finally:
        await informers.stop()
    assert cached is not None
    return cached


async def test_only_lookup_readers_cache_no_template(
    apiserver: ApiServer, client: KubeClient
) -> None:
    apiserver.store.load([_stored()])
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    with informers.requested_by("webhook"), informers.reading(LOOKUP_READS):
        informers.informer(DEPLOYMENTS)
    cached = await _cached(informers)
    # what the lookups read: the owner chain and the selector
    assert cached["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert cached["metadata"]["name"] == "web"
    assert cached["spec"] == {"selector": {"matchLabels": {"app": "web"}}}
    assert "managedFields" not in cached["metadata"]


async def test_one_reader_without_declared_reads_gets_the_kinds_projection(
    apiserver: ApiServer, client: KubeClient
) -> None:
    apiserver.store.load([_stored()])
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    with informers.requested_by("webhook"), informers.reading(LOOKUP_READS):
        informers.informer(DEPLOYMENTS)
    with informers.requested_by("vpa-updater"):
        informers.informer(DEPLOYMENTS)
    cached = await _cached(informers)
    assert cached["spec"]["template"] == TEMPLATE  # the updater's readers keep it
    assert informers.informers[0].projection is PROJECTIONS[DEPLOYMENT]


async def test_a_discarded_reader_no_longer_widens_the_cache(
    apiserver: ApiServer, client: KubeClient
) -> None:
    apiserver.store.load([_stored()])
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    with informers.requested_by("webhook"), informers.reading(LOOKUP_READS):
        informers.informer(DEPLOYMENTS)
    with informers.requested_by("hpa-controller"):
        informers.informer(DEPLOYMENTS)
    informers.discard("hpa-controller")  # a component that will not run
    cached = await _cached(informers)
    assert "template" not in cached["spec"]


async def test_two_declared_reads_are_cached_together(client: KubeClient) -> None:
    replicas_only = Projection(
        fields={"spec": Projection(fields={"replicas": Projection()}, name="S")}, name="R"
    )
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    with informers.requested_by("a"), informers.reading(LOOKUP_READS):
        informers.informer(REPLICA_SETS)
    with informers.requested_by("b"), informers.reading({("apps", "ReplicaSet"): replicas_only}):
        informers.informer(REPLICA_SETS)
    (informer,) = informers.informers
    informers.start()
    try:
        projection = informer.projection
        assert projection is not None
        assert projection.fields is not None
        spec = projection.fields["spec"].fields
        assert spec is not None
        assert set(spec) == {"selector", "jobTemplate", "replicas"}  # both readers' fields
        assert set(projection.fields) == {"apiVersion", "kind", "metadata", "spec"}
        assert "status" in (projection_of(ReplicaSet).fields or {})  # the kind's own: more
    finally:
        await informers.stop()


async def test_a_wider_request_after_start_is_refused(client: KubeClient) -> None:
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    with informers.requested_by("webhook"), informers.reading(LOOKUP_READS):
        informers.informer(DEPLOYMENTS)
    informers.start()
    try:
        with informers.requested_by("webhook"), informers.reading(LOOKUP_READS):
            informers.informer(DEPLOYMENTS)  # the same reads again: fine
        with (
            informers.requested_by("vpa-updater"),
            pytest.raises(RuntimeError, match="deployments is already cached with other fields"),
        ):
            informers.informer(DEPLOYMENTS)
    finally:
        await informers.stop()


async def test_a_lookup_after_start_declares_nothing(client: KubeClient) -> None:
    informers = InformerSet(client=client, settings=FAST_INFORMER)
    with informers.requested_by("webhook"), informers.reading(LOOKUP_READS):
        narrow = informers.informer(DEPLOYMENTS)
    informers.start()
    try:
        assert informers.informer(DEPLOYMENTS) is narrow  # a loop's lookup: no error
        assert narrow.projection is LOOKUP_READS[DEPLOYMENT]
    finally:
        await informers.stop()
