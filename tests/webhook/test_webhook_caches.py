"""The admission path's caches: informers of the in-process API server, the lookups built on
them, and the background scale-subresource lookups for kinds without an informer."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.controllers.vpa.admission.admission_caches import (
    AdmissionCaches,
    largest_allocatable,
)
from kubescale.controllers.vpa.api.controller_refs import ControllerRef, topmost_controller
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.controller_lookups import well_known_selector
from kubescale.kube.resources import (
    LIMIT_RANGES,
    NODES,
    REPLICATION_CONTROLLERS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.scale_lookups import LookupLimits, ScaleLookups
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import parse_label_selector
from kubescale.runtime.cache_loops import scale_lookups_loop
from kubescale.runtime.loop_runner import LoopRunner
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.webhook_config import WebhookSettings
from tests import builders
from tests.builders.meta import stored_as

from .api_fixtures import build_caches


async def _eventually(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, "the caches did not catch up"
        await asyncio.sleep(0.005)


@dataclass
class Caches:
    api: ApiServer
    kube: KubeClient
    clock: VirtualClock
    informers: SharedCache
    caches: AdmissionCaches


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def api(clock: VirtualClock) -> AsyncIterator[ApiServer]:
    async with ApiServer(clock=clock, seed=3) as server:
        yield server


@pytest.fixture
async def kube(api: ApiServer, clock: VirtualClock, tmp_path: Path) -> AsyncIterator[KubeClient]:
    api.write_kubeconfig(tmp_path / "kubeconfig")
    client = await connect(kubeconfig=tmp_path / "kubeconfig", clock=clock, rng=random.Random(0))
    try:
        yield client
    finally:
        await client.close()


async def _caches(
    api: ApiServer, kube: KubeClient, clock: VirtualClock, settings: WebhookSettings
) -> Caches:
    informers, caches = build_caches(kube, settings, clock=clock)
    assert informers.readiness_check() is not None  # nothing synced before start
    informers.start()
    assert await informers.wait_synced()
    assert informers.readiness_check() is None
    return Caches(api=api, kube=kube, clock=clock, informers=informers, caches=caches)


@pytest.fixture
async def setup(api: ApiServer, kube: KubeClient, clock: VirtualClock) -> AsyncIterator[Caches]:
    setup = await _caches(
        api,
        kube,
        clock,
        WebhookSettings(
            ignored_vpa_object_namespaces=("kube-system",),
            avoid_hpa_conflict=True,
            cap_to_largest_node=True,
        ),
    )
    try:
        yield setup
    finally:
        await setup.informers.stop()


WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
READY = {"type": "Ready", "status": "True"}
NOT_READY = {"type": "Ready", "status": "False"}


def _names(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(str(obj["metadata"]["name"]) for obj in objects)


async def test_vpas_are_indexed_by_target_and_ignored_namespaces_left_out(setup: Caches) -> None:
    store = setup.api.store
    store.create(builders.vpas.vpa(name="a", target=WEB))
    store.create(builders.vpas.vpa(name="b", target=WEB))
    store.create(builders.vpas.vpa(name="other-target", target={**WEB, "name": "api"}))
    store.create(builders.vpas.vpa(name="ignored", namespace="kube-system", target=WEB))
    store.create(builders.vpas.vpa(name="no-target", spec={}))
    web = ControllerRef(api_version="apps/v1", kind="Deployment", name="web", namespace="default")
    await _eventually(
        lambda: len(setup.informers.informers.lister(VERTICAL_POD_AUTOSCALERS).list()) == 5
    )
    assert _names(setup.caches.vpas_for(web)) == ["a", "b"]
    system = ControllerRef(
        api_version="apps/v1", kind="Deployment", name="web", namespace="kube-system"
    )
    assert setup.caches.vpas_for(system) == []


async def test_one_vpa_namespace_watches_only_that_namespace(
    api: ApiServer, kube: KubeClient, clock: VirtualClock
) -> None:
    setup = await _caches(api, kube, clock, WebhookSettings(vpa_object_namespace="team"))
    try:
        api.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        api.store.create(builders.vpas.vpa(name="outside", target=WEB))
        api.store.create(builders.vpas.vpa(name="inside", namespace="team", target=WEB))
        team_web = ControllerRef(
            api_version="apps/v1", kind="Deployment", name="web", namespace="team"
        )
        await _eventually(lambda: bool(setup.caches.vpas_for(team_web)))
        default_web = ControllerRef(
            api_version="apps/v1", kind="Deployment", name="web", namespace="default"
        )
        assert setup.caches.vpas_for(default_web) == []
        (vpa_informer,) = [
            informer
            for informer in setup.informers.informers.informers
            if informer.resource == VERTICAL_POD_AUTOSCALERS
        ]
        assert vpa_informer.namespace == "team"
    finally:
        await setup.informers.stop()


SELECTOR_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "Deployment",
        {"spec": {"selector": {"matchLabels": {"app": "web"}}}},
        "app=web",
    ),
    (
        "StatefulSet",
        {
            "spec": {
                "selector": {
                    "matchLabels": {"app": "db"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}],
                }
            }
        },
        "app=db,tier in (x)",
    ),
    (
        "CronJob",  # the job template's pod labels, as a set selector
        {"spec": {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {"job": "n"}}}}}}},
        "job=n",
    ),
    ("ReplicationController", {"spec": {"selector": {"app": "legacy"}}}, "app=legacy"),
]


@pytest.mark.parametrize(("kind", "obj", "expected"), SELECTOR_CASES)
def test_well_known_selectors_are_read_as_upstreams_target_fetcher_does(
    kind: str, obj: dict[str, Any], expected: str
) -> None:
    selector = well_known_selector(kind, obj)
    assert selector is not None
    assert str(selector) == str(parse_label_selector(expected))


def test_a_missing_selector_selects_nothing_and_a_bad_one_is_unknown() -> None:
    nothing = well_known_selector("Deployment", {"spec": {}})
    assert nothing is not None
    assert not nothing.matches({"app": "web"})
    bad = {"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}}
    assert well_known_selector("Deployment", bad) is None
    # an empty template label set selects everything (labels.SelectorFromSet of {})
    everything = well_known_selector("CronJob", {"spec": {}})
    assert everything is not None
    assert everything.matches({"any": "pod"})


async def test_controllers_come_from_informers_and_wait_for_late_arrivals(setup: Caches) -> None:
    store = setup.api.store
    selector = {"matchLabels": {"app": "web"}}
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a"}]}}
    store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": selector, "template": template},
        }
    )
    caches = setup.caches
    assert caches.informs("ReplicaSet")
    assert caches.informs("ReplicationController")  # every kind upstream VPA informs on
    assert not caches.informs("MachineDeployment")  # anything else: /scale lookups
    arrived = await caches.wait_for_controller("Deployment", "default", "web", within=5.0)
    assert arrived
    assert caches.owner("apps/v1", "Deployment", "default", "web") is not None
    target = ControllerRef(
        api_version="apps/v1", kind="Deployment", name="web", namespace="default"
    )
    found = caches.selector_of(target)
    assert found is not None
    assert found.matches({"app": "web"})
    # a ReplicaSet created while someone waits for it wakes the waiter
    waiter = asyncio.create_task(
        caches.wait_for_controller("ReplicaSet", "default", "web-1", within=5.0)
    )
    await asyncio.sleep(0)
    store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"selector": selector, "template": template},
        }
    )
    assert await waiter
    # one that never comes: False after the wait
    assert not await caches.wait_for_controller("ReplicaSet", "default", "never", within=0.05)


async def test_limit_ranges_come_sorted_by_name(setup: Caches) -> None:
    for name in ("zeta", "alpha", "mid"):
        setup.api.store.create(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]},
            }
        )
    await _eventually(lambda: len(setup.informers.informers.lister(LIMIT_RANGES).list()) == 3)
    assert [o["metadata"]["name"] for o in setup.caches.limit_ranges("default")] == [
        "alpha",
        "mid",
        "zeta",
    ]
    assert setup.caches.limit_ranges("kube-system") == []


LARGEST_CASES: list[tuple[str, list[dict[str, Any]], dict[str, str] | None]] = [
    ("no nodes", [], None),
    (
        "only NotReady nodes",
        [builders.nodes.node(name="a", allocatable={"cpu": "8"}, conditions=[NOT_READY])],
        None,
    ),
    (
        "no Ready condition counts as not Ready",
        [builders.nodes.node(name="a", allocatable={"cpu": "8"})],
        None,
    ),
    (
        "per resource maximum over Ready nodes",
        [
            builders.nodes.node(
                name="cpu-heavy", allocatable={"cpu": "16", "memory": "8Gi"}, conditions=[READY]
            ),
            builders.nodes.node(
                name="mem-heavy", allocatable={"cpu": "4", "memory": "64Gi"}, conditions=[READY]
            ),
            builders.nodes.node(
                name="down", allocatable={"cpu": "96", "memory": "768Gi"}, conditions=[NOT_READY]
            ),
        ],
        {"cpu": "16", "memory": "64Gi"},
    ),
    (
        "unparsable quantities are skipped",
        [
            builders.nodes.node(
                name="a", allocatable={"cpu": "lots", "memory": "1Gi"}, conditions=[READY]
            ),
            builders.nodes.node(name="b", allocatable={"cpu": "500m"}, conditions=[READY]),
        ],
        {"cpu": "500m", "memory": "1Gi"},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [case[1:] for case in LARGEST_CASES],
    ids=[case[0] for case in LARGEST_CASES],
)
def test_largest_allocatable(nodes: list[dict[str, Any]], expected: dict[str, str] | None) -> None:
    largest = largest_allocatable([stored_as(node, Node) for node in nodes])
    if expected is None:
        assert largest is None
    else:
        assert largest is not None
        assert {name: str(value) for name, value in largest.items()} == expected


async def test_largest_node_allocatable_follows_node_changes(setup: Caches) -> None:
    store = setup.api.store

    def put(node: dict[str, Any]) -> None:
        current = store.peek(NODES, node["metadata"]["name"], None)
        if current is None:
            current = store.create({k: v for k, v in node.items() if k != "status"})
        store.update_status({**current, "status": node["status"]})

    put(
        builders.nodes.node(name="a", allocatable={"cpu": "4", "memory": "8Gi"}, conditions=[READY])
    )
    put(
        builders.nodes.node(name="b", allocatable={"cpu": "8", "memory": "4Gi"}, conditions=[READY])
    )

    def largest() -> dict[str, str]:
        found = setup.caches.largest_node_allocatable() or {}
        return {name: str(value) for name, value in found.items()}

    await _eventually(lambda: largest() == {"cpu": "8", "memory": "8Gi"})
    put(
        builders.nodes.node(
            name="b", allocatable={"cpu": "8", "memory": "4Gi"}, conditions=[NOT_READY]
        )
    )
    await _eventually(lambda: largest() == {"cpu": "4", "memory": "8Gi"})


async def test_hpas_are_indexed_by_scale_target(setup: Caches) -> None:
    setup.api.store.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": WEB, "maxReplicas": 3},
        }
    )
    await _eventually(lambda: bool(setup.caches.hpas_for("default", "Deployment", "web")))
    assert setup.caches.hpas_for("default", "Deployment", "api") == []
    assert setup.caches.hpas_for("other", "Deployment", "web") == []


# -- scale-subresource lookups -------------------------------------------------------------------


MD = "cluster.x-k8s.io/v1beta1"


WIDGETS = "example.com/v1"


def _widget_crd() -> dict[str, Any]:
    """A custom kind with /scale, unknown to kubescale's catalogue: found through discovery."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }


def _widget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": WIDGETS,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 2},
    }


async def test_scale_lookups_answer_from_memory_and_resolve_off_the_request_path(
    kube: KubeClient, api: ApiServer, clock: VirtualClock
) -> None:
    lookups = ScaleLookups(
        client=kube, clock=clock, freshness=600.0, negative_freshness=30.0, lifetime=3600.0
    )
    api.store.create(_widget_crd())
    pool = api.store.create(_widget("pool"))
    api.store.update_status({**pool, "status": {"replicas": 2, "selector": "pool=pool"}})
    # a catalogued kind needs no discovery
    assert lookups.is_scalable(MD, "MachineDeployment")
    # first sight: unknown, queued, no request made
    assert not lookups.is_scalable(WIDGETS, "Widget")
    assert lookups.selector(WIDGETS, "Widget", "default", "pool") is None
    assert lookups.lookup(WIDGETS, "Widget", "default", "absent") is None
    assert not lookups.is_scalable("v1", "ConfigMap")  # catalogued: known without a request
    assert not lookups.is_scalable("other.example.com/v1", "Gadget")
    assert lookups.fetches == 0
    # the group list (which says whether example.com/v1 is served at all) and two objects
    assert lookups.pending == 3
    await lookups.resolve_pending()
    assert lookups.pending == 0
    # /apis, then /apis/example.com/v1, then two /scale GETs; Gadget's group is not served
    assert lookups.fetches == 4
    assert lookups.is_scalable(WIDGETS, "Widget")
    assert not lookups.is_scalable("v1", "ConfigMap")  # served, but has no /scale
    assert not lookups.is_scalable("other.example.com/v1", "Gadget")  # not served at all
    selector = lookups.selector(WIDGETS, "Widget", "default", "pool")
    assert selector is not None
    assert selector.matches({"pool": "pool"})
    assert not selector.matches({"pool": "other"})
    obj = lookups.lookup(WIDGETS, "Widget", "default", "pool")
    assert obj is not None
    assert obj["metadata"]["name"] == "pool"
    assert lookups.lookup(WIDGETS, "Widget", "default", "absent") is None
    assert lookups.pending == 0  # a known absence is not queued again
    # a negative answer holds `negative_freshness` only: read after that, it is asked again,
    # so an object created later shows
    api.store.create(_widget("absent"))
    await clock.advance(29.0)
    assert lookups.lookup(WIDGETS, "Widget", "default", "absent") is None
    assert lookups.pending == 0
    await clock.advance(1.0)
    assert lookups.lookup(WIDGETS, "Widget", "default", "absent") is None  # the old answer
    assert lookups.pending == 1
    assert await lookups.resolve_pending() == 1
    assert lookups.lookup(WIDGETS, "Widget", "default", "absent") is not None
    # nobody asks about the unserved group again: it costs nothing more
    assert await lookups.refresh_stale() == 0
    # a positive one for `freshness`: then it is fetched again
    fetches = lookups.fetches
    await clock.advance(570.0)
    assert await lookups.refresh_stale() > 0
    assert lookups.fetches > fetches
    # unread for `lifetime`: dropped
    await clock.advance(3600.0)
    await lookups.refresh_stale()
    assert lookups.cached_objects == 0
    assert lookups.lookup(WIDGETS, "Widget", "default", "pool") is None
    assert lookups.pending == 2  # its group version (unread too, dropped) and the object


async def test_scale_lookups_never_queue_an_invalid_reference(
    kube: KubeClient, clock: VirtualClock
) -> None:
    lookups = ScaleLookups(client=kube, clock=clock)
    for api_version, kind, name in (
        ("../../api/v1/namespaces/kube-system/secrets/v1", "Secret", "x"),
        ("apps?watch=true&x=/v1", "Deployment", "x"),
        ("apps/v1/extra", "Deployment", "x"),
        ("Apps/v1", "Deployment", "x"),
        ("apps/v1", "Deploy-ment", "x"),
        (MD, "MachineDeployment", "../secrets/x"),
        (MD, "MachineDeployment", "x?watch=1"),
        (MD, "MachineDeployment", "UPPER"),
    ):
        assert lookups.lookup(api_version, kind, "default", name) is None
        assert lookups.selector(api_version, kind, "default", name) is None
    assert lookups.lookup(MD, "MachineDeployment", "kube system", "x") is None
    assert lookups.pending == 0
    assert lookups.refused == 2 * 8 + 1
    assert await lookups.resolve_pending() == 0
    assert lookups.fetches == 0


async def test_scale_lookups_send_no_more_than_the_rate_limit(
    kube: KubeClient, clock: VirtualClock
) -> None:
    limits = LookupLimits(qps=2.0, burst=5, max_objects=50, max_pending=20)
    lookups = ScaleLookups(client=kube, clock=clock, limits=limits)
    for i in range(100):  # 100 distinct objects of a catalogued scalable kind, none exists
        assert lookups.lookup(MD, "MachineDeployment", "default", f"ghost-{i}") is None
    assert lookups.pending == 20  # the queue is bounded; the rest is asked again when read
    assert await lookups.resolve_pending() == 5  # the burst
    assert lookups.pending == 15
    assert await lookups.resolve_pending() == 0  # no token left at the same instant
    await clock.advance(2.0)
    assert await lookups.resolve_pending() == 4  # 2 tokens per second
    await clock.advance(60.0)
    assert await lookups.resolve_pending() == 5  # the bucket holds `burst` at most
    assert lookups.fetches == 14
    for i in range(100):
        lookups.lookup(MD, "MachineDeployment", "default", f"ghost-{i}")
        await clock.advance(1.0)
        await lookups.resolve_pending()
    assert lookups.cached_objects <= 50


async def test_the_lookups_loop_resolves_a_miss_without_waiting_for_the_sweep(
    kube: KubeClient, api: ApiServer, clock: VirtualClock
) -> None:
    cache = SharedCache(client=kube, clock=clock)
    lookups = cache.scale_lookups
    api.store.create(
        builders.cluster_api.machine_deployment(
            name="pool",
            spec={
                "clusterName": "c",
                "replicas": 2,
                "selector": {"matchLabels": {"pool": "pool"}},
                "template": {"spec": {"clusterName": "c"}},
            },
        )
    )
    runner = LoopRunner(clock=clock, registry=CollectorRegistry())
    spec = scale_lookups_loop(cache)
    runner.add(spec.loop, interval=spec.interval, wake=spec.wake)
    task = asyncio.create_task(runner.run())
    try:
        await _eventually(lambda: runner.iterations(spec.loop.name) == 1)
        # a miss wakes the loop at once: the virtual clock never reaches the 7 s sweep
        assert lookups.lookup(MD, "MachineDeployment", "default", "pool") is None
        await _eventually(
            lambda: lookups.lookup(MD, "MachineDeployment", "default", "pool") is not None
        )
        await _eventually(lambda: runner.iterations(spec.loop.name) >= 2)
        assert clock.elapsed == 0.0
    finally:
        runner.stop()
        await task


async def test_replication_controllers_are_informed_and_give_their_selector(setup: Caches) -> None:
    """Upstream VPA informs on ReplicationControllers; the API server serves them (with /scale)."""
    rc = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"app": "legacy"},
            "template": {
                "metadata": {"labels": {"app": "legacy"}},
                "spec": {"containers": [{"name": "a", "image": "a"}]},
            },
        },
    }
    created = await setup.kube.create(REPLICATION_CONTROLLERS, rc)
    scale = await setup.kube.get_scale(REPLICATION_CONTROLLERS, "legacy", namespace="default")
    assert scale["status"]["selector"] == "app=legacy"
    caches = setup.caches
    assert await caches.wait_for_controller("ReplicationController", "default", "legacy", within=5)
    target = ControllerRef(
        api_version="v1", kind="ReplicationController", name="legacy", namespace="default"
    )
    selector = caches.selector_of(target)
    assert selector is not None
    assert selector.matches({"app": "legacy"})
    assert not selector.matches({"app": "other"})
    pod = {"metadata": {"namespace": "default", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ReplicationController", "name": "legacy",
         "uid": created["metadata"]["uid"], "controller": True}]}}  # fmt: skip
    top = topmost_controller(
        stored_as(pod, Pod), lookup=caches.owner, scalable_kinds=caches.is_scalable
    )
    assert top == target
