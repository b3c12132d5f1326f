"""The snapshot's undo of a node removal: ``remove_node`` then ``restore_node`` (and a
:class:`SnapshotJournal` fork/``remove_node``/revert, which restores the same way) gives back a
snapshot whose every answer equals the original's.

Upstream's ``DeltaSnapshotStore.Revert`` (``clustersnapshot/store/delta.go``) returns to the
base data, whose ``NodeInfo`` still lists its pods with required anti-affinity
(``havePodsWithRequiredAntiAffinity`` is rebuilt from them); InterPodAffinity's PreFilter reads
that list for an incoming pod without affinity terms of its own
(``getExistingAntiAffinityCounts``). A restored node must count its placed pods' anti-affinity
again, not only their number."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from hypothesis import given
from hypothesis import strategies as st

from kubescale.objects.pod import Affinity, Pod
from kubescale.scheduling.filters import FilterStatus
from kubescale.scheduling.fit import ClusterSnapshot
from kubescale.scheduling.inter_pod_affinity import REASON_EXISTING_ANTI_AFFINITY
from kubescale.scheduling.snapshot_journal import SnapshotJournal

from .builders import fit_node, fit_pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
# node → zone: n1 and n2 share zone a, n3 is alone in b
ZONES = {"n1": "a", "n2": "a", "n3": "b"}
EXISTING_ANTI = FilterStatus((REASON_EXISTING_ANTI_AFFINITY,), unresolvable=False)


def _anti(topology_key: str, app: str) -> Affinity:
    """Required anti-affinity to the pods labelled ``app=<app>`` across ``topology_key``."""
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}
            ]
        }
    }


def _app_pod(name: str, app: str, *, node: str | None = None, anti: Affinity | None = None) -> Pod:
    return fit_pod(name, node=node, labels={"app": app}, affinity=anti)


def _snapshot(pods: Sequence[Pod]) -> ClusterSnapshot:
    return ClusterSnapshot.build(
        nodes=[fit_node(n, {HOST: n, ZONE: z}) for n, z in sorted(ZONES.items())], pods=pods
    )


# A "guard" (app=db) on n1 refuses app=web pods on its node (hostname) or in its zone (zone a:
# n1 and n2). The incoming "web" pod has no affinity terms of its own, so only the placed pods'
# anti-affinity can reject it (InterPodAffinity's "existing pods" check).
# (name, the guard's anti-affinity topology key, web's verdict per node)
RESTORE_CASES: list[tuple[str, str, Mapping[str, FilterStatus | None]]] = [
    # hostname: only the guard's own node n1 has the forbidden pair (hostname, n1)
    ("hostname guard", HOST, {"n1": EXISTING_ANTI, "n2": None, "n3": None}),
    # zone: the pair (zone, a) is forbidden, n1 and n2 carry it, n3 (zone b) does not
    ("zone guard", ZONE, {"n1": EXISTING_ANTI, "n2": EXISTING_ANTI, "n3": None}),
]


def _verdicts(snapshot: ClusterSnapshot, pod: Pod) -> dict[str, FilterStatus | None]:
    info = snapshot.pod_info(pod)
    state = snapshot.prefilter(info)
    return {name: snapshot.filter(info, name, state) for name in sorted(snapshot.nodes)}


def test_restore_node_table() -> None:
    for name, topology_key, expected in RESTORE_CASES:
        guard = _app_pod("guard", "db", node="n1", anti=_anti(topology_key, "web"))
        web = _app_pod("web", "web")
        snapshot = _snapshot([guard])
        assert _verdicts(snapshot, web) == expected, name
        removed = snapshot.remove_node("n1")
        assert removed is not None
        # n1 (and the guard with it) gone: nothing refuses web any more
        assert set(_verdicts(snapshot, web).values()) == {None}, name
        snapshot.restore_node(removed)
        assert _verdicts(snapshot, web) == expected, name
        assert dict(snapshot.anti_affinity_pods("n1")) == {("default", "guard"): guard}, name

        journal = SnapshotJournal(_snapshot([guard]))
        journal.fork()
        assert journal.remove_node("n1") is not None
        journal.revert()  # DeltaSnapshotStore.Revert: back to the base, guard included
        assert _verdicts(journal.snapshot, web) == expected, name


# ------------------------------------------------------------------------------ property

_APPS = ("web", "db", "cache")
_placed = st.lists(
    st.tuples(
        st.sampled_from(sorted(ZONES)),
        st.sampled_from(_APPS),
        st.sampled_from((None, HOST, ZONE)),  # the placed pod's anti-affinity topology, if any
        st.sampled_from(_APPS),  # ... to pods of this app
    ),
    max_size=6,
)


def _answers(snapshot: ClusterSnapshot, probes: Sequence[Pod]) -> object:
    """Everything the snapshot answers about its nodes: each probe's verdict on every node,
    the placed anti-affinity pods and the resources counted per node."""
    return (
        [_verdicts(snapshot, probe) for probe in probes],
        {name: dict(snapshot.anti_affinity_pods(name)) for name in sorted(snapshot.nodes)},
        {
            name: (dict(state.requested), dict(state.non_zero_requested), len(state.pods))
            for name, state in sorted(snapshot.nodes.items())
        },
    )


@given(
    placed=_placed,
    removed=st.lists(st.sampled_from(sorted(ZONES)), unique=True, min_size=1),
    order=st.randoms(use_true_random=False),
)
def test_remove_then_restore_answers_as_before(
    placed: list[tuple[str, str, str | None, str]],
    removed: list[str],
    order: random.Random,
) -> None:
    pods = [
        _app_pod(f"p{i}", app, node=node, anti=_anti(key, target) if key else None)
        for i, (node, app, key, target) in enumerate(placed)
    ]
    # probes: pods without affinity terms (checked against the placed pods' anti-affinity
    # only) and one with anti-affinity terms of its own
    probes = [_app_pod(f"probe-{app}", app) for app in _APPS]
    probes.append(_app_pod("probe-anti", "web", anti=_anti(ZONE, "db")))
    snapshot = _snapshot(pods)
    before = _answers(snapshot, probes)
    states = {name: snapshot.remove_node(name) for name in removed}
    names = list(states)
    order.shuffle(names)
    for name in names:
        state = states[name]
        assert state is not None
        snapshot.restore_node(state)
    assert _answers(snapshot, probes) == before
