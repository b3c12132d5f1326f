"""``LoadPods`` in proportion to change (``recommender/pod_feed.py``, issue 29).

Upstream's ``LoadPods`` feeds every pod of the lister into the model each loop; the kept feed
gives the model only the pods the informer named since the last feed (and, in memory-saver
mode, the pods of namespaces whose VPAs changed). The reference here is exactly that
from-scratch path (:meth:`PodFeed.feed_all` over every cached pod, then ``DeleteRemovedPods``);
after every iteration of random sequences of pod adds, updates (labels, phase, requests,
containers), re-creations under the same name, deletes, re-lists (changes the informer missed
while not watching, then diffed as :mod:`kubescale.kube.informer` documents), VPA selector
changes, samples and garbage collections, both models must be the same: the same pods in the
same order with the same labels, phase and requests, the same aggregates in the same order with
the same creation times and VPA links, the same pod counts per VPA.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.pod_feed import PodChanges, PodFeed, pod_key
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector, label_selector_from_dict
from tests.builders.meta import stored_as
from tests.builders.pods import container, pod
from tests.builders.vpas import target_ref, typed_vpa

START = datetime(2026, 1, 5, tzinfo=UTC)
NAMESPACES = ("a", "b")
SELECTORS: tuple[dict[str, Any], ...] = (
    {"matchLabels": {"app": "x"}},
    {"matchLabels": {"app": "y"}},
    # no equality requirement: the model tries it for every pod of the namespace
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
)
Handler = Callable[[Pod], None]


class Informer:
    """The pod informer's cache and handler contract (:mod:`kubescale.kube.informer`): each
    change the cache sees calls a handler once; a re-list is diffed against the cache by uid
    and resourceVersion (new → add, other uid → delete then add, other resourceVersion →
    update, missing → delete, same → nothing)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, str], Pod] = {}
        self.on_add: list[Handler] = []
        self.on_update: list[Handler] = []
        self.on_delete: list[Handler] = []

    def store(self, obj: Pod) -> None:
        key = pod_key(obj)
        old = self.cache.get(key)
        self.cache[key] = obj
        if old is None:
            self._call(self.on_add, obj)
        elif old["metadata"]["uid"] != obj["metadata"]["uid"]:
            self._call(self.on_delete, old)
            self._call(self.on_add, obj)
        elif old["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            self._call(self.on_update, obj)

    def remove(self, key: tuple[str, str]) -> None:
        old = self.cache.pop(key, None)
        if old is not None:
            self._call(self.on_delete, old)

    def relist(self, server: dict[tuple[str, str], Pod]) -> None:
        for obj in server.values():
            self.store(copy.deepcopy(obj))  # a re-list decodes new objects
        for key in [key for key in self.cache if key not in server]:
            self.remove(key)

    @staticmethod
    def _call(handlers: list[Handler], obj: Pod) -> None:
        for handler in handlers:
            handler(obj)

    # the lister
    def get(self, name: str, namespace: str | None = None) -> Pod | None:
        return self.cache.get((namespace or "", name))

    def list(self, *, namespace: str | None = None) -> list[Pod]:
        return [p for k, p in self.cache.items() if namespace is None or k[0] == namespace]


@dataclass(frozen=True)
class PodShape:
    """What a pod is made (or changed) to."""

    app: str = "x"
    tier: bool = False
    """Carries ``tier: web`` (the third selector's label)."""
    phase: str = "Running"
    cpu: int = 1
    two: bool = False
    """A second container."""
    new: bool = False
    """Re-created under the same name (a new uid)."""
    watched: bool = True
    """The informer sees it now (else at the next re-list)."""


@dataclass
class World:
    """A server's pods and VPAs, the informer's view of the pods, and two recommenders' models:
    one fed by the kept feed, one by the from-scratch path."""

    memory_saver: bool
    feed: PodFeed
    watch_updates: bool = True
    server: dict[tuple[str, str], Pod] = field(default_factory=dict)
    informer: Informer = field(default_factory=Informer)
    vpas: dict[int, int] = field(default_factory=dict)
    """VPA slot → index in SELECTORS."""
    now: datetime = START
    version: int = 0
    uids: int = 0

    def __post_init__(self) -> None:
        config = RecommenderConfig(memory_saver=self.memory_saver)
        self.kept = ClusterState(config=config)
        self.scratch = ClusterState(config=config)
        self.reference = PodFeed(memory_saver=self.memory_saver)
        self.informer.on_add.append(self.feed.changed)
        self.informer.on_delete.append(self.feed.changed)
        if self.watch_updates:
            self.informer.on_update.append(self.feed.changed)

    def put(self, i: int, shape: PodShape) -> None:
        app, tier, phase, cpu, two, new, watched = (
            shape.app,
            shape.tier,
            shape.phase,
            shape.cpu,
            shape.two,
            shape.new,
            shape.watched,
        )
        key = (NAMESPACES[i % 2], f"p{i}")
        old = self.server.get(key)
        self.version += 1
        if old is None or new:
            self.uids += 1
        uid = f"u{self.uids}" if old is None or new else old["metadata"]["uid"]
        labels = {"app": app, **({"tier": "web"} if tier else {})}
        containers = [container("app", requests={"cpu": f"{cpu * 100}m", "memory": "1Gi"})]
        if two:
            containers.append(container("side", requests={"cpu": "10m"}))
        obj = stored_as(
            pod(
                name=key[1],
                namespace=key[0],
                uid=uid,
                labels=labels,
                containers=containers,
                metadata_extra={"resourceVersion": str(self.version)},
                status={"phase": phase},
            ),
            Pod,
        )
        self.server[key] = obj
        if watched:
            self.informer.store(copy.deepcopy(obj))

    def delete(self, i: int, watched: bool) -> None:
        key = (NAMESPACES[i % 2], f"p{i}")
        self.server.pop(key, None)
        if watched:
            self.informer.remove(key)

    def relist(self) -> None:
        self.informer.relist(self.server)

    def set_vpa(self, slot: int, selector: int | None) -> None:
        if selector is None:
            self.vpas.pop(slot, None)
        else:
            self.vpas[slot] = selector

    def _load_vpas(self) -> None:
        """``LoadVPAs`` on both models; the kept feed hears of the selectors."""
        loaded: list[tuple[tuple[str, str], LabelSelector | None]] = []
        for state in (self.kept, self.scratch):
            for slot, choice in sorted(self.vpas.items()):
                namespace, name = NAMESPACES[slot % 2], f"v{slot}"
                selector = label_selector_from_dict(SELECTORS[choice])
                state.add_or_update_vpa(
                    typed_vpa(name=name, namespace=namespace, target=target_ref()),
                    selector=selector,
                )
                if state is self.kept:
                    loaded.append(((namespace, name), selector))
            wanted = {(NAMESPACES[slot % 2], f"v{slot}") for slot in self.vpas}
            for namespace, name in state.vpa_keys():
                if (namespace, name) not in wanted:
                    state.delete_vpa(namespace=namespace, name=name)
        self.feed.vpas_loaded(loaded)

    def iterate(self) -> None:
        """One iteration on both models: LoadVPAs, LoadPods, then DeleteRemovedPods."""
        self.now += timedelta(minutes=1)
        self._load_vpas()
        self.feed.feed(self.kept, self.feed.take(self.informer), now=self.now)
        self.reference.feed_all(self.scratch, self.informer.list(), now=self.now)
        self.feed.delete_removed(self.kept)
        self.reference.delete_removed(self.scratch)

    def samples(self) -> None:
        for state in (self.kept, self.scratch):
            for namespace, name in state.pod_keys():
                for name_ in ("app", "side"):
                    state.add_sample(
                        namespace=namespace,
                        pod=name,
                        container=name_,
                        resource="cpu",
                        usage=100,
                        request=0,
                        measure_start=self.now,
                    )

    def garbage_collect(self) -> None:
        # far enough ahead that empty aggregates of pods gone (and old ones) are collected
        later = self.now + timedelta(days=9)
        for state in (self.kept, self.scratch):
            state.garbage_collect(now=later)

    def apply(self, step: tuple[Any, ...]) -> None:
        kind, *args = step
        actions: dict[str, Callable[..., None]] = {
            "put": self.put,
            "delete": self.delete,
            "relist": self.relist,
            "vpa": self.set_vpa,
            "iterate": self.iterate,
            "samples": self.samples,
            "gc": self.garbage_collect,
        }
        actions[kind](*args)

    def same(self) -> bool:
        return describe(self.kept) == describe(self.scratch)


def describe(state: ClusterState) -> dict[str, Any]:
    """Everything the feeding decides in a model, in its orders."""
    return {
        "pods": [
            (
                key,
                p.labels,
                p.label_key,
                p.phase,
                [(n, c.request_cpu, c.request_memory) for n, c in p.containers.items()],
            )
            for key, p in state._pods.items()
        ],
        "aggregates": [
            (key, a.creation_time_us, a.is_under_vpa, a.update_mode, a.is_empty())
            for key, a in state._aggregates.items()
        ],
        "vpas": [(key, v.pod_count, list(v.aggregates)) for key, v in state._vpas.items()],
        "labels": sorted(state._labels),
        "pending_creation": len(state._pending_creation),
    }


POD = st.integers(0, 5)
STEPS = st.one_of(
    st.tuples(
        st.just("put"),
        POD,
        st.builds(
            PodShape,
            app=st.sampled_from(["x", "y"]),
            tier=st.booleans(),
            phase=st.sampled_from(["Running", "Running", "Pending", "Succeeded"]),
            cpu=st.integers(1, 3),
            two=st.booleans(),
            new=st.booleans(),
            watched=st.booleans() | st.just(True),
        ),
    ),
    st.tuples(st.just("delete"), POD, st.booleans() | st.just(True)),
    st.tuples(st.just("relist")),
    st.tuples(st.just("vpa"), st.integers(0, 2), st.none() | st.integers(0, len(SELECTORS) - 1)),
    st.tuples(st.just("iterate")),
    st.tuples(st.just("iterate")),
    st.tuples(st.just("samples")),
    st.tuples(st.just("gc")),
)


def run(
    steps: Sequence[tuple[Any, ...]],
    memory_saver: bool,
    *,
    feed: PodFeed | None = None,
    watch_updates: bool = True,
) -> bool:
    """The steps on a world; whether the two models were the same after every iteration."""
    world = World(
        memory_saver=memory_saver,
        feed=feed if feed is not None else PodFeed(memory_saver=memory_saver),
        watch_updates=watch_updates,
    )
    for step in [*steps, ("iterate",)]:
        world.apply(step)
        if step[0] == "iterate" and not world.same():
            return False
    return True


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(STEPS, max_size=40), memory_saver=st.booleans())
@pytest.mark.full_examples
def test_the_kept_feed_leaves_the_model_the_from_scratch_path_leaves(
    steps: list[tuple[Any, ...]], memory_saver: bool
) -> None:
    assert run(steps, memory_saver)


class ForgetsDeletes(PodFeed):
    """Broken on purpose: pods gone from the cache are never deleted from the model."""

    def feed(self, state: ClusterState, changes: PodChanges, *, now: datetime) -> None:
        super().feed(state, PodChanges(changes.pods, (), changes.whole), now=now)


class ForgetsVpaChanges(PodFeed):
    """Broken on purpose: VPA changes do not make memory-saver mode match pods again."""

    def vpas_loaded(self, selectors: Any) -> None:
        list(selectors)


class ForgetsPending(PodFeed):
    """Broken on purpose: a pod going back to Pending stays in the model."""

    def feed(self, state: ClusterState, changes: PodChanges, *, now: datetime) -> None:
        kept = [p for p in changes.pods if p.get("status", {}).get("phase") != "Pending"]
        super().feed(state, PodChanges(kept, changes.gone, changes.whole), now=now)


@pytest.mark.parametrize(
    ("broken", "memory_saver", "watch_updates"),
    [
        pytest.param(ForgetsDeletes, False, True, id="forgets-deletes"),
        pytest.param(ForgetsVpaChanges, True, True, id="forgets-vpa-selector-changes"),
        pytest.param(ForgetsPending, False, True, id="forgets-pending"),
        # label, phase and request changes are updates: a feed that misses them
        pytest.param(PodFeed, False, False, id="forgets-updates"),
    ],
)
def test_the_property_catches_a_broken_feed(
    broken: type[PodFeed], memory_saver: bool, watch_updates: bool
) -> None:
    counterexample = find(
        st.lists(STEPS, max_size=40),
        lambda steps: (
            not run(
                steps,
                memory_saver,
                feed=broken(memory_saver=memory_saver),
                watch_updates=watch_updates,
            )
        ),
        # found is enough: no shrinking (the smallest counterexample is not the point)
        settings=settings(
            max_examples=2000,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert counterexample  # find raises when no sequence tells the two paths apart


def test_a_steady_iteration_feeds_nothing() -> None:
    world = World(memory_saver=False, feed=PodFeed(memory_saver=False))
    world.set_vpa(0, 0)
    for i in range(6):
        world.put(i, PodShape())
    world.iterate()
    assert world.feed.fed == 6  # the first feed is every pod (6 running)
    world.iterate()
    assert world.feed.fed == 0  # nothing changed: nothing fed
    world.put(2, PodShape(app="y"))  # a label change
    world.delete(3, True)
    world.iterate()
    assert world.feed.fed == 1  # p2 only; p3 is deleted, not fed
    # the first feed added them in key order; p2's update keeps its place
    assert [key for key, *_ in describe(world.kept)["pods"]] == [
        ("a", "p0"),
        ("a", "p2"),
        ("a", "p4"),
        ("b", "p1"),
        ("b", "p5"),
    ]
    assert world.same()


def test_a_reset_feeds_every_pod_again() -> None:
    world = World(memory_saver=False, feed=PodFeed(memory_saver=False))
    for i in range(3):
        world.put(i, PodShape())
    world.iterate()
    world.feed.reset()  # a restarted model, on both sides
    world.kept = ClusterState(config=RecommenderConfig())
    world.reference.reset()
    world.scratch = ClusterState(config=RecommenderConfig())
    world.iterate()
    assert world.feed.fed == 3
    assert world.same()


def test_a_feed_that_did_not_finish_is_followed_by_a_whole_one() -> None:
    feed = PodFeed(memory_saver=False)
    world = World(memory_saver=False, feed=feed)
    for i in range(3):
        world.put(i, PodShape())
    world.iterate()
    feed.take(world.informer)  # taken, never fed (the iteration was cancelled)
    world.put(1, PodShape(app="y"))
    world.iterate()
    assert feed.fed == 3  # every pod: what the lost take named is not known any more
    assert world.same()


def test_what_is_kept_is_released() -> None:
    world = World(memory_saver=False, feed=PodFeed(memory_saver=False))
    for slot in range(3):
        world.set_vpa(slot, slot)
    for i in range(6):
        world.put(i, PodShape())
    world.iterate()
    for i in range(6):
        world.delete(i, True)
    world.vpas.clear()
    world.iterate()
    feed = world.feed
    assert (feed._changed, feed._selectors, feed._to_delete, feed._rematch) == (
        set(),
        {},
        set(),
        set(),
    )
    assert world.kept.pod_keys() == []
