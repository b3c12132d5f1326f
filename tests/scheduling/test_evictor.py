"""DefaultEvictor's Filter and PreEvictionFilter, from upstream's rules (reference §2)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kubescale.objects.pod import Pod
from kubescale.objects.projection import project, projection_of
from kubescale.scheduling.cycle_view import CycleView
from kubescale.scheduling.evictor import DefaultEvictor, EvictorError
from kubescale.scheduling.policy.evictor_args import read_default_evictor_args
from kubescale.scheduling.policy.fields import PolicyError
from tests.controllers.descheduler.builders import NOW, cycle_node, cycle_pod, owner, stamp

NODES = [cycle_node("n1"), cycle_node("n2", labels={"pool": "b"})]
EVICT = "descheduler.alpha.kubernetes.io/evict"
PREFER = "descheduler.alpha.kubernetes.io/prefer-no-eviction"


def evictor(args: dict[str, Any] | None = None, **view: Any) -> DefaultEvictor:
    pods = view.pop("pods", [])
    cycle = CycleView(now=NOW, nodes=NODES, pods=pods, **view)
    return DefaultEvictor(read_default_evictor_args(args, "args"), cycle)


HOST_PATH = {"volumes": [{"name": "v", "hostPath": {"path": "/data"}}]}
EMPTY_DIR = {"volumes": [{"name": "v", "emptyDir": {}}]}
PVC = {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}

# (case, pod, evictor args, evictable)
CASES: list[tuple[str, Pod, dict[str, Any] | None, bool]] = [
    ("replica set pod", cycle_pod("p"), None, True),
    ("bare pod", cycle_pod("p", owners=[]), None, False),
    ("bare failed pod, FailedBarePods on", cycle_pod("p", owners=[], phase="Failed"), None, False),
    (
        "bare failed pod, FailedBarePods off",
        cycle_pod("p", owners=[], phase="Failed"),
        {"podProtections": {"defaultDisabled": ["FailedBarePods"]}},
        True,
    ),
    (
        "bare running pod, FailedBarePods off",
        cycle_pod("p", owners=[]),
        {"podProtections": {"defaultDisabled": ["FailedBarePods"]}},
        False,
    ),
    ("daemonset pod", cycle_pod("p", owners=[owner("DaemonSet", "ds")]), None, False),
    ("hostPath", cycle_pod("p", spec=HOST_PATH), None, False),
    ("emptyDir", cycle_pod("p", spec=EMPTY_DIR), None, False),
    (
        "emptyDir, evictLocalStoragePods",
        cycle_pod("p", spec=EMPTY_DIR),
        {"evictLocalStoragePods": True},
        True,
    ),
    ("mirror pod", cycle_pod("p", annotations={"kubernetes.io/config.mirror": "x"}), None, False),
    (
        "static pod",
        cycle_pod("p", annotations={"kubernetes.io/config.source": "file"}),
        None,
        False,
    ),
    (
        "api-sourced pod",
        cycle_pod("p", annotations={"kubernetes.io/config.source": "api"}),
        None,
        True,
    ),
    # 2000000000 = system-cluster-critical: protected; one below passes the default threshold
    ("system critical", cycle_pod("p", priority=2_000_000_000), None, False),
    ("just below critical", cycle_pod("p", priority=1_999_999_999), None, True),
    (
        "critical, protection off",
        cycle_pod("p", priority=2_000_000_000),
        {"evictSystemCriticalPods": True},
        True,
    ),
    # threshold 100: priority must be < 100
    ("at threshold", cycle_pod("p", priority=100), {"priorityThreshold": {"value": 100}}, False),
    ("below threshold", cycle_pod("p", priority=99), {"priorityThreshold": {"value": 100}}, True),
    ("no priority, threshold", cycle_pod("p"), {"priorityThreshold": {"value": 100}}, True),
    ("PVC, default", cycle_pod("p", spec=PVC), None, True),
    ("PVC, PodsWithPVC", cycle_pod("p", spec=PVC), {"ignorePvcPods": True}, False),
    (
        "resource claims",
        cycle_pod("p", spec={"resourceClaims": [{"name": "gpu"}]}),
        {"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}},
        False,
    ),
    (
        "evict annotation beats everything",
        cycle_pod("p", owners=[], spec=HOST_PATH, annotations={EVICT: ""}),
        None,
        True,
    ),
    (
        "prefer-no-eviction, Preferred",
        cycle_pod("p", annotations={PREFER: ""}),
        {"noEvictionPolicy": "Preferred"},
        True,
    ),
    (
        "prefer-no-eviction, Mandatory",
        cycle_pod("p", annotations={PREFER: ""}),
        {"noEvictionPolicy": "Mandatory"},
        False,
    ),
    (
        "label selector matches",
        cycle_pod("p", labels={"tier": "web"}),
        {"labelSelector": {"matchLabels": {"tier": "web"}}},
        True,
    ),
    (
        "label selector misses",
        cycle_pod("p", labels={"tier": "db"}),
        {"labelSelector": {"matchLabels": {"tier": "web"}}},
        False,
    ),
]


@pytest.mark.parametrize(("case", "the_pod", "args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_filter(case: str, the_pod: Pod, args: dict[str, Any] | None, expected: bool) -> None:
    assert evictor(args, pods=[the_pod]).filter(the_pod) is expected


def test_terminating_pods_are_never_evicted() -> None:
    the_pod = cycle_pod("p")
    the_pod["metadata"]["deletionTimestamp"] = stamp(NOW)
    assert evictor().filter(the_pod) is False


def test_min_replicas_counts_pods_of_the_single_owner() -> None:
    rs = owner(name="web")
    pods = [cycle_pod(f"p{i}", owners=[rs]) for i in range(2)]
    # 2 pods share the owner's uid: minReplicas 2 → 2 >= 2 passes, 3 → protected
    assert evictor({"minReplicas": 2}, pods=pods).filter(pods[0]) is True
    assert evictor({"minReplicas": 3}, pods=pods).filter(pods[0]) is False
    # minReplicas 1 is inactive; two ownerReferences skip the check
    assert evictor({"minReplicas": 1}, pods=pods[:1]).filter(pods[0]) is True
    two = cycle_pod("x", owners=[rs, owner("StatefulSet", "db")])
    assert evictor({"minReplicas": 5}, pods=[two]).filter(two) is True


def test_min_pod_age_uses_start_time() -> None:
    started = cycle_pod("p", status={"startTime": stamp(NOW - timedelta(minutes=10))})
    assert evictor({"minPodAge": "5m"}).filter(started) is True  # 10 min >= 5
    assert evictor({"minPodAge": "15m"}).filter(started) is False
    assert evictor({"minPodAge": "1s"}).filter(cycle_pod("p")) is False  # no startTime


def test_pods_without_pdb_protection() -> None:
    the_pod = cycle_pod("p", labels={"app": "web"})
    pdb = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    args = {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}}
    assert evictor(args).filter(the_pod) is False
    assert evictor(args, pdbs=[pdb]).filter(the_pod) is True


def test_protected_storage_classes() -> None:
    the_pod = cycle_pod("p", spec=PVC)
    args = {
        "podProtections": {
            "extraEnabled": ["PodsWithPVC"],
            "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}},
        }
    }
    claim = {"metadata": {"name": "data", "namespace": "default"}}
    fast = {**claim, "spec": {"storageClassName": "fast"}}
    local = {**claim, "spec": {"storageClassName": "local"}}
    assert evictor(args, pvcs={("default", "data"): fast}).filter(the_pod) is True
    assert evictor(args, pvcs={("default", "data"): local}).filter(the_pod) is False
    assert evictor(args).filter(the_pod) is False  # the PVC cannot be found


def test_priority_threshold_by_class_name() -> None:
    args = {"priorityThreshold": {"name": "batch"}}
    made = evictor(args, priority_classes={"batch": 1000})
    assert made.threshold == 1000
    assert made.filter(cycle_pod("p", priority=999)) is True
    assert made.filter(cycle_pod("q", priority=1000)) is False
    with pytest.raises(EvictorError, match="priorityClass 'batch' of priorityThreshold not found"):
        evictor(args)


def test_pre_eviction_filter_node_fit_and_namespace_labels() -> None:
    # n2 can take the 1-cpu pod → fits another node; a 5-cpu pod fits nowhere else.
    small, big = cycle_pod("small", "n1", cpu="1"), cycle_pod("big", "n1", cpu="5")
    made = evictor({"nodeFit": True}, pods=[small, big])
    assert made.pre_eviction_filter(small) is True
    assert made.pre_eviction_filter(big) is False
    # nodeSelector limits the candidates: only n1 (the pod's own node) → no other node
    assert (
        evictor({"nodeFit": True, "nodeSelector": "pool!=b"}, pods=[small]).pre_eviction_filter(
            small
        )
        is False
    )
    args = {"namespaceLabelSelector": {"matchLabels": {"team": "a"}}}
    assert evictor(args, namespace_labels={"default": {"team": "a"}}).pre_eviction_filter(small)
    assert not evictor(args, namespace_labels={"default": {"team": "b"}}).pre_eviction_filter(small)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"priorityThreshold": {"value": 1, "name": "x"}}, "only one of value and name"),
        ({"priorityThreshold": {"value": 2_000_000_001}}, "must be <= 2000000000"),
        ({"noEvictionPolicy": "Always"}, "noEvictionPolicy: 'Always' is not one of"),
        (
            {"podProtections": {"defaultDisabled": ["PodsWithPVC"]}},
            "defaultDisabled[0]: 'PodsWithPVC' is not a default protection",
        ),
        (
            {"podProtections": {"extraEnabled": ["DaemonSetPods"]}},
            "extraEnabled[0]: 'DaemonSetPods' is not an extra protection",
        ),
        (
            {"podProtections": {}, "ignorePvcPods": True},
            "podProtections: cannot be combined with the deprecated ignorePvcPods",
        ),
        ({"minPodAge": "soon"}, "minPodAge: invalid duration"),
        ({"nodeSelector": "a in (b"}, "nodeSelector: invalid label selector"),
        ({"nodefit": "yes"}, "nodeFit: must be true or false"),
    ],
)
def test_validation_names_the_field(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        read_default_evictor_args(args, "args")
    assert message in str(caught.value)


def _exporter(name: str, node_name: str) -> Pod:
    made = cycle_pod(name, node_name, cpu="100m")
    made["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
    return made


def test_node_fit_refuses_a_node_whose_host_port_is_taken() -> None:
    # the exporter on n1 binds host port 9100: n2 has room, but another exporter holds the
    # port there (NodePorts) → no other node fits; with n2's port free it does
    mine = _exporter("exporter-1", "n1")
    taken = evictor({"nodeFit": True}, pods=[mine, _exporter("exporter-2", "n2")])
    assert taken.pre_eviction_filter(mine) is False
    free = evictor({"nodeFit": True}, pods=[mine, cycle_pod("other", "n2", cpu="100m")])
    assert free.pre_eviction_filter(mine) is True


def test_node_fit_counts_topology_spread_without_the_pod() -> None:
    # web pods spread by hostname, maxSkew 1, one on n1 and one on n2. Counted with web-1 off
    # its node: n1 0, n2 1 → on n2: 1 + 1 − 0 = 2 > 1, refused → web-1 fits no other node.
    # With maxSkew 2: 2 <= 2 → it fits n2.
    def web(name: str, node_name: str, max_skew: int) -> Pod:
        constraint = {
            "maxSkew": max_skew,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
        return cycle_pod(
            name,
            node_name,
            cpu="100m",
            labels={"app": "web"},
            spec={"topologySpreadConstraints": [constraint]},
        )

    tight = [web("web-1", "n1", 1), web("web-2", "n2", 1)]
    assert evictor({"nodeFit": True}, pods=tight).pre_eviction_filter(tight[0]) is False
    loose = [web("web-1", "n1", 2), web("web-2", "n2", 2)]
    assert evictor({"nodeFit": True}, pods=loose).pre_eviction_filter(loose[0]) is True


def test_a_cached_pod_with_resource_claims_stays_protected() -> None:
    # PodsWithResourceClaims: a pod with spec.resourceClaims is not evictable. The loop's
    # informer caches hold projected pods (kubescale/objects/projection.py): the pod as the
    # cache holds it must still carry its claims.
    claimed = cycle_pod(
        "p", spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-0"}]}
    )
    cached: Pod = project(claimed, projection_of(Pod))  # project() returns the JSON as sent
    args = {"podProtections": {"extraEnabled": ["PodsWithResourceClaims"]}}
    assert evictor(args, pods=[cached]).filter(cached) is False
    assert evictor(None, pods=[cached]).filter(cached) is True  # protection off: evictable
