"""Server-side printing (``kubectl get`` tables) of the in-process API server.

Expected cells are worked out from kube's printers (``printers.go``: ``printPod``,
``printDeployment``, ``printHorizontalPodAutoscaler`` with ``formatHPAMetrics``) and from
apiextensions' tableconvertor for the VPA CRD's ``additionalPrinterColumns``; ages from
``duration.HumanDuration`` on the server's (virtual) clock. Run with Debian's kubectl 1.20
(``$KUBECTL``, set by tests/run.sh) and with the machine's kubectl, when each is there.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.resources import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, PODS
from kubescale.rendering.kube_columns import human_duration
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.apiserver.tables import jsonpath_first

TIMEOUT = 60.0
_BINARIES = {
    "debian-1.20": os.environ.get("KUBECTL")
    or (str(p) if (p := Path(".venv/debian/usr/bin/kubectl")).exists() else None),
    "machine": shutil.which("kubectl"),
}
KUBECTLS = [
    pytest.param(path, id=name)
    for name, path in _BINARIES.items()
    if path is not None and (name == "debian-1.20" or path != _BINARIES["debian-1.20"])
]
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),  # more than 1 s in the future
        (-0.5, "0s"),
        (59, "59s"),
        (119, "119s"),  # < 2 min: seconds
        (300, "5m"),  # < 10 min: m and s, s omitted when 0
        (330, "5m30s"),
        (3000, "50m"),  # < 3 h: minutes
        (3 * 3600 + 600, "3h10m"),  # < 8 h: h and m
        (30 * 3600, "30h"),  # < 48 h: hours
        (3 * 86400 + 5 * 3600, "3d5h"),  # < 8 d: d and h
        (100 * 86400, "100d"),  # < 2 y: days
        (3 * 365 * 86400 + 86400 * 10, "3y10d"),  # < 8 y: y and d
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_jsonpath_first_subset() -> None:
    obj = {
        "spec": {"updatePolicy": {"updateMode": "Auto"}},
        "status": {
            "conditions": [
                {"type": "LowConfidence", "status": "False"},
                {"type": "RecommendationProvided", "status": "True"},
            ],
            "list": [{"a": 1}, {"a": 2}],
        },
    }
    assert jsonpath_first(obj, ".spec.updatePolicy.updateMode") == (True, "Auto")
    condition = ".status.conditions[?(@.type=='RecommendationProvided')].status"
    assert jsonpath_first(obj, condition) == (True, "True")
    assert jsonpath_first(obj, "{.status.list[1].a}") == (True, 2)
    assert jsonpath_first(obj, ".status.list[-1].a") == (True, 2)
    assert jsonpath_first(obj, ".status.list[*].a") == (True, 1)
    assert jsonpath_first(obj, ".status.list[5].a") == (False, None)
    assert jsonpath_first(obj, ".spec.missing") == (False, None)


def _objects() -> list[dict[str, Any]]:
    labels = {"app": "web"}
    container = {"name": "app", "image": "nginx:1.25"}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": labels},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "labels": labels},
            "spec": {"containers": [container], "nodeName": "node-a"},
        },
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2,
                "maxReplicas": 10,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    },
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": "rps"},
                            "target": {"type": "AverageValue", "averageValue": "100"},
                        },
                    },
                ],
            },
        },
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "updatePolicy": {"updateMode": "Auto", "minReplicas": 2},
            },
        },
    ]


async def _set_statuses(server: ApiServer) -> None:
    store = server.store
    deployment = store.get(DEPLOYMENTS, "web", "default")
    deployment["status"] = {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3,
                            "availableReplicas": 2}  # fmt: skip
    store.update_status(deployment)
    pod = store.get(PODS, "web-1", "default")
    pod["status"] = {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "containerStatuses": [
            {"name": "app", "ready": True, "restartCount": 4, "state": {"running": {}}}
        ],
    }
    store.update_status(pod)
    hpa = store.get(HORIZONTAL_POD_AUTOSCALERS, "web", "default")
    hpa["status"] = {
        "currentReplicas": 3,
        "desiredReplicas": 3,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu",
             "current": {"averageUtilization": 45, "averageValue": "90m"}}},
        ],
    }  # fmt: skip
    store.update_status(hpa)
    vpa_type = store.registry.by_kind("autoscaling.k8s.io/v1", "VerticalPodAutoscaler")
    assert vpa_type is not None
    vpa = store.get(vpa_type, "web", "default")
    vpa["status"] = {
        "recommendation": {
            "containerRecommendations": [
                {"containerName": "app", "target": {"cpu": "250m", "memory": "262144k"}}
            ]
        },
        "conditions": [{"type": "RecommendationProvided", "status": "True",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }  # fmt: skip
    store.update_status(vpa)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ApiServer]:
    clock = VirtualClock()
    async with ApiServer(clock=clock) as api:
        for obj in _objects():
            api.store.create(obj)
        await _set_statuses(api)
        await clock.advance(330)  # every object is 5m30s old
        yield api


async def _kubectl(binary: str, server: ApiServer, home: Path, *args: str) -> str:
    kubeconfig = home / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    process = await asyncio.create_subprocess_exec(
        binary, f"--kubeconfig={kubeconfig}", f"--cache-dir={home / 'cache'}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home)},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode == 0, err.decode()
    return out.decode()


def _rows(text: str) -> list[list[str]]:
    """Table lines split on runs of 2+ spaces (cells like ``cpu: 45%/80%`` hold one space)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


@pytest.mark.parametrize("binary", KUBECTLS)
async def test_kubectl_get_prints_kube_columns(
    binary: str, server: ApiServer, tmp_path: Path
) -> None:
    pods = _rows(await _kubectl(binary, server, tmp_path, "get", "pods", "-n", "default"))
    # printPod: READY ready/total containers, STATUS the phase, RESTARTS the sum of restarts
    assert pods == [["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
                    ["web-1", "1/1", "Running", "4", "5m30s"]]  # fmt: skip
    wide = _rows(
        await _kubectl(binary, server, tmp_path, "get", "pods", "-n", "default", "-o", "wide")
    )
    assert wide[0][5:7] == ["IP", "NODE"]
    assert wide[1][5:7] == ["10.0.0.7", "node-a"]

    deployments = _rows(await _kubectl(binary, server, tmp_path, "get", "deploy", "-n", "default"))
    # printDeployment: READY readyReplicas/spec.replicas, then updated and available
    assert deployments == [["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
                           ["web", "2/3", "3", "2", "5m30s"]]  # fmt: skip

    hpas = _rows(await _kubectl(binary, server, tmp_path, "get", "hpa", "-n", "default"))
    # formatHPAMetrics: utilization 45% of 80% (status index 0); the Pods metric has no status
    # at index 1 → <unknown>; minReplicas 2, maxReplicas 10, currentReplicas 3
    assert hpas == [
        ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"],
        ["web", "Deployment/web", "cpu: 45%/80%, rps: <unknown>/100", "2", "10", "3", "5m30s"],
    ]

    vpas = _rows(await _kubectl(binary, server, tmp_path, "get", "vpa", "-n", "default"))
    # the CRD's additionalPrinterColumns: Mode, first container's target cpu/memory, the
    # RecommendationProvided condition, Age; MinReplicas/OOMSeconds only with -o wide
    assert vpas == [["NAME", "MODE", "CPU", "MEM", "PROVIDED", "AGE"],
                    ["web", "Auto", "250m", "262144k", "True", "5m30s"]]  # fmt: skip
    vpa_wide = _rows(
        await _kubectl(binary, server, tmp_path, "get", "vpa", "-n", "default", "-o", "wide")
    )
    # evictAfterOOMSeconds unset: a nil cell, which kubectl prints blank
    assert vpa_wide[0][-2:] == ["MINREPLICAS", "OOMSECONDS"]
    assert vpa_wide[1][:7] == ["web", "Auto", "250m", "262144k", "True", "5m30s", "2"]


async def _get_json(server: ApiServer, path: str, accept: str) -> dict[str, Any]:
    base = server.http_url
    headers = {"Accept": accept, "Authorization": f"Bearer {server.token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(base + path, headers=headers) as response,
    ):
        assert response.status == 200, await response.text()
        body: dict[str, Any] = await response.json()
        return body


async def test_table_body_and_include_object(server: ApiServer) -> None:
    table = await _get_json(server, "/api/v1/namespaces/default/pods", TABLE_ACCEPT)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name", "Ready", "Status", "Restarts", "Age"]  # fmt: skip
    assert table["columnDefinitions"][0]["format"] == "name"
    assert table["metadata"]["resourceVersion"]
    (row,) = table["rows"]
    assert row["object"]["kind"] == "PartialObjectMetadata"  # includeObject=Metadata default
    assert row["object"]["metadata"]["name"] == "web-1"
    full = await _get_json(
        server, "/api/v1/namespaces/default/pods/web-1?includeObject=Object", TABLE_ACCEPT
    )
    assert full["rows"][0]["object"]["spec"]["nodeName"] == "node-a"
    bare = await _get_json(
        server, "/api/v1/namespaces/default/pods?includeObject=None", TABLE_ACCEPT
    )
    assert "object" not in bare["rows"][0]
    # autoscaling/v1 serves the same Table as v2 (kube prints the internal version)
    v1 = await _get_json(
        server, "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", TABLE_ACCEPT
    )
    assert v1["rows"][0]["cells"][2] == "cpu: 45%/80%, rps: <unknown>/100"
    # plain JSON still when JSON is asked first, and for kinds without columns here
    plain = await _get_json(
        server, "/api/v1/namespaces/default/pods", "application/json," + TABLE_ACCEPT
    )
    assert plain["kind"] == "PodList"
    configmaps = await _get_json(server, "/api/v1/namespaces/default/configmaps", TABLE_ACCEPT)
    assert configmaps["kind"] == "ConfigMapList"
