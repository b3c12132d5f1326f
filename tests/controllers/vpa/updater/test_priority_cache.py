"""The updater's kept update priorities answer as upstream's per-loop pricing (issue 29).

:class:`PriorityCache` keeps each pod's answer of :func:`prioritized_pods` while its inputs
hold. A hypothesis property runs random histories — pods added, their requests changed, OOM
kills, unbound, deleted; re-lists (new objects, the same resourceVersions); the VPA's
recommendation rewritten, its eviction requirements changed; LimitRanges and the resources left
to an HPA changed; the priority settings changed; the clock moved forward (across the 12 h
lifetime threshold of young pods) and back — and after each step compares both answers: the
same pods (the very objects), in the same order, with the same priority, capped
recommendation and reason. It was run against deliberately broken versions (the lifetime
threshold ignored, the VPA's resourceVersion ignored, the LimitRanges ignored, the age-accepted
reasons kept): each failed it.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.base.times import format_time
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem, merged_limit_range_item
from kubescale.controllers.vpa.updater.priority_cache import PriorityCache
from kubescale.controllers.vpa.updater.update_priority import (
    PodPriority,
    UpdateSettings,
    prioritized_pods,
)
from kubescale.objects.pod import Pod
from kubescale.objects.vpa import VerticalPodAutoscaler
from tests.builders.limit_ranges import limit_range_item, typed_limit_range
from tests.builders.pods import container, typed_pod
from tests.builders.vpas import container_recommendation, target_ref, typed_vpa

START = datetime(2026, 1, 1, tzinfo=UTC)
REQUESTS = [
    {"cpu": "100m", "memory": "100Mi"},  # within [50m, 200m] x [64Mi, 256Mi]
    {"cpu": "10m", "memory": "100Mi"},  # cpu below the lower bound
    {"cpu": "150m", "memory": "200Mi"},  # within, diff (150-100)/150 + (200-128)/200 > 0.1
    {"cpu": "100m"},  # no memory request: outside
]
AGES = [timedelta(hours=1), timedelta(hours=11, minutes=59), timedelta(hours=13), None]
"""How long before START a pod started (``None``: no ``status.startTime``)."""
SETTINGS = [UpdateSettings(), UpdateSettings(pod_update_threshold=0.5)]
CONTAINER_LIMITS: list[dict[str, Any] | None] = [
    None,
    limit_range_item(maximum={"cpu": "120m"}),
    limit_range_item(minimum={"memory": "150Mi"}),
]
EVICTION_REQUIREMENTS = [
    None,
    [{"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}],
]


class World:
    def __init__(self) -> None:
        self.version = 0
        self.now = START
        self.pods: dict[str, Pod] = {}
        self.order: list[str] = []
        self.settings = SETTINGS[0]
        self.limits = 0
        self.skip: frozenset[str] = frozenset()
        self.vpa = self.make_vpa(target_cpu="100m", requirements=0)
        for index in range(4):
            self.add_pod(index, index, index != 3)

    def stamp(self, obj: Any) -> Any:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        return obj

    def make_vpa(self, *, target_cpu: str, requirements: int) -> VerticalPodAutoscaler:
        policy: dict[str, Any] = {"updateMode": "Recreate"}
        if EVICTION_REQUIREMENTS[requirements] is not None:
            policy["evictionRequirements"] = EVICTION_REQUIREMENTS[requirements]
        made = typed_vpa(
            name="web",
            uid="vpa-web",
            target=target_ref(),
            spec={"updatePolicy": policy},
            recommendations=[
                container_recommendation(
                    "app",
                    target={"cpu": target_cpu, "memory": "128Mi"},
                    lower_bound={"cpu": "50m", "memory": "64Mi"},
                    upper_bound={"cpu": "200m", "memory": "256Mi"},
                )
            ],
        )
        return self.stamp(made)  # type: ignore[no-any-return]

    def add_pod(self, requests: int, age: int, bound: bool, oom: bool = False) -> None:
        uid = f"p{self.version}"
        started = AGES[age % len(AGES)]
        status: dict[str, Any] = {"phase": "Running"}
        if started is not None:
            status["startTime"] = format_time(START - started)
        if oom:
            status["containerStatuses"] = [
                {
                    "name": "app",
                    "lastState": {
                        "terminated": {
                            "reason": "OOMKilled",
                            "startedAt": format_time(START - timedelta(minutes=3)),
                            "finishedAt": format_time(START - timedelta(minutes=1)),
                        }
                    },
                }
            ]
        made = typed_pod(
            name=f"web-{uid}",
            uid=uid,
            containers=[container("app", requests=REQUESTS[requests % len(REQUESTS)])],
            node_name="node-1" if bound else None,
            status=status,
        )
        self.pods[uid] = self.stamp(made)
        self.order.append(uid)

    def container_limit_range(self) -> LimitRangeItem | None:
        item = CONTAINER_LIMITS[self.limits]
        if item is None:
            return None
        return merged_limit_range_item([typed_limit_range(items=[item])], item_type="Container")

    def listed(self) -> list[Pod]:
        return [self.pods[uid] for uid in self.order if uid in self.pods]


def apply(world: World, step: tuple[str, int, int]) -> None:
    op, a, b = step
    uids = sorted(world.pods)
    if op == "add_pod":
        world.add_pod(a, b, a % 3 != 0, oom=b % 3 == 0)
    elif op == "requests" and uids:
        uid = uids[a % len(uids)]
        new: dict[str, Any] = copy.deepcopy(dict(world.pods[uid]))
        new["spec"]["containers"][0]["resources"]["requests"] = REQUESTS[b % len(REQUESTS)]
        world.pods[uid] = world.stamp(new)
    elif op == "delete_pod" and uids:
        del world.pods[uids[a % len(uids)]]
    elif op == "relist":
        world.pods = {uid: copy.deepcopy(pod) for uid, pod in world.pods.items()}
        world.vpa = copy.deepcopy(world.vpa)
        if a % 2:
            world.order.reverse()
    elif op == "recommendation":
        world.vpa = world.make_vpa(target_cpu=["100m", "180m", "60m"][a % 3], requirements=b % 2)
    elif op == "limits":
        world.limits = a % len(CONTAINER_LIMITS)
    elif op == "skip":
        world.skip = frozenset({"cpu"}) if a % 2 else frozenset()
    elif op == "settings":
        world.settings = SETTINGS[a % len(SETTINGS)]
    elif op == "time":
        # forward by minutes to hours (across the 12 h threshold of young pods), or back
        world.now += [timedelta(minutes=1), timedelta(hours=1), timedelta(hours=6)][a % 3]
        if b == 3:
            world.now -= timedelta(hours=2)


STEPS = st.tuples(
    st.sampled_from(
        [
            "add_pod",
            "requests",
            "delete_pod",
            "relist",
            "recommendation",
            "limits",
            "skip",
            "settings",
            "time",
            "time",
        ]
    ),
    st.integers(0, 5),
    st.integers(0, 3),
)


def answers(world: World, cache: PriorityCache | None) -> list[PodPriority]:
    arguments: dict[str, Any] = {
        "vpa": world.vpa,
        "pods": world.listed(),
        "now": world.now,
        "settings": world.settings,
        "container_limit_range": world.container_limit_range(),
        "skip_resources": world.skip,
    }
    if cache is None:
        return prioritized_pods(**arguments)
    cache.start()
    found = cache.prioritized(**arguments)
    cache.release()
    return found


def same(got: list[PodPriority], want: list[PodPriority]) -> None:
    def shown(entries: list[PodPriority]) -> list[tuple[object, ...]]:
        return [(id(e.pod), e.priority, e.recommendation, e.reason) for e in entries]

    assert shown(got) == shown(want)


@pytest.mark.full_examples
@settings(max_examples=300, deadline=None)
@given(steps=st.lists(STEPS, max_size=30))
def test_kept_priorities_answer_as_from_scratch(steps: list[tuple[str, int, int]]) -> None:
    world = World()
    cache = PriorityCache()
    same(answers(world, cache), answers(world, None))
    for step in steps:
        apply(world, step)
        same(answers(world, cache), answers(world, None))
        assert len(cache) <= len(world.pods)  # entries of pods gone released


def test_a_steady_iteration_prices_no_pod_anew() -> None:
    # 4 pods: p0 within its range, 1 h old (rejected: young); p1 below the cpu lower bound,
    # 11:59 h old (accepted: outside); p2 within, 13 h old, ResourceDiff (150-100)/150 +
    # (200-128)/200 = 0.69 >= 0.1 (accepted for its age); p3 without a memory request, on no
    # node (accepted: outside)
    world = World()
    cache = PriorityCache()
    answers(world, cache)
    assert cache.priced == 4
    answers(world, cache)
    # nothing changed, but p2 was accepted for its age: its reason names how long it ran, so
    # it is priced each iteration
    assert cache.priced == 1
    apply(world, ("time", 0, 0))  # 1 minute on: p1 (11:59 h) reaches the 12 h threshold
    answers(world, cache)
    assert cache.priced == 2
    apply(world, ("recommendation", 1, 0))  # a new recommendation: every pod priced anew
    answers(world, cache)
    assert cache.priced == 4
    apply(world, ("delete_pod", 0, 0))
    answers(world, cache)
    assert (cache.released, len(cache)) == (1, 3)
