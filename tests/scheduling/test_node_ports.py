"""NodePorts in the shared fit: kube-scheduler's ``node_ports_test.go`` cases (``TestNodePorts``,
``TestFits``), ports written as upstream's ``"PROTOCOL/hostIP/hostPort"``; what a snapshot keeps
as pods come and go; and ``CheckConflict`` held to its definition by a property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.pod import Pod
from kubescale.scheduling.filters import FilterStatus
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.node_ports import REASON_NODE_PORTS, HostPort, UsedPorts, host_ports
from kubescale.scheduling.snapshot_journal import SnapshotJournal

from .builders import fit_node, fit_pod

REFUSED = FilterStatus((REASON_NODE_PORTS,), unresolvable=False)  # fwk.Unschedulable


def _verdict(wanted: Pod, existing: list[str]) -> FilterStatus | None:
    snapshot = ClusterSnapshot.build(
        nodes=[fit_node("m1")],
        pods=[fit_pod("existing", node="m1", ports=existing)] if existing else [],
    )
    return snapshot.filter(snapshot.pod_info(wanted), "m1")


# (name, the incoming pod's ports, the ports held on the node, verdict) — TestNodePorts.
NODE_PORTS_CASES: list[tuple[str, list[str], list[str], FilterStatus | None]] = [
    ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], None),
    ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], REFUSED),
    ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], REFUSED),
    ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], None),
    ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], None),
    (
        "second udp port conflict",
        ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
        ["UDP/127.0.0.1/8080"],
        REFUSED,
    ),
    (
        "first tcp port conflict",
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
        ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
        REFUSED,
    ),
    # 0.0.0.0 wanted: any IP holding TCP/8001 conflicts
    ("tcp conflict due to 0.0.0.0 hostIP", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], REFUSED),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
        ["TCP/127.0.0.1/8001"],
        REFUSED,
    ),
    # a specific IP wanted: 0.0.0.0 held on the same protocol/port conflicts
    ("second tcp port conflict to 0.0.0.0", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], REFUSED),
    ("second different protocol", ["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], None),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        ["UDP/127.0.0.1/8001"],
        ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
        REFUSED,
    ),
    # an empty hostIP is 0.0.0.0 and an empty protocol TCP (sanitize)
    ("defaults: empty ip and protocol", ["//8001"], ["TCP/127.0.0.1/8001"], REFUSED),
    # TestFits
    ("non-conflicting ports", ["TCP/127.0.0.1/80"], ["TCP/127.0.0.1/9090"], None),
    (
        "multiple non-conflicting ports",
        ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
        ["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"],
        None,
    ),
    ("same ports on different protocols", ["TCP/127.0.0.1/80"], ["UDP/127.0.0.1/80"], None),
    ("conflicting ports", ["TCP/127.0.0.1/80"], ["TCP/127.0.0.1/80"], REFUSED),
    (
        "multiple ports, some conflicting",
        ["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"],
        ["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"],
        REFUSED,
    ),
]


@pytest.mark.parametrize(
    ("wanted", "existing", "expected"),
    [case[1:] for case in NODE_PORTS_CASES],
    ids=[case[0] for case in NODE_PORTS_CASES],
)
def test_node_ports_table(
    wanted: list[str], existing: list[str], expected: FilterStatus | None
) -> None:
    assert _verdict(fit_pod("p", ports=wanted), existing) == expected


def test_sidecar_ports_count_and_plain_init_container_ports_do_not() -> None:
    # "non-sidecar initContainer using hostPort": PreFilter Skip, the pod fits
    assert _verdict(fit_pod("p", init_ports=["TCP//8001"]), ["TCP/0.0.0.0/8001"]) is None
    # "TCP hostPort conflict from sidecar initContainer"
    assert _verdict(fit_pod("p", sidecar_ports=["TCP//8001"]), ["TCP/0.0.0.0/8001"]) == REFUSED
    # a placed pod's sidecar holds its port too
    snapshot = ClusterSnapshot.build(
        nodes=[fit_node("m1")], pods=[fit_pod("held", node="m1", sidecar_ports=["TCP//8001"])]
    )
    assert snapshot.filter(snapshot.pod_info(fit_pod("p", ports=["TCP//8001"])), "m1") == REFUSED


def test_a_pod_without_host_ports_skips_the_filter() -> None:
    # containerPort without hostPort is no host port ("skip filter")
    pod = fit_pod("p")
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    assert host_ports(pod) == ()
    assert _verdict(pod, ["TCP/0.0.0.0/8080"]) is None


def test_filter_order_ports_before_resources() -> None:
    # NodePorts runs before NodeResourcesFit: a node both full and holding the port reports
    # the port (the first rejection is the verdict)
    snapshot = ClusterSnapshot.build(
        nodes=[fit_node("m1", cpu="1")],
        pods=[fit_pod("held", node="m1", ports=["TCP//80"], cpu="1")],
    )
    status = snapshot.filter(snapshot.pod_info(fit_pod("p", ports=["TCP//80"], cpu="1")), "m1")
    assert status == REFUSED


def test_ports_are_released_and_restored_with_their_pods() -> None:
    a = fit_pod("a", node="m1", ports=["TCP//80"])
    b = fit_pod("b", node="m1", ports=["TCP//80"])  # two holders of the same port
    snapshot = ClusterSnapshot.build(nodes=[fit_node("m1")], pods=[a, b])
    wanted = snapshot.pod_info(fit_pod("p", ports=["TCP//80"]))
    journal = SnapshotJournal(snapshot)
    journal.fork()
    assert journal.remove_pod("m1", a)
    assert snapshot.filter(wanted, "m1") == REFUSED  # b still holds it
    assert journal.remove_pod("m1", b)
    assert snapshot.filter(wanted, "m1") is None
    clone = snapshot.copy()
    journal.revert()
    assert snapshot.filter(wanted, "m1") == REFUSED
    assert clone.filter(wanted, "m1") is None  # the copy kept its own ports
    removed = snapshot.remove_node("m1")
    assert removed is not None
    snapshot.restore_node(removed)
    assert snapshot.filter(wanted, "m1") == REFUSED


# -------------------------------------------------------------------------- property

_IPS = ("0.0.0.0", "127.0.0.1", "10.0.0.1")
_ports = st.tuples(st.sampled_from(_IPS), st.sampled_from(("TCP", "UDP")), st.integers(80, 82))


def check_conflict(used: list[HostPort], ip: str, protocol: str, port: int) -> bool:
    """``HostPortInfo.CheckConflict`` written from its definition over a plain list."""
    if ip == "0.0.0.0":
        return any(p == protocol and n == port for _, p, n in used)
    return any(p == protocol and n == port and i in ("0.0.0.0", ip) for i, p, n in used)


@settings(max_examples=200, deadline=None)
@given(
    used=st.lists(_ports, max_size=6),
    released=st.lists(st.integers(0, 5), max_size=3),
    wanted=st.lists(_ports, min_size=1, max_size=3),
)
def test_used_ports_conflict_matches_check_conflict(
    used: list[HostPort], released: list[int], wanted: list[HostPort]
) -> None:
    table = UsedPorts()
    table.add(used)
    held = list(used)
    for index in released:  # pods leaving: one holder each
        if index < len(held):
            table.remove([held.pop(index)])
    expected = any(check_conflict(held, *w) for w in wanted)
    assert table.conflicts(wanted) == expected
