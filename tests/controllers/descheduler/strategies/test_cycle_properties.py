"""Properties of the cycle and of the vectorized utilization the extender uses.

1. The limits hold whatever the cluster: a cycle never evicts more than
   ``maxNoOfPodsToEvictTotal``, nor more per node or per namespace than their limits, and
   never a pod the DefaultEvictor protects (bare, DaemonSet, critical, local storage). Checked
   against a copy whose node limit test used ``>`` instead of ``+ 1 >``, it fails at once.
2. The extender's vectorized LowNodeUtilization classification and "over after placement" are
   the strategy's scalar arithmetic, node for node (both thresholds modes), so the extender
   and the cycle cannot disagree about a node.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.controllers.descheduler.strategies.node_utilization import lnu_classification
from kubescale.scheduling.cycle_view import CycleView
from kubescale.scheduling.policy.utilization_args import (
    read_low_node_utilization_args,
)
from kubescale.scheduling.utilization_arrays import (
    UtilizationArrays,
    lnu_over_after,
    lnu_vector,
)
from kubescale.scheduling.utilization_math import node_capacity
from tests.controllers.descheduler.builders import NOW, cycle_node, cycle_pod, owner, policy, run

TAINT = {"key": "bad", "effect": "NoSchedule"}
PROTECTED: dict[str, dict[str, Any]] = {
    "bare": {"owners": []},
    "daemon": {"owners": [owner("DaemonSet", "ds")]},
    "critical": {"priority": 2_000_000_000},
    "local": {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}},
}


@st.composite
def limited_clusters(draw: st.DrawFn) -> tuple[Any, list[Any], list[Any], dict[str, int]]:
    count = draw(st.integers(2, 4))
    nodes = [
        cycle_node(f"n{i}", taints=[TAINT] if draw(st.booleans()) else []) for i in range(count)
    ]
    pods = []
    for j in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["plain", "plain", "plain", *PROTECTED]))
        pods.append(
            cycle_pod(
                f"{kind}-{j}",
                f"n{draw(st.integers(0, count - 1))}",
                namespace=draw(st.sampled_from(["a", "b", "c"])),
                cpu="100m",
                **PROTECTED.get(kind, {}),
            )
        )
    limits = {
        key: draw(st.integers(0, 5))
        for key in (
            "maxNoOfPodsToEvictTotal",
            "maxNoOfPodsToEvictPerNode",
            "maxNoOfPodsToEvictPerNamespace",
        )
        if draw(st.booleans())
    }
    plugins = [
        ("deschedule", "RemovePodsViolatingNodeTaints", None),
        ("deschedule", "PodLifeTime", {"maxPodLifeTimeSeconds": 60}),
        ("balance", "RemoveDuplicates", None),
    ]
    return policy(*plugins, **limits), nodes, pods, limits


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(limited_clusters(), st.randoms(use_true_random=False))
def test_limits_and_protections_hold(
    case: tuple[Any, list[Any], list[Any], dict[str, int]], rng: Any
) -> None:
    the_policy, nodes, pods, limits = case
    # some evictions fail (a PDB): they must not count against the limits
    report = run(the_policy, nodes, pods, answer=lambda request: rng.random() < 0.8)
    evicted = report.evicted
    if "maxNoOfPodsToEvictTotal" in limits:
        assert len(evicted) <= limits["maxNoOfPodsToEvictTotal"]
    if "maxNoOfPodsToEvictPerNode" in limits:
        assert (
            max(Counter(r.node for r in evicted).values(), default=0)
            <= limits["maxNoOfPodsToEvictPerNode"]
        )
    if "maxNoOfPodsToEvictPerNamespace" in limits:
        assert (
            max(Counter(r.namespace for r in evicted).values(), default=0)
            <= limits["maxNoOfPodsToEvictPerNamespace"]
        )
    assert not [r.pod for r in evicted if not r.pod.split("/")[1].startswith("plain")]


@st.composite
def utilization_cases(draw: st.DrawFn) -> tuple[Any, list[Any], dict[str, dict[str, int]]]:
    count = draw(st.integers(1, 8))
    nodes = [
        cycle_node(
            f"n{i}",
            cpu=str(draw(st.integers(1, 16))),
            pods=str(draw(st.integers(0, 30))),
            unschedulable=draw(st.integers(0, 4)) == 0,
        )
        for i in range(count)
    ]
    usage = {
        f"n{i}": {
            "cpu": draw(st.integers(0, 20_000)),
            "memory": draw(st.integers(0, 1 << 34)),
            "pods": draw(st.integers(0, 40)),
        }
        for i in range(count)
    }
    resources = draw(st.sampled_from([["cpu"], ["pods"], ["cpu", "memory"], ["cpu", "pods"]]))
    deviation = draw(st.booleans())
    low = {r: draw(st.floats(0, 100, allow_nan=False)) for r in resources}
    high = {
        r: draw(st.floats(low[r] if not deviation else 0, 100, allow_nan=False)) for r in resources
    }
    args = read_low_node_utilization_args(
        {
            "thresholds": low,
            "targetThresholds": high,
            "useDeviationThresholds": deviation,
            "numberOfNodes": draw(st.integers(0, 2)),
        },
        "args",
    )
    return args, nodes, usage


@settings(max_examples=300, deadline=None)
@given(utilization_cases(), st.data())
def test_vectorized_utilization_matches_the_strategy(
    case: tuple[Any, list[Any], dict[str, dict[str, int]]], data: st.DataObject
) -> None:
    args, nodes, usage = case
    resources = ["cpu", "memory", "pods"]
    arrays = UtilizationArrays.from_usage(
        nodes=nodes,
        usage=usage,
        capacity={n["metadata"]["name"]: node_capacity(n) for n in nodes},
        resources=resources,
    )
    scalar = lnu_classification(nodes=nodes, usage=usage, args=args)
    vector = lnu_vector(arrays, args)
    assert [arrays.names[i] for i in vector.under.nonzero()[0]] == list(scalar.under)
    assert [arrays.names[i] for i in vector.over.nonzero()[0]] == list(scalar.over)
    # one pod more on a node: the strategy's classification of that cluster
    target = data.draw(st.integers(0, len(nodes) - 1))
    added = {"cpu": data.draw(st.integers(0, 4000)), "memory": 0, "pods": 1}
    name = arrays.names[target]
    after = {n: dict(u) for n, u in usage.items()}
    for resource, amount in added.items():
        after[name][resource] += amount
    placed = lnu_classification(nodes=nodes, usage=after, args=args)
    columns = [arrays.column[r] for r in args.thresholds]
    over = lnu_over_after(
        arrays,
        vector,
        args,
        candidates=[target],
        added=[added[arrays.resources[c]] for c in columns],
    )
    if args.use_deviation_thresholds:
        assert bool(over[0]) == (name in placed.over)
    else:
        acts = (
            len(placed.under) > 0
            and len(placed.under) > args.number_of_nodes
            and len(placed.under) < len(nodes)
        )
        assert bool(over[0]) == (name in placed.over and acts)


def _naive_fits_any(view: Any, pod: Any, names: list[str]) -> bool:
    """The pod off its node, the scheduler's filters computed from scratch."""
    snapshot = view.snapshot.copy()
    current = pod["spec"].get("nodeName")
    if current:
        snapshot.remove_pod(current, pod)
    return any(snapshot.fits(pod, name) for name in names if name != current)


@st.composite
def affinity_clusters(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    count = draw(st.integers(2, 5))
    nodes = [
        cycle_node(f"n{i}", cpu="4", labels={"zone": draw(st.sampled_from(["a", "b"]))})
        for i in range(count)
    ]
    pods = []
    for j in range(draw(st.integers(1, 12))):
        app = draw(st.sampled_from(["x", "y"]))
        affinity: dict[str, Any] = {}
        kind = draw(st.sampled_from(["", "podAntiAffinity", "podAffinity"]))
        if kind:
            affinity[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchLabels": {"app": draw(st.sampled_from(["x", "y"]))}
                        },
                        "topologyKey": draw(st.sampled_from(["zone", "kubernetes.io/hostname"])),
                    }
                ]
            }
        extra: dict[str, Any] = {"affinity": affinity} if affinity else {}
        if draw(st.booleans()):  # PodTopologySpread, counted with the pod off its node
            extra["topologySpreadConstraints"] = [
                {
                    "maxSkew": draw(st.integers(1, 2)),
                    "topologyKey": draw(st.sampled_from(["zone", "kubernetes.io/hostname"])),
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        pods.append(
            cycle_pod(
                f"p{j}",
                f"n{draw(st.integers(0, count - 1))}",
                cpu=f"{draw(st.integers(1, 15)) * 100}m",
                labels={"app": app},
                owners=[owner(name=app)],
                spec=extra or None,
            )
        )
    return nodes, pods


@settings(max_examples=200, deadline=None)
@given(affinity_clusters())
def test_fits_any_with_shared_topology_counts_matches_counting_from_scratch(
    case: tuple[list[Any], list[Any]],
) -> None:
    # CycleView.fits_any computes InterPodAffinity's counts once per (namespace, labels,
    # affinity) and takes each pod's own share off; it must agree with counting afresh.
    nodes, pods = case
    view = CycleView(now=NOW, nodes=nodes, pods=pods)
    names = [n["metadata"]["name"] for n in nodes]
    for the_pod in pods:
        expected = _naive_fits_any(view, the_pod, names)
        assert view.fits_any(the_pod, nodes, other_nodes_only=True) == expected
