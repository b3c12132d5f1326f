"""The simulated scheduler's filters, one table per constraint, against a real ApiServer store.

Every case places nodes and pods in the store, runs one :meth:`Scheduler.step` and reads back
where the pod went — or the exact ``PodScheduled=False`` message kube-scheduler would write,
built from upstream's reason strings (``Insufficient cpu``, ``node(s) had untolerated taint
{k: v}``, ``node(s) didn't match Pod's node affinity/selector`` ...).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import NODES, PODS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.scheduler import Scheduler
from tests import builders

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


node = builders.nodes.sim_node
"""A simulated node (``test`` instance type: 4 CPUs, 8Gi, 110 pods by default)."""


def container(
    name: str = "app", *, cpu: str | None = None, memory: str | None = None
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    body: dict[str, Any] = {"name": name, "image": "nginx"}
    if requests:
        body["resources"] = {"requests": requests}
    return body


pod = functools.partial(builders.pods.pod, labels={}, containers=[container()])
"""A pod (``default`` namespace, no labels) of one container ``app`` running ``nginx`` with no
requests; ``containers=[container(cpu=…)]`` for requests, ``spec`` for further fields."""


@dataclass(frozen=True)
class Case:
    id: str
    nodes: list[dict[str, Any]]
    pod: dict[str, Any]
    expect: str
    """The node the pod is bound to, or the PodScheduled=False message."""
    existing: list[dict[str, Any]] = field(default_factory=list)


async def place(case: Case) -> str:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    for obj in [*case.nodes, *case.existing]:
        created = api.store.create(obj)
        if obj.get("status", {}).get("phase"):
            api.store.update_status({**created, "status": {**created["status"], **obj["status"]}})
    api.store.create(case.pod)
    await Scheduler(api).step(clock.now())
    meta = case.pod["metadata"]
    stored = api.store.get(PODS, meta["name"], meta["namespace"])
    if stored["spec"].get("nodeName"):
        return str(stored["spec"]["nodeName"])
    (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    return str(condition["message"])


def unfit(total: int, reasons: str, preemption: str) -> str:
    return (
        f"0/{total} nodes are available: {reasons}. "
        f"preemption: 0/{total} nodes are available: {preemption}."
    )


def running(p: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    p["status"] = {"phase": phase}
    return p


RESOURCES = [
    Case("cpu fits", [node(name="n1")], pod(name="p", containers=[container(cpu="3")]), "n1"),
    Case(
        "cpu too big",
        [node(name="n1")],
        pod(name="p", containers=[container(cpu="5")]),
        unfit(1, "1 Insufficient cpu", f"1 {NO_VICTIMS}"),
    ),
    Case(
        "memory too big",
        [node(name="n1", memory="8Gi")],
        pod(name="p", containers=[container(memory="9Gi")]),
        unfit(1, "1 Insufficient memory", f"1 {NO_VICTIMS}"),
    ),
    Case(
        "both too big: every insufficient resource is a reason",
        [node(name="n1")],
        pod(name="p", containers=[container(cpu="5", memory="9Gi")]),
        unfit(1, "1 Insufficient cpu, 1 Insufficient memory", f"1 {NO_VICTIMS}"),
    ),
    Case(
        "an init container larger than the containers sets the request",
        [node(name="n1")],
        pod(
            name="p",
            containers=[container(cpu="1")],
            spec={"initContainers": [container("init", cpu="5")]},
        ),
        unfit(1, "1 Insufficient cpu", f"1 {NO_VICTIMS}"),
    ),
    Case(
        "an init container smaller than the containers does not add",
        [node(name="n1")],
        pod(
            name="p",
            containers=[container(cpu="3")],
            spec={"initContainers": [container("init", cpu="2")]},
        ),
        "n1",
    ),
    Case(
        "a sidecar (restartPolicy Always) adds to the containers",
        [node(name="n1")],
        pod(
            name="p",
            containers=[container(cpu="3")],
            spec={"initContainers": [{**container("proxy", cpu="2"), "restartPolicy": "Always"}]},
        ),
        unfit(1, "1 Insufficient cpu", f"1 {NO_VICTIMS}"),
    ),
    Case(
        "requests of pods already on the node count",
        [node(name="n1")],
        pod(name="p", containers=[container(cpu="2")]),
        unfit(1, "1 Insufficient cpu", f"1 {NO_VICTIMS}"),
        existing=[pod(name="old", node_name="n1", containers=[container(cpu="3")])],
    ),
    Case(
        "a finished pod frees its requests",
        [node(name="n1")],
        pod(name="p", containers=[container(cpu="2")]),
        "n1",
        existing=[
            running(pod(name="old", node_name="n1", containers=[container(cpu="3")]), "Succeeded")
        ],
    ),
    Case(
        "pods per node: the node's allocatable pods",
        [node(name="n1", pods=2)],
        pod(name="p"),
        unfit(1, "1 Too many pods", f"1 {NO_VICTIMS}"),
        existing=[pod(name="a", node_name="n1"), pod(name="b", node_name="n1")],
    ),
    Case(
        "a pod without requests fits any node with a pod slot",
        [node(name="n1", cpu="100m", memory="1Mi")],
        pod(name="p"),
        "n1",
    ),
]


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(**fields: str) -> list[dict[str, str]]:
    return [fields]


GPU = taint("dedicated", "gpu", "NoSchedule")
UNTOLERATED_GPU = unfit(1, "1 node(s) had untolerated taint {dedicated: gpu}", f"1 {NOT_HELPFUL}")

TAINTS = [
    Case("untolerated NoSchedule", [node(name="n1", taints=[GPU])], pod(name="p"), UNTOLERATED_GPU),
    Case(
        "Equal with the same value",
        [node(name="n1", taints=[GPU])],
        pod(
            name="p",
            spec={
                "tolerations": tol(
                    key="dedicated", operator="Equal", value="gpu", effect="NoSchedule"
                )
            },
        ),
        "n1",
    ),
    Case(
        "operator defaults to Equal",
        [node(name="n1", taints=[GPU])],
        pod(name="p", spec={"tolerations": tol(key="dedicated", value="gpu")}),
        "n1",
    ),
    Case(
        "Equal with another value",
        [node(name="n1", taints=[GPU])],
        pod(name="p", spec={"tolerations": tol(key="dedicated", operator="Equal", value="cpu")}),
        UNTOLERATED_GPU,
    ),
    Case(
        "Exists on the key",
        [node(name="n1", taints=[GPU])],
        pod(name="p", spec={"tolerations": tol(key="dedicated", operator="Exists")}),
        "n1",
    ),
    Case(
        "Exists without a key tolerates everything",
        [node(name="n1", taints=[GPU, taint("x", "y", "NoExecute")])],
        pod(name="p", spec={"tolerations": tol(operator="Exists")}),
        "n1",
    ),
    Case(
        "an effect that is not the taint's does not tolerate it",
        [node(name="n1", taints=[GPU])],
        pod(
            name="p",
            spec={"tolerations": tol(key="dedicated", operator="Exists", effect="NoExecute")},
        ),
        UNTOLERATED_GPU,
    ),
    Case(
        "untolerated NoExecute",
        [node(name="n1", taints=[taint("evict", "", "NoExecute")])],
        pod(name="p"),
        unfit(1, "1 node(s) had untolerated taint {evict: }", f"1 {NOT_HELPFUL}"),
    ),
    Case(
        "NoExecute tolerated",
        [node(name="n1", taints=[taint("evict", "", "NoExecute")])],
        pod(
            name="p", spec={"tolerations": tol(key="evict", operator="Exists", effect="NoExecute")}
        ),
        "n1",
    ),
    Case(
        "PreferNoSchedule does not filter",
        [node(name="n1", taints=[taint("soft", "x", "PreferNoSchedule")])],
        pod(name="p"),
        "n1",
    ),
    Case(
        "the first untolerated taint is the one reported",
        [node(name="n1", taints=[GPU, taint("second", "b", "NoSchedule")])],
        pod(name="p", spec={"tolerations": tol(key="dedicated", operator="Exists")}),
        unfit(1, "1 node(s) had untolerated taint {second: b}", f"1 {NOT_HELPFUL}"),
    ),
]

NOT_SELECTED = unfit(1, "1 node(s) didn't match Pod's node affinity/selector", f"1 {NOT_HELPFUL}")
GOLD = {"tier": "gold", "cores": "8"}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    body: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        body["values"] = list(values)
    return {"matchExpressions": [body]}


def affinity_case(case_id: str, term: dict[str, Any], matches: bool) -> Case:
    return Case(
        case_id,
        [node(name="n1", labels=GOLD)],
        pod(name="p", spec={"affinity": required(term)}),
        "n1" if matches else NOT_SELECTED,
    )


NODE_SELECTION = [
    Case(
        "nodeSelector matches",
        [node(name="n1", labels={"disk": "ssd"})],
        pod(name="p", spec={"nodeSelector": {"disk": "ssd"}}),
        "n1",
    ),
    Case(
        "nodeSelector differs",
        [node(name="n1", labels={"disk": "hdd"})],
        pod(name="p", spec={"nodeSelector": {"disk": "ssd"}}),
        NOT_SELECTED,
    ),
    Case(
        "nodeSelector key missing",
        [node(name="n1")],
        pod(name="p", spec={"nodeSelector": {"disk": "ssd"}}),
        NOT_SELECTED,
    ),
    affinity_case("In with the value", expr("tier", "In", "silver", "gold"), True),
    affinity_case("In without the value", expr("tier", "In", "silver"), False),
    affinity_case("NotIn without the value", expr("tier", "NotIn", "silver"), True),
    affinity_case("NotIn with the value", expr("tier", "NotIn", "gold"), False),
    affinity_case("NotIn on a missing label", expr("zone", "NotIn", "x"), True),
    affinity_case("Exists present", expr("tier", "Exists"), True),
    affinity_case("Exists absent", expr("gpu", "Exists"), False),
    affinity_case("DoesNotExist absent", expr("gpu", "DoesNotExist"), True),
    affinity_case("DoesNotExist present", expr("tier", "DoesNotExist"), False),
    affinity_case("Gt below", expr("cores", "Gt", "4"), True),
    affinity_case("Gt equal", expr("cores", "Gt", "8"), False),
    affinity_case("Lt above", expr("cores", "Lt", "16"), True),
    affinity_case("Lt equal", expr("cores", "Lt", "8"), False),
    affinity_case("Gt on a non-integer label", expr("tier", "Gt", "1"), False),
    affinity_case(
        "matchFields metadata.name In",
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        True,
    ),
    affinity_case(
        "matchFields metadata.name NotIn",
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
        False,
    ),
    affinity_case(
        "expressions of a term are ANDed",
        {
            "matchExpressions": [
                {"key": "tier", "operator": "Exists"},
                {"key": "gpu", "operator": "Exists"},
            ]
        },
        False,
    ),
    affinity_case("an empty term matches nothing", {}, False),
    Case(
        "terms are ORed",
        [node(name="n1", labels=GOLD)],
        pod(
            name="p", spec={"affinity": required(expr("gpu", "Exists"), expr("tier", "In", "gold"))}
        ),
        "n1",
    ),
    Case(
        "nodeSelector and affinity must both match",
        [node(name="n1", labels=GOLD)],
        pod(
            name="p",
            spec={"nodeSelector": {"disk": "ssd"}, "affinity": required(expr("tier", "Exists"))},
        ),
        NOT_SELECTED,
    ),
]

WEB = {"app": "web"}


def anti(topology: str, labels: Mapping[str, str] = WEB, **term: Any) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": topology, **term}
            ]
        }
    }


HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

ANTI_AFFINITY = [
    Case(
        "by hostname: the node without a matching pod",
        [node(name="n1"), node(name="n2")],
        pod(name="p", labels=WEB, spec={"affinity": anti(HOST)}),
        "n2",
        existing=[pod(name="web-0", labels=WEB, node_name="n1")],
    ),
    Case(
        "by hostname: every node taken",
        [node(name="n1"), node(name="n2")],
        pod(name="p", labels=WEB, spec={"affinity": anti(HOST)}),
        unfit(2, "2 node(s) didn't match pod anti-affinity rules", f"2 {NO_VICTIMS}"),
        existing=[
            pod(name="web-0", labels=WEB, node_name="n1"),
            pod(name="web-1", labels=WEB, node_name="n2"),
        ],
    ),
    Case(
        "by zone: a node of another zone",
        [node(name="n1", zone="a"), node(name="n2", zone="a"), node(name="n3", zone="b")],
        pod(name="p", labels=WEB, spec={"affinity": anti(ZONE)}),
        "n3",
        existing=[pod(name="web-0", labels=WEB, node_name="n1")],
    ),
    Case(
        "by zone: one zone only",
        [node(name="n1", zone="a"), node(name="n2", zone="a")],
        pod(name="p", labels=WEB, spec={"affinity": anti(ZONE)}),
        unfit(2, "2 node(s) didn't match pod anti-affinity rules", f"2 {NO_VICTIMS}"),
        existing=[pod(name="web-0", labels=WEB, node_name="n1")],
    ),
    Case(
        "pods of other namespaces do not count by default",
        [node(name="n1")],
        pod(name="p", labels=WEB, spec={"affinity": anti(HOST)}),
        "n1",
        existing=[pod(name="web-0", labels=WEB, node_name="n1", namespace="kube-system")],
    ),
    Case(
        "namespaceSelector {} covers every namespace",
        [node(name="n1")],
        pod(name="p", labels=WEB, spec={"affinity": anti(HOST, namespaceSelector={})}),
        unfit(1, "1 node(s) didn't match pod anti-affinity rules", f"1 {NO_VICTIMS}"),
        existing=[pod(name="web-0", labels=WEB, node_name="n1", namespace="kube-system")],
    ),
    Case(
        "an existing pod's anti-affinity keeps the new pod away",
        [node(name="n1"), node(name="n2")],
        pod(name="p", labels=WEB),
        "n2",
        existing=[
            pod(name="guard", labels={"app": "db"}, node_name="n1", spec={"affinity": anti(HOST)})
        ],
    ),
    Case(
        "an existing pod's anti-affinity, no other node",
        [node(name="n1")],
        pod(name="p", labels=WEB),
        unfit(1, "1 node(s) didn't satisfy existing pods anti-affinity rules", f"1 {NO_VICTIMS}"),
        existing=[
            pod(name="guard", labels={"app": "db"}, node_name="n1", spec={"affinity": anti(HOST)})
        ],
    ),
    Case(
        "required pod affinity: the first pod of a self-affine group goes anywhere",
        [node(name="n1")],
        pod(
            name="p",
            labels=WEB,
            spec={
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": WEB}, "topologyKey": HOST}
                        ]
                    }
                }
            },
        ),
        "n1",
    ),
]

CORDONED = [
    Case(
        "a cordoned node",
        [node(name="n1", unschedulable=True)],
        pod(name="p"),
        unfit(1, "1 node(s) were unschedulable", f"1 {NOT_HELPFUL}"),
    ),
    Case(
        "tolerating node.kubernetes.io/unschedulable",
        [node(name="n1", unschedulable=True)],
        pod(
            name="p",
            spec={
                "tolerations": tol(
                    key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"
                )
            },
        ),
        "n1",
    ),
    Case(
        "the cordoned node is skipped for another",
        [node(name="n1", unschedulable=True), node(name="n2")],
        pod(name="p"),
        "n2",
    ),
]

MIXED = [
    Case(
        "upstream's example: one tainted node, two too small",
        [
            node(name="n1", taints=[taint("machine-check-exception", "memory", "NoSchedule")]),
            node(name="n2", cpu="1"),
            node(name="n3", cpu="1"),
        ],
        pod(name="p", containers=[container(cpu="2")]),
        unfit(
            3,
            "1 node(s) had untolerated taint {machine-check-exception: memory}, 2 Insufficient cpu",
            f"1 {NOT_HELPFUL}, 2 {NO_VICTIMS}",
        ),
    ),
    Case(
        "the first failing plugin decides a node's reason",
        [node(name="n1", taints=[GPU], cpu="1"), node(name="n2", unschedulable=True, cpu="1")],
        pod(name="p", containers=[container(cpu="2")]),
        unfit(
            2,
            "1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable",
            f"2 {NOT_HELPFUL}",
        ),
    ),
]


@pytest.mark.parametrize("case", RESOURCES, ids=lambda c: c.id)
async def test_node_resources_fit(case: Case) -> None:
    assert await place(case) == case.expect


@pytest.mark.parametrize("case", TAINTS, ids=lambda c: c.id)
async def test_taint_toleration(case: Case) -> None:
    assert await place(case) == case.expect


@pytest.mark.parametrize("case", NODE_SELECTION, ids=lambda c: c.id)
async def test_node_selector_and_required_affinity(case: Case) -> None:
    assert await place(case) == case.expect


@pytest.mark.parametrize("case", ANTI_AFFINITY, ids=lambda c: c.id)
async def test_inter_pod_affinity(case: Case) -> None:
    assert await place(case) == case.expect


@pytest.mark.parametrize("case", CORDONED, ids=lambda c: c.id)
async def test_node_unschedulable(case: Case) -> None:
    assert await place(case) == case.expect


@pytest.mark.parametrize("case", MIXED, ids=lambda c: c.id)
async def test_fit_error_histogram(case: Case) -> None:
    assert await place(case) == case.expect


async def test_least_allocated_prefers_the_emptier_node_and_ties_go_by_name() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    for name in ("n3", "n2", "n1"):
        api.store.create(node(name=name))
    api.store.create(pod(name="busy", node_name="n1", containers=[container(cpu="3")]))
    api.store.create(pod(name="p", containers=[container(cpu="500m")]))
    await Scheduler(api).step(clock.now())
    # n1 is 3/4 used; n2 and n3 are empty and score the same: n2 comes first by name
    assert api.store.get(PODS, "p", "default")["spec"]["nodeName"] == "n2"


async def test_no_nodes() -> None:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    api.store.create(pod(name="p"))
    await Scheduler(api).step(clock.now())
    (condition,) = api.store.get(PODS, "p", "default")["status"]["conditions"]
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "no nodes available to schedule pods"
    assert not api.store.list(NODES)


def with_host_port(p: dict[str, Any], port: int) -> dict[str, Any]:
    p["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return p


def spread_by(key: str, max_skew: int = 1, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": WEB},
            **extra,
        }
    ]


PORTS_AND_SPREAD = [
    Case(
        "host port: the node where it is free",
        [node(name="n1"), node(name="n2")],
        with_host_port(pod(name="p"), 80),
        "n2",
        existing=[with_host_port(pod(name="holder", node_name="n1"), 80)],
    ),
    Case(
        "host port: taken on the only node (NodePorts, Unschedulable)",
        [node(name="n1")],
        with_host_port(pod(name="p"), 80),
        unfit(
            1,
            "1 node(s) didn't have free ports for the requested pod ports",
            f"1 {NO_VICTIMS}",
        ),
        existing=[with_host_port(pod(name="holder", node_name="n1"), 80)],
    ),
    Case(
        # hostname domains n1 1, n2 0: n1 1+1-0 = 2 > 1, n2 0+1-0 = 1
        "hostname spread: the emptier domain",
        [node(name="n1"), node(name="n2")],
        pod(name="p", labels=WEB, spec={"topologySpreadConstraints": spread_by(HOST)}),
        "n2",
        existing=[pod(name="web-0", labels=WEB, node_name="n1")],
    ),
    Case(
        # one domain (n1: 1) < minDomains 2 → min 0: 1+1-0 = 2 > 1
        "minDomains above the domains there are",
        [node(name="n1")],
        pod(
            name="p", labels=WEB, spec={"topologySpreadConstraints": spread_by(HOST, minDomains=2)}
        ),
        unfit(1, "1 node(s) didn't match pod topology spread constraints", f"1 {NO_VICTIMS}"),
        existing=[pod(name="web-0", labels=WEB, node_name="n1")],
    ),
    Case(
        "a node without the topology key (UnschedulableAndUnresolvable)",
        [node(name="n1")],
        pod(name="p", labels=WEB, spec={"topologySpreadConstraints": spread_by("rack")}),
        unfit(
            1,
            "1 node(s) didn't match pod topology spread constraints (missing required label)",
            f"1 {NOT_HELPFUL}",
        ),
    ),
]


@pytest.mark.parametrize("case", PORTS_AND_SPREAD, ids=lambda c: c.id)
async def test_node_ports_and_pod_topology_spread(case: Case) -> None:
    assert await place(case) == case.expect
