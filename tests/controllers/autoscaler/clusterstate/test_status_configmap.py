"""The status ConfigMap text (reference §5): upstream's marshalling, byte for byte, and the
status built from the cluster state registry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import yaml

from kubescale.base.go_time import go_time_string
from kubescale.base.times import format_time
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    InstanceErrorInfo,
)
from kubescale.controllers.autoscaler.clusterstate.backoff import ExponentialBackoff
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    HealthConfig,
)
from kubescale.controllers.autoscaler.clusterstate.status_configmap import (
    LAST_UPDATED_ANNOTATION,
    StatusHistory,
    build_status,
    render_status,
    status_config_map,
)
from kubescale.controllers.autoscaler.model.node_facts import node_readiness
from tests.controllers.autoscaler.builders import NOW, ca_node, group, snapshot

ZERO_TIMES = {"lastProbeTime": None, "lastTransitionTime": None}


def test_upstreams_expected_text_for_an_empty_status() -> None:
    """``status_test.go`` TestWriteStatusConfigMap: ``ClusterAutoscalerStatus{Message:
    "TEST_MSG"}`` written at 2023-12-21 00:00:00 UTC marshals to exactly this."""
    counts = {
        "registered": {
            "total": 0,
            "ready": 0,
            "notStarted": 0,
            "suspended": 0,
            "unready": {"total": 0, "resourceUnready": 0},
        },
        "longUnregistered": 0,
        "unregistered": 0,
    }
    status = {
        "time": go_time_string(datetime(2023, 12, 21, tzinfo=UTC)),
        "message": "TEST_MSG",
        "clusterWide": {
            "health": {"nodeCounts": counts, **ZERO_TIMES},
            "scaleUp": dict(ZERO_TIMES),
            "scaleDown": dict(ZERO_TIMES),
        },
    }
    assert render_status(status) == (
        "clusterWide:\n  health:\n    lastProbeTime: null\n    lastTransitionTime: null\n"
        "    nodeCounts:\n      longUnregistered: 0\n      registered:\n        notStarted: 0\n"
        "        ready: 0\n        suspended: 0\n        total: 0\n        unready:\n"
        "          resourceUnready: 0\n          total: 0\n      unregistered: 0\n"
        "  scaleDown:\n    lastProbeTime: null\n    lastTransitionTime: null\n"
        "  scaleUp:\n    lastProbeTime: null\n    lastTransitionTime: null\n"
        "message: TEST_MSG\ntime: 2023-12-21 00:00:00 +0000 UTC\n"
    )


def test_go_time_formats() -> None:
    moment = datetime(2023, 11, 24, 4, 28, 19, 546750, tzinfo=UTC)
    # time.Time.String(): trailing zeros of the fraction dropped
    assert go_time_string(moment) == "2023-11-24 04:28:19.54675 +0000 UTC"
    assert go_time_string(moment.replace(microsecond=0)) == "2023-11-24 04:28:19 +0000 UTC"
    # metav1.Time: whole seconds
    assert format_time(moment) == "2023-11-24T04:28:19Z"


def registry() -> ClusterStateRegistry:
    return ClusterStateRegistry(
        health=HealthConfig(),
        backoff=ExponentialBackoff(
            initial=timedelta(minutes=5),
            maximum=timedelta(minutes=30),
            reset_timeout=timedelta(hours=3),
        ),
    )


def test_status_of_a_backed_off_group_and_candidates() -> None:
    csr = registry()
    nodes = [ca_node("a-0"), ca_node("a-1")]
    a = group("MachineDeployment/default/a", min_size=1, max_size=5, nodes=nodes)
    b = group("MachineDeployment/default/b", max_size=3, target=0)
    csr.update(nodes=nodes, snapshot=snapshot(a, b), readiness=node_readiness, now=NOW)
    csr.backoff.backoff(
        "MachineDeployment/default/b",
        InstanceErrorInfo(error_class=ErrorClass.OTHER, code="timeout", message="Quota 'CPUS': x"),
        NOW,
    )
    csr.update_scale_down_candidates({"MachineDeployment/default/a": ["a-1"]}, NOW)
    history = StatusHistory()
    status = build_status(csr, history, NOW)
    text = render_status(status)
    probe = '"2026-03-02T10:00:00Z"'
    assert text.startswith("autoscalerStatus: Running\nclusterWide:\n  health:\n")
    assert f"    lastProbeTime: {probe}\n" in text
    assert (
        "nodeGroups:\n- health:\n    cloudProviderTarget: 2\n"
        f"    lastProbeTime: {probe}\n    lastTransitionTime: {probe}\n    maxSize: 5\n"
        "    minSize: 1\n"
    ) in text
    # a message with ": " in it is single-quoted (plain YAML would read a mapping)
    assert "      errorMessage: 'Quota ''CPUS'': x'\n" in text
    loaded = yaml.safe_load(text)
    groups = {g["name"]: g for g in loaded["nodeGroups"]}
    assert groups["MachineDeployment/default/a"]["scaleUp"] == {
        "status": "NoActivity",
        "backoffInfo": {},
        "lastProbeTime": "2026-03-02T10:00:00Z",
        "lastTransitionTime": "2026-03-02T10:00:00Z",
    }
    assert groups["MachineDeployment/default/a"]["scaleDown"]["status"] == "CandidatesPresent"
    assert groups["MachineDeployment/default/a"]["scaleDown"]["candidates"] == 1
    assert groups["MachineDeployment/default/b"]["scaleUp"]["status"] == "Backoff"
    assert groups["MachineDeployment/default/b"]["scaleUp"]["backoffInfo"]["errorCode"] == "timeout"
    # b has no nodes: no readiness entry, so its probe time is the zero time (null)
    assert groups["MachineDeployment/default/b"]["health"]["lastProbeTime"] is None
    assert loaded["clusterWide"]["scaleDown"] == {
        "status": "CandidatesPresent",
        "candidates": 1,
        "lastProbeTime": "2026-03-02T10:00:00Z",
        "lastTransitionTime": "2026-03-02T10:00:00Z",
    }
    assert loaded["time"] == "2026-03-02 10:00:00 +0000 UTC"


def test_transition_time_is_kept_while_the_status_holds() -> None:
    csr = registry()
    nodes = [ca_node("a-0")]
    a = group("a", nodes=nodes)
    history = StatusHistory()
    csr.update(nodes=nodes, snapshot=snapshot(a), readiness=node_readiness, now=NOW)
    build_status(csr, history, NOW)
    later = NOW + timedelta(minutes=1)
    csr.update(nodes=nodes, snapshot=snapshot(a), readiness=node_readiness, now=later)
    status = build_status(csr, history, later)
    health = status["clusterWide"]["health"]
    assert health["lastProbeTime"] == format_time(later)
    assert health["lastTransitionTime"] == format_time(NOW)
    # a candidate appears: scale-down status changes, its transition time is now
    csr.update_scale_down_candidates({"a": ["a-0"]}, later)
    status = build_status(csr, history, later)
    assert status["clusterWide"]["scaleDown"]["lastTransitionTime"] == format_time(later)


def test_config_map_object() -> None:
    status = {"time": "2026-03-02 10:00:00 +0000 UTC", "autoscalerStatus": "Running"}
    created = status_config_map(
        name="cluster-autoscaler-status", namespace="kube-system", status=status, existing=None
    )
    assert created["metadata"]["annotations"] == {
        LAST_UPDATED_ANNOTATION: "2026-03-02 10:00:00 +0000 UTC"
    }
    assert created["data"]["status"] == (
        "autoscalerStatus: Running\ntime: 2026-03-02 10:00:00 +0000 UTC\n"
    )
    updated = status_config_map(
        name="cluster-autoscaler-status",
        namespace="kube-system",
        status=status,
        existing={
            "metadata": {"name": "cluster-autoscaler-status", "annotations": {"x": "y"}},
            "data": {"other": "kept"},
        },
    )
    assert updated["data"] == {"other": "kept", "status": created["data"]["status"]}
    assert updated["metadata"]["annotations"]["x"] == "y"
