"""Hostile ``ExtenderArgs`` at the extender's routes over HTTP (issue 27, 13).

kube-scheduler reads a filter answer as an ``ExtenderFilterResult``: any status but 200 is an
error, and a 200 with ``Error`` set is the protocol's way to refuse (``pkg/scheduler/
extender.go``: ``if result.Error != "" { return ..., errors.New(result.Error) }``; an
``ignorable`` extender is then skipped). So bad input must be answered with a 200 carrying
``Error`` (naming the field), never a 500 with a traceback logged at error level. Prioritize's
answer is a bare list, so its refusal is a 400 with ``{"Error": ...}``; kube-scheduler ignores
prioritize errors either way.

Bodies: JSON nested up to 100,000 deep (in the pod, in a node item, at the top), quantities of
every size (beyond int64, ``1e400``, non-strings), wrong-typed affinity terms, tolerations,
spread constraints and selectors, duplicate and unknown node names, and arbitrary bytes. The
policy runs every placement rule (taints, node affinity, inter-pod anti-affinity, topology
spread, LowNodeUtilization) so the generated pods go all the way through the decisions.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.base.clock import VirtualClock
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.extender.cluster_cache import ClusterCache
from kubescale.extender.extender_config import ExtenderSettings
from kubescale.extender.extender_routes import SchedulerExtender
from tests.controllers.descheduler.builders import NOW, cycle_node, cycle_pod, policy

POLICY = policy(
    ("deschedule", "RemovePodsViolatingNodeTaints", {"includePreferNoSchedule": True}),
    (
        "deschedule",
        "RemovePodsViolatingNodeAffinity",
        {
            "nodeAffinityType": [
                "requiredDuringSchedulingIgnoredDuringExecution",
                "preferredDuringSchedulingIgnoredDuringExecution",
            ]
        },
    ),
    ("deschedule", "RemovePodsViolatingInterPodAntiAffinity", None),
    (
        "balance",
        "RemovePodsViolatingTopologySpreadConstraint",
        {"constraints": ["DoNotSchedule", "ScheduleAnyway"]},
    ),
    ("balance", "LowNodeUtilization", {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}),
)
SOFT = {"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}
NODE_NAMES = ["n1", "n2", "n3", "n4"]
NODES = [
    cycle_node("n1", taints=[SOFT], labels={"zone": "a"}),
    cycle_node("n2", labels={"zone": "a"}),
    cycle_node("n3", labels={"zone": "b"}),
    cycle_node("n4", labels={"zone": "b", "disk": "ssd"}),
]
SPREAD = {
    "maxSkew": 1,
    "topologyKey": "zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}
RUNNING = [
    cycle_pod(
        "busy",
        "n2",
        cpu="3000m",
        labels={"app": "web"},
        spec={"topologySpreadConstraints": [SPREAD]},
    ),
    cycle_pod("light", "n3", cpu="100m", labels={"app": "web"}),
    cycle_pod("medium", "n4", cpu="1000m", labels={"app": "db"}),
]

# -- values ----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` 9 times in 10, any JSON value (of any type) otherwise."""
    return st.integers(min_value=0, max_value=9).flatmap(lambda k: JSON_VALUES if k == 0 else good)


QUANTITIES = st.one_of(
    st.sampled_from(
        [
            "100m",
            "1",
            "1.5",
            "128Mi",
            "8Ei",
            "9223372036854775807",
            "9223372036854775808",
            "99999999999999999999999999999",
            "9999999999999999999Ei",
            "1e400",
            "1e-400",
            "-1",
            "1n",
            "abc",
            "",
            "NaN",
        ]
    ),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    JSON_VALUES,
)
RESOURCES = mostly(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "pods", "example.com/gpu"]), QUANTITIES, max_size=3
    )
)
CONTAINERS = st.lists(
    mostly(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["app", "side"])},
            optional={
                "resources": mostly(
                    st.fixed_dictionaries({}, optional={"requests": RESOURCES, "limits": RESOURCES})
                )
            },
        )
    ),
    max_size=2,
)
STRINGS = mostly(st.sampled_from(["zone", "app", "web", "a", "b", "In", "NotIn", "Exists", "Gt"]))
REQUIREMENTS = st.lists(
    mostly(
        st.fixed_dictionaries(
            {"key": STRINGS, "operator": STRINGS},
            optional={"values": mostly(st.lists(STRINGS, max_size=2))},
        )
    ),
    max_size=2,
)
SELECTORS = mostly(
    st.fixed_dictionaries(
        {},
        optional={
            "matchLabels": mostly(
                st.dictionaries(STRINGS.filter(lambda v: isinstance(v, str)), STRINGS, max_size=2)
            ),
            "matchExpressions": mostly(REQUIREMENTS),
        },
    )
)
NODE_TERMS = mostly(
    st.fixed_dictionaries(
        {}, optional={"matchExpressions": REQUIREMENTS, "matchFields": REQUIREMENTS}
    )
)
POD_TERMS = mostly(
    st.fixed_dictionaries(
        {},
        optional={
            "labelSelector": SELECTORS,
            "topologyKey": STRINGS,
            "namespaces": mostly(st.lists(STRINGS, max_size=2)),
            "namespaceSelector": SELECTORS,
            "matchLabelKeys": mostly(st.lists(STRINGS, max_size=2)),
        },
    )
)
WEIGHTS = mostly(st.integers(min_value=-5, max_value=2**70))
AFFINITY = mostly(
    st.fixed_dictionaries(
        {},
        optional={
            "nodeAffinity": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "requiredDuringSchedulingIgnoredDuringExecution": mostly(
                            st.fixed_dictionaries(
                                {"nodeSelectorTerms": mostly(st.lists(NODE_TERMS, max_size=2))}
                            )
                        ),
                        "preferredDuringSchedulingIgnoredDuringExecution": mostly(
                            st.lists(
                                mostly(
                                    st.fixed_dictionaries(
                                        {"weight": WEIGHTS, "preference": NODE_TERMS}
                                    )
                                ),
                                max_size=2,
                            )
                        ),
                    },
                )
            ),
            "podAntiAffinity": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "requiredDuringSchedulingIgnoredDuringExecution": mostly(
                            st.lists(POD_TERMS, max_size=2)
                        ),
                        "preferredDuringSchedulingIgnoredDuringExecution": mostly(
                            st.lists(
                                st.fixed_dictionaries(
                                    {"weight": WEIGHTS, "podAffinityTerm": POD_TERMS}
                                ),
                                max_size=2,
                            )
                        ),
                    },
                )
            ),
            "podAffinity": mostly(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "requiredDuringSchedulingIgnoredDuringExecution": st.lists(
                            POD_TERMS, max_size=2
                        )
                    },
                )
            ),
        },
    )
)
TOLERATIONS = st.lists(
    mostly(
        st.fixed_dictionaries(
            {},
            optional={
                "key": STRINGS,
                "operator": mostly(st.sampled_from(["Exists", "Equal"])),
                "value": STRINGS,
                "effect": mostly(st.sampled_from(["PreferNoSchedule", "NoSchedule", ""])),
                "tolerationSeconds": WEIGHTS,
            },
        )
    ),
    max_size=2,
)
SPREADS = st.lists(
    mostly(
        st.fixed_dictionaries(
            {
                "maxSkew": WEIGHTS,
                "topologyKey": STRINGS,
                "whenUnsatisfiable": mostly(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
            },
            optional={
                "labelSelector": SELECTORS,
                "matchLabelKeys": mostly(st.lists(STRINGS, max_size=2)),
                "nodeAffinityPolicy": STRINGS,
                "nodeTaintsPolicy": STRINGS,
                "minDomains": WEIGHTS,
            },
        )
    ),
    max_size=2,
)
SPECS = st.fixed_dictionaries(
    {},
    optional={
        "containers": mostly(CONTAINERS),
        "initContainers": mostly(CONTAINERS),
        "overhead": RESOURCES,
        "affinity": AFFINITY,
        "tolerations": mostly(TOLERATIONS),
        "topologySpreadConstraints": mostly(SPREADS),
        "nodeSelector": mostly(
            st.dictionaries(STRINGS.filter(lambda v: isinstance(v, str)), STRINGS, max_size=2)
        ),
        "priority": WEIGHTS,
        "volumes": mostly(
            st.lists(
                mostly(
                    st.fixed_dictionaries(
                        {"name": st.just("data")},
                        optional={
                            "persistentVolumeClaim": mostly(st.just({"claimName": "data"})),
                            "emptyDir": mostly(st.just({})),
                        },
                    )
                ),
                max_size=2,
            )
        ),
        "nodeName": STRINGS,
    },
)
OWNERS = st.one_of(
    st.just(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "u",
                "controller": True,
            }
        ]
    ),
    st.just(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "u",
                "controller": True,
            }
        ]
    ),
    st.just(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "u",
                "controller": True,
            }
        ]
    ),
    st.lists(JSON_VALUES, max_size=2),
    JSON_VALUES,
)
PODS = st.fixed_dictionaries(
    {
        "metadata": mostly(
            st.fixed_dictionaries(
                {
                    "name": mostly(st.just("web-1")),
                    "namespace": mostly(st.just("default")),
                    "labels": mostly(st.sampled_from([{"app": "web"}, {"app": "db"}, {}])),
                    "ownerReferences": OWNERS,
                },
                optional={
                    "annotations": mostly(st.just({"note": "x"})),
                    "creationTimestamp": mostly(st.just("2026-03-01T10:00:00Z")),
                },
            )
        ),
    },
    optional={
        "spec": mostly(SPECS),
        "status": mostly(
            st.fixed_dictionaries(
                {"phase": mostly(st.sampled_from(["Pending", "Running"]))},
                optional={"startTime": mostly(st.just("2026-03-01T10:00:00Z"))},
            )
        ),
    },
)
NAMES = st.integers(min_value=0, max_value=9).flatmap(
    lambda k: (
        st.lists(st.sampled_from(NODE_NAMES), max_size=6)
        if k < 7
        else st.lists(
            st.one_of(st.sampled_from(NODE_NAMES), st.sampled_from(["n9", ""]), JSON_VALUES),
            max_size=6,
        )
    )
)


def node_list(names: list[Any]) -> dict[str, Any]:
    by_name = {n["metadata"]["name"]: n for n in NODES}
    return {
        "kind": "NodeList",
        "apiVersion": "v1",
        "items": [
            by_name.get(n, {"metadata": {"name": n}}) if isinstance(n, str) else n for n in names
        ],
    }


ARGS = st.one_of(
    st.builds(lambda p, n: {"Pod": p, "NodeNames": n}, PODS, NAMES),
    st.builds(lambda p, n: {"Pod": p, "Nodes": node_list(n), "NodeNames": None}, PODS, NAMES),
    st.builds(lambda p, n: {"pod": p, "nodenames": n}, PODS, NAMES),
)


def deep(depth: int, opener: str, closer: str, leaf: str = "1") -> str:
    return opener * depth + leaf + closer * depth


DEPTHS = st.sampled_from([10, 200, 900, 990, 1000, 1100, 3000, 100_000])
DEEP_BODIES = st.one_of(
    DEPTHS.map(lambda d: deep(d, "[", "]").encode()),
    DEPTHS.map(
        lambda d: (
            '{"Pod": {"metadata": {"name": "p"}, "spec": {"affinity": '
            + deep(d, '{"a": ', "}")
            + '}}, "NodeNames": ["n3"]}'
        ).encode()
    ),
    DEPTHS.map(
        lambda d: (
            '{"Pod": {"metadata": {"name": "p", "labels": '
            + deep(d, "[", "]")
            + '}}, "NodeNames": ["n3"]}'
        ).encode()
    ),
    DEPTHS.map(
        lambda d: (
            '{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": '
            + '[{"metadata": {"name": "n3"}, "x": '
            + deep(d, "[", "]")
            + "}]}}"
        ).encode()
    ),
)
BODIES = st.one_of(
    ARGS.map(lambda a: json.dumps(a).encode()),
    DEEP_BODIES,
    st.binary(max_size=40),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
)


# -- the server ------------------------------------------------------------------------------


class ErrorRecords(logging.Handler):
    """Records at error level, and any record with a traceback: the routes' last resort (a
    warning with the traceback) would mean the input checks missed a case."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


class Harness:
    """One event loop and one extender server kept across examples."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.errors = ErrorRecords()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def start(self) -> None:
        clock = VirtualClock(NOW)
        cache = ClusterCache(policy=POLICY, now=clock.now).load(nodes=NODES, pods=RUNNING)
        memory = EvictionMemory(duration=timedelta(minutes=10))
        memory.record(cycle_pod("old", "n4"), "n4", NOW - timedelta(minutes=1))
        self.extender = SchedulerExtender(
            cache=cache,
            rules=PlacementRules.from_policy(POLICY),
            veto=memory,
            settings=ExtenderSettings(),
            clock=clock,
        )
        app = web.Application(client_max_size=16 << 20)
        self.extender.mount(app)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()
        self.session = aiohttp.ClientSession()
        self.url = f"http://127.0.0.1:{self.server.port}/scheduler"

    async def stop(self) -> None:
        await self.session.close()
        await self.server.close()

    async def post(self, verb: str, body: bytes) -> tuple[int, Any]:
        async with self.session.post(
            f"{self.url}/{verb}", data=body, headers={"Content-Type": "application/json"}
        ) as response:
            return response.status, json.loads(await response.read())


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    made = Harness()
    logging.getLogger().addHandler(made.errors)
    made.run(made.start())
    try:
        yield made
    finally:
        made.run(made.stop())
        made.loop.close()
        logging.getLogger().removeHandler(made.errors)


def request_names(body: bytes) -> list[str] | None:
    """The candidate names a well-formed request offered (``None`` if it is not one)."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    for key, value in raw.items():
        if key.lower() == "nodenames" and isinstance(value, list):
            return [v for v in value if isinstance(v, str)]
    nodes = next((v for k, v in raw.items() if k.lower() == "nodes"), None)
    if isinstance(nodes, dict) and isinstance(nodes.get("items"), list):
        return [
            i["metadata"]["name"]
            for i in nodes["items"]
            if isinstance(i, dict)
            and isinstance(i.get("metadata"), dict)
            and isinstance(i["metadata"].get("name"), str)
        ]
    return None


def check(harness: Harness, body: bytes) -> None:
    before = len(harness.errors.records)
    status, answer = harness.run(harness.post("filter", body))
    assert status == 200
    assert isinstance(answer, dict)
    assert set(answer) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert isinstance(answer["Error"], str)
    assert "Traceback" not in answer["Error"]
    assert "\n" not in answer["Error"]
    if answer["Error"]:
        assert answer["Nodes"] is None
        assert answer["NodeNames"] is None
    else:
        offered = request_names(body)
        assert offered is not None
        passed = (
            answer["NodeNames"]
            if answer["NodeNames"] is not None
            else [n["metadata"]["name"] for n in answer["Nodes"]["items"]]
        )
        assert isinstance(passed, list)
        refused = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
        assert set(passed) <= set(offered)
        assert set(refused) <= set(offered)
        assert not set(passed) & set(refused)
        # every distinct candidate is answered, once
        assert set(passed) | set(refused) == set(offered)
        assert len(passed) == len(set(passed))
        assert all(isinstance(m, str) and m for m in refused.values())
    status, answer = harness.run(harness.post("prioritize", body))
    assert status in (200, 400)
    if status == 400:
        assert isinstance(answer, dict)
        assert isinstance(answer["Error"], str)
        assert answer["Error"]
    else:
        assert isinstance(answer, list)
        assert all(set(a) == {"Host", "Score"} and 0 <= a["Score"] <= 10 for a in answer)
    assert harness.errors.records[before:] == []


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(body=BODIES)
def test_hostile_extender_args_get_a_well_formed_answer(harness: Harness, body: bytes) -> None:
    check(harness, body)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        # JSON nested deeper than the decoder's recursion: Error, not a 500 with a traceback
        (deep(100_000, "[", "]").encode(), "ExtenderArgs: nested too deeply"),
        (
            (
                '{"Pod": {"metadata": {"name": "p"}, "spec": {"affinity": '
                + deep(1000, '{"a": ', "}")
                + '}}, "NodeNames": ["n3"]}'
            ).encode(),
            "ExtenderArgs: nested too deeply",
        ),
        # a quantity beyond int64 (the API server's own limit for requests)
        (
            json.dumps(
                {
                    "Pod": {
                        "metadata": {"name": "p"},
                        "spec": {
                            "containers": [
                                {
                                    "name": "app",
                                    "resources": {"requests": {"cpu": "99999999999999999999"}},
                                }
                            ]
                        },
                    },
                    "NodeNames": ["n3"],
                }
            ).encode(),
            "Pod.spec.containers[0].resources.requests.cpu: ",
        ),
        # a wrong-typed affinity term
        (
            json.dumps(
                {
                    "Pod": {
                        "metadata": {"name": "p"},
                        "spec": {
                            "affinity": {
                                "nodeAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                        "nodeSelectorTerms": ["zone"]
                                    }
                                }
                            }
                        },
                    },
                    "NodeNames": ["n3"],
                }
            ).encode(),
            "Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0]: ",
        ),
        (
            json.dumps(
                {
                    "Pod": {
                        "metadata": {"name": "p"},
                        "spec": {
                            "affinity": {
                                "podAntiAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {"topologyKey": 5}
                                    ]
                                }
                            }
                        },
                    },
                    "NodeNames": ["n3"],
                }
            ).encode(),
            "Pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]."
            "topologyKey: ",
        ),
        # a label key with a newline (found by the fuzz above): the key is quoted, one line
        (
            b'{"Pod": {"metadata": {"name": "web-1", "namespace": "default", '
            b'"labels": {"\\n": null}}}, "NodeNames": []}',
            'Pod.metadata.labels["\\n"]: must be a string, got null',
        ),
    ],
)
def test_known_hostile_inputs_name_the_problem(harness: Harness, body: bytes, error: str) -> None:
    check(harness, body)
    _, answer = harness.run(harness.post("filter", body))
    assert answer["Error"].startswith(error), answer["Error"]


def test_duplicate_node_names_keep_the_all_refused_fallback(harness: Harness) -> None:
    """n1 (PreferNoSchedule taint, not tolerated) and n2 (75 % cpu > 50 %) are both refused by
    the policy: with only those offered none is refused (never strand a pod). Offered with
    duplicates ``[n1, n2, n1]`` the dict of refusals had 2 entries against 3 names, and the
    fallback did not fire: every node was refused."""
    the_pod = cycle_pod("web-9", None, cpu="500m")
    for names in (["n1", "n2"], ["n1", "n2", "n1"], ["n2", "n2"]):
        body = json.dumps({"Pod": the_pod, "NodeNames": names}).encode()
        check(harness, body)
        _, answer = harness.run(harness.post("filter", body))
        assert answer["Error"] == ""
        assert answer["NodeNames"] == list(dict.fromkeys(names))
        assert answer["FailedNodes"] == answer["FailedAndUnresolvableNodes"] == {}
