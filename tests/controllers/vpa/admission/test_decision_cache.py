"""The memo's decisions answer exactly what ``admit_pod`` answers, on every input it depends on.

Property: for random pods (containers, init containers, statuses, overhead, and fields the
decision does not read: names, labels, annotations, images, env), random VPAs, LimitRanges,
HPAs, largest nodes and flags, a sequence of requests interleaved with changes of the VPA, the
LimitRanges, the HPAs and the largest node — each change a new resourceVersion, as the API
server writes it — :func:`admit_cached` returns what :func:`admit_pod` returns on the full pod
with the inputs of that moment; the same request asked again is a hit with the same answer; a
pod of the same shape that differs only in what the decision does not read shares the entry.

Then the table of the key: which differences make a new entry and which do not.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.admission.admission_memo import (
    AdmissionMemo,
    admit_cached,
    decision_pod,
    encode_patch,
)
from kubescale.controllers.vpa.api.pod_admission import PodAdmissionError, admit_pod
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import VerticalPodAutoscaler
from tests import builders
from tests.builders.meta import stored_as
from tests.controllers.vpa.api.test_limit_range_property import (
    limit_ranges,
    pods,
    resource_lists,
    vpas,
)

ODD = st.one_of(st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2))


@st.composite
def decorated_pods(draw: st.DrawFn) -> dict[str, Any]:
    """A pod of :func:`pods` with statuses, overhead, sidecars, odd values and fields the
    decision does not read."""
    pod = draw(pods())
    spec = pod["spec"]
    for container in spec["containers"]:
        if draw(st.booleans()):
            container["env"] = [{"name": "X", "value": draw(st.text(max_size=3))}]
    for init in spec.get("initContainers", []):
        if draw(st.booleans()):
            init["restartPolicy"] = draw(st.sampled_from(["Always", "OnFailure"]))
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        spec["overhead"] = draw(resource_lists())
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        pod["status"] = {
            "containerStatuses": [
                {"name": c["name"], "resources": {"requests": draw(resource_lists())}}
                for c in spec["containers"]
                if draw(st.booleans())
            ]
        }
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        spec["containers"].append(draw(ODD))  # a malformed entry
    annotations = draw(st.one_of(st.none(), st.just({}), st.just({"a": "b"}), ODD))
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    return pod


def renamed(pod: dict[str, Any], index: int) -> dict[str, Any]:
    """Another pod of the same shape: name, labels, annotation values, images differ."""
    other = copy.deepcopy(pod)
    metadata = other["metadata"]
    metadata["name"] = f"web-{index}"
    metadata["labels"] = {"pod-index": str(index)}
    if isinstance(metadata.get("annotations"), dict):
        metadata["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    for container in other["spec"]["containers"]:
        if isinstance(container, dict):
            container["image"] = f"app:{index}"
    return other


HPAS = st.lists(
    st.fixed_dictionaries(
        {
            "apiVersion": st.just("autoscaling/v2"),
            "kind": st.just("HorizontalPodAutoscaler"),
            "metadata": st.fixed_dictionaries(
                {"name": st.sampled_from(["h1", "h2"]), "namespace": st.just("default")}
            ),
            "spec": st.fixed_dictionaries(
                {
                    "scaleTargetRef": st.just({"kind": "Deployment", "name": "web"}),
                    "metrics": st.lists(
                        st.sampled_from(["cpu", "memory"]).map(
                            lambda name: {"type": "Resource", "resource": {"name": name}}
                        ),
                        max_size=2,
                    ),
                }
            ),
        }
    ),
    max_size=2,
    unique_by=lambda hpa: str(hpa["metadata"]["name"]),  # type: ignore[index]
)
NODES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "cpu": st.sampled_from(["100m", "1", "1000m", "4"]),
            "memory": st.sampled_from(["256Mi", "268435456", "8Gi"]),
        }
    ).map(lambda node: {name: Quantity.parse(text) for name, text in node.items()}),
)


class World:
    """The inputs of one moment, versioned as the API server versions them."""

    def __init__(self, vpa: dict[str, Any], ranges: list[dict[str, Any]]) -> None:
        self.version = 0
        self.vpa = self.stamp(vpa, uid="vpa-uid")
        self.ranges = [self.stamp(r, uid=f"lr-{i}") for i, r in enumerate(ranges)]
        self.hpas: list[HorizontalPodAutoscaler] = []
        self.largest: dict[str, Quantity] | None = None

    # hypothesis-built JSON (malformed on purpose at times), typed as an informer's objects
    def typed_vpa(self) -> VerticalPodAutoscaler:
        return stored_as(self.vpa, VerticalPodAutoscaler)

    def typed_ranges(self) -> list[LimitRange]:
        return [stored_as(r, LimitRange) for r in self.ranges]

    def stamp(self, obj: dict[str, Any], *, uid: str) -> dict[str, Any]:
        self.version += 1
        stamped = copy.deepcopy(obj)
        stamped["metadata"] = {**stamped["metadata"], "uid": uid}
        stamped["metadata"]["resourceVersion"] = str(self.version)
        return stamped


def expected(pod: dict[str, Any], world: World, *, avoid: bool, cap: bool) -> Any:
    try:
        result = admit_pod(
            pod=stored_as(copy.deepcopy(pod), Pod),
            vpa=world.typed_vpa(),
            limit_ranges=world.typed_ranges(),
            hpas=world.hpas,
            avoid_hpa_conflict=avoid,
            largest_node_allocatable=world.largest if cap else None,
        )
    except PodAdmissionError as error:
        return ("error", str(error))
    return (
        tuple(result.patches),
        encode_patch(result.patches),
        result.skipped_resources,
        result.limit_range_conflicts,
    )


def cached(
    cache: AdmissionMemo, pod: dict[str, Any], world: World, *, avoid: bool, cap: bool
) -> Any:
    try:
        answer, _ = admit_cached(
            cache,
            pod=stored_as(pod, Pod),
            namespace="default",
            vpa=world.typed_vpa(),
            limit_ranges=world.typed_ranges(),
            hpas=world.hpas,
            avoid_hpa_conflict=avoid,
            largest_node_allocatable=world.largest,
            cap_to_largest_node=cap,
        )
    except PodAdmissionError as error:
        return ("error", str(error))
    return (
        answer.patches,
        answer.encoded_patch,
        answer.skipped_resources,
        answer.limit_range_conflicts,
    )


STEPS = st.lists(
    st.sampled_from(
        [
            "request",
            "request",
            "request",
            "vpa",
            "limit-ranges",
            "edit-limit-range",
            "hpas",
            "node",
            "same-vpa",
        ]
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    data=st.data(),
    shapes=st.lists(decorated_pods(), min_size=1, max_size=3),
    vpa=vpas(),
    ranges=limit_ranges(),
    avoid=st.booleans(),
    cap=st.booleans(),
    steps=STEPS,
)
def test_a_cached_answer_is_admit_pods_answer(
    *,
    data: st.DataObject,
    shapes: list[dict[str, Any]],
    vpa: dict[str, Any],
    ranges: list[dict[str, Any]],
    avoid: bool,
    cap: bool,
    steps: list[str],
) -> None:
    cache = AdmissionMemo(max_entries=4)  # small: the LRU drops entries along the way too
    world = World(vpa, ranges)
    for index, step in enumerate(steps):
        if step == "request":
            pod = renamed(data.draw(st.sampled_from(shapes)), index)
            want = expected(pod, world, avoid=avoid, cap=cap)
            assert cached(cache, pod, world, avoid=avoid, cap=cap) == want
            hits = cache.hits
            again = renamed(pod, index + 100)  # the next pod of the same ReplicaSet
            assert cached(cache, again, world, avoid=avoid, cap=cap) == want
            if want[0] != "error":
                assert cache.hits == hits + 1, "a pod of the same shape is a hit"
        elif step == "vpa":
            world.vpa = world.stamp(data.draw(vpas()), uid="vpa-uid")
        elif step == "same-vpa":  # a write that changes nothing the decision reads
            world.vpa = world.stamp(world.vpa, uid="vpa-uid")
        elif step == "limit-ranges":
            fresh = data.draw(limit_ranges())
            world.ranges = [world.stamp(r, uid=f"lr-{i}") for i, r in enumerate(fresh)]
        elif step == "edit-limit-range" and world.ranges:
            # kubectl edit: same name and uid, another spec, a new resourceVersion
            which = data.draw(st.integers(min_value=0, max_value=len(world.ranges) - 1))
            edited = copy.deepcopy(world.ranges[which])
            edited["spec"] = data.draw(limit_ranges().filter(bool))[0]["spec"]
            world.ranges[which] = world.stamp(edited, uid=f"lr-{which}")
        elif step == "hpas":
            world.hpas = [
                cast(HorizontalPodAutoscaler, world.stamp(h, uid=f"hpa-{i}"))
                for i, h in enumerate(data.draw(HPAS))
            ]
        elif step == "node":
            world.largest = data.draw(NODES)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    pod=decorated_pods(),
    vpa=vpas(),
    ranges=limit_ranges().filter(bool),
    avoid=st.booleans(),
    cap=st.booleans(),
    edit=st.sampled_from(["vpa", "limit-range", "hpas", "node"]),
)
def test_an_edit_is_seen_by_the_next_request(
    *,
    data: st.DataObject,
    pod: dict[str, Any],
    vpa: dict[str, Any],
    ranges: list[dict[str, Any]],
    avoid: bool,
    cap: bool,
    edit: str,
) -> None:
    """One input edited in place (same name and uid, another spec, a new resourceVersion — what
    ``kubectl edit`` does) between two requests of the same shape: the second answer is
    ``admit_pod``'s with the edited input. The sequence property above meets this case only
    now and then; here every example is one."""
    cache = AdmissionMemo()
    world = World(vpa, ranges)
    world.hpas = [
        cast(HorizontalPodAutoscaler, world.stamp(h, uid=f"hpa-{i}"))
        for i, h in enumerate(data.draw(HPAS))
    ]
    world.largest = data.draw(NODES)
    assert cached(cache, pod, world, avoid=avoid, cap=cap) == expected(
        pod, world, avoid=avoid, cap=cap
    )
    if edit == "vpa":
        edited = copy.deepcopy(world.vpa)
        fresh = data.draw(vpas())
        edited["spec"], edited["status"] = fresh["spec"], fresh["status"]
        world.vpa = world.stamp(edited, uid="vpa-uid")
    elif edit == "limit-range":
        index = data.draw(st.integers(min_value=0, max_value=len(world.ranges) - 1))
        edited = copy.deepcopy(world.ranges[index])
        edited["spec"] = data.draw(limit_ranges().filter(bool))[0]["spec"]
        world.ranges[index] = world.stamp(edited, uid=f"lr-{index}")
    elif edit == "hpas":
        world.hpas = [
            cast(HorizontalPodAutoscaler, world.stamp(h, uid=f"hpa-{i}"))
            for i, h in enumerate(data.draw(HPAS))
        ]
    else:
        world.largest = data.draw(NODES)
    again = renamed(pod, 1)
    assert cached(cache, again, world, avoid=avoid, cap=cap) == expected(
        again, world, avoid=avoid, cap=cap
    )


# -- the key, row by row ------------------------------------------------------------------


VPA_OF_WEB = functools.partial(
    builders.vpas.typed_vpa,
    name="v",
    uid="u",
    resource_version="1",
    target=builders.vpas.target_ref(api_version=None),
    targets={"app": {"cpu": "1"}},
    api_version=None,
)
"""The VPA of the memo's keys (``resource_version``/``uid`` vary)."""


pod_a = functools.partial(builders.pods.typed_pod, name="a", labels={"x": "1"}, api_version=None)
"""Pod ``a`` (its container ``app`` given by each row)."""


def _range(rv: str, name: str = "lr") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name, "resourceVersion": rv},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]},
    }


BASE: dict[str, Any] = {
    "pod": pod_a(containers=[builders.pods.container(image="i", requests={"cpu": "100m"})]),
    "vpa": VPA_OF_WEB(),
    "limit_ranges": [_range("5")],
    "hpas": [],
    "avoid": False,
    "largest": None,
    "cap": False,
}


@pytest.mark.parametrize(
    ("change", "new_entry"),
    [
        # what the decision reads: a new entry
        ({"vpa": VPA_OF_WEB(resource_version="2")}, True),  # the VPA was written
        ({"vpa": VPA_OF_WEB(uid="other")}, True),  # another VPA (deleted and re-created)
        ({"limit_ranges": [_range("6")]}, True),  # the LimitRange was written
        ({"limit_ranges": []}, True),  # ... deleted
        ({"limit_ranges": [_range("5"), _range("7", "more")]}, True),  # ... one added
        (
            {
                "pod": pod_a(
                    containers=[builders.pods.container(image="i", requests={"cpu": "200m"})]
                )
            },
            True,
        ),  # other requests
        (
            {
                "pod": pod_a(
                    containers=[builders.pods.container(image="i", requests={"cpu": "0.1"})]
                )
            },
            True,
        ),  # same value, other text
        ({"avoid": True}, True),  # the flags
        ({"cap": True, "largest": {"cpu": Quantity.parse("4")}}, True),
        # what it does not read: the same entry
        (
            {
                "pod": {
                    **pod_a(
                        containers=[builders.pods.container(image="i", requests={"cpu": "100m"})]
                    ),
                    "kind": "Pod",
                }
            },
            False,
        ),
        (
            {
                "pod": {
                    "metadata": {"name": "b", "namespace": "default", "labels": {"x": "2"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "image": "j",
                                "resources": {"requests": {"cpu": "100m"}},
                            }
                        ],
                        "nodeName": "n1",
                    },
                }
            },
            False,
        ),  # another pod of the ReplicaSet: name, labels, image, node
        ({"largest": {"cpu": Quantity.parse("4")}}, False),  # node fit off: nodes not read
    ],
)
def test_what_makes_a_new_entry(change: dict[str, Any], new_entry: bool) -> None:
    cache = AdmissionMemo()

    def ask(inputs: dict[str, Any]) -> None:
        admit_cached(
            cache,
            pod=inputs["pod"],
            namespace="default",
            vpa=inputs["vpa"],
            limit_ranges=inputs["limit_ranges"],
            hpas=inputs["hpas"],
            avoid_hpa_conflict=inputs["avoid"],
            largest_node_allocatable=inputs["largest"],
            cap_to_largest_node=inputs["cap"],
        )

    ask(BASE)
    ask({**BASE, **change})
    assert (cache.misses, cache.hits) == ((2, 0) if new_entry else (1, 1))


def test_the_projection_keeps_what_the_decision_reads() -> None:
    pod = {
        "apiVersion": "v1",
        "metadata": {
            "name": "web-0",
            "namespace": "ns",
            "labels": {"a": "b"},
            "annotations": {"k": "v"},
            "ownerReferences": [{"kind": "ReplicaSet"}],
        },
        "spec": {
            "containers": [{"name": "app", "image": "x", "resources": {"limits": {}}}, "odd"],
            "initContainers": [{"name": "init", "restartPolicy": "Always", "args": ["-v"]}],
            "overhead": {"cpu": "10m"},
            "nodeName": "n",
        },
        "status": {"containerStatuses": [{"name": "app", "resources": {}, "ready": True}]},
    }
    assert decision_pod(stored_as(pod, Pod)) == {
        "metadata": {"namespace": "ns", "annotations": {}},
        "spec": {
            "containers": [{"name": "app", "resources": {"limits": {}}}, "odd"],
            "initContainers": [{"name": "init", "restartPolicy": "Always"}],
            "overhead": {"cpu": "10m"},
        },
        "status": {"containerStatuses": [{"name": "app", "resources": {}}]},
    }


def test_size_age_and_invalidation() -> None:
    now = [0.0]
    cache = AdmissionMemo(max_entries=2, max_age=10.0, now=lambda: now[0])
    pods = [
        pod_a(containers=[builders.pods.container(image="i", requests={"cpu": f"{i + 1}00m"})])
        for i in range(3)
    ]

    def ask(pod: Pod, vpa: VerticalPodAutoscaler | None = None) -> None:
        admit_cached(
            cache,
            pod=pod,
            namespace="default",
            vpa=vpa or VPA_OF_WEB(),
            limit_ranges=[],
            hpas=[],
            avoid_hpa_conflict=False,
            largest_node_allocatable=None,
            cap_to_largest_node=False,
        )

    for pod in pods:
        ask(pod)
    assert len(cache) == 2  # the least recently used went
    ask(pods[0])
    assert cache.misses == 4
    now[0] = 10.0
    ask(pods[0])  # too old: computed again
    assert cache.misses == 5
    cache.forget_vpa("u")  # the VPA changed: everything made with it goes
    assert len(cache) == 0
    ask(pods[1], VPA_OF_WEB(uid="w"))
    cache.forget_namespace("other")
    assert len(cache) == 1
    cache.forget_namespace("default")
    assert len(cache) == 0
    assert cache.dropped == 3
