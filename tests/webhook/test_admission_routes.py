"""The webhook route over real HTTP, answered from informer caches of the in-process API server.

The cluster state: Deployment ``web`` (selector ``app=web``) owning ReplicaSet ``web-rs``, VPA
``web-vpa`` targeting the Deployment with target cpu 250m / memory 200Mi. A pod of ``web-rs``
asking for 100m / 100Mi (limits 200m / 200Mi) therefore gets 250m / 200Mi with limits 500m /
400Mi (ratio 2 kept: 200m × 250/100, 200Mi × 200/100).

Bad input (upstream ``logic/server.go`` would write nothing, crash or reject): every case gets a
well-formed ``admission.k8s.io/v1`` AdmissionReview allowing the object unchanged (except the
oversize body, which the TLS application refuses with 413 before the handler, as upstream), and
is counted in ``kubescale_webhook_bad_requests_total{reason}``.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import CORE_EVENTS, VERTICAL_POD_AUTOSCALERS
from kubescale.kube.shared_cache import SharedCache
from kubescale.runtime.https_server import MAX_BODY_BYTES, make_https_app
from kubescale.sim.apiserver.patching import apply_json_patch
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings
from tests.builders import nodes, pods, vpas
from tests.builders.admission import admission_review
from tests.builders.meta import owner_reference

from .api_fixtures import build_caches

RS_UID = "11111111-2222-3333-4444-555555555555"
MD_UID = "99999999-2222-3333-4444-555555555555"
TARGET = {"cpu": "250m", "memory": "200Mi"}


async def eventually(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    """Wait (real time) until the informers have caught up with a write."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, "the caches did not catch up"
        await asyncio.sleep(0.005)


def _recommendation(target: dict[str, str]) -> dict[str, Any]:
    return {"containerRecommendations": [{"containerName": "app", "target": target}]}


def _seed(api: ApiServer) -> None:
    store = api.store
    labels = {"app": "web"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app"}]}}
    deployment = store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": deployment["metadata"]["uid"],
        "controller": True,
    }
    store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-rs", "namespace": "default", "ownerReferences": [owner]},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    for vpa in (
        vpas.vpa(
            name="web-vpa",
            target=vpas.target_ref(kind="Deployment", name="web", api_version="apps/v1"),
            update_mode="Recreate",
            status={"recommendation": _recommendation(TARGET)},
        ),
    ):
        created = store.create({k: v for k, v in vpa.items() if k != "status"})
        store.update_status({**created, "status": vpa["status"]})


WEB_RS_OWNER = owner_reference(kind="ReplicaSet", name="web-rs", uid=RS_UID)
web_pod = functools.partial(
    pods.pod,
    name=None,
    labels={"app": "web"},
    owner_references=[WEB_RS_OWNER],
    metadata_extra={"generateName": "web-rs-"},
    containers=[
        pods.container(
            "app",
            image="nginx",
            requests={"cpu": "100m", "memory": "100Mi"},
            limits={"cpu": "200m", "memory": "200Mi"},
        )
    ],
)
"""A pod of the ``web-rs`` ReplicaSet (``owner_references`` for another owner)."""


@dataclass
class Setup:
    api: ApiServer
    kube: KubeClient
    caches: AdmissionCaches
    informers: SharedCache
    webhook: AdmissionWebhook
    registry: CollectorRegistry
    http: TestClient[Any, Any]

    async def post(self, body: bytes, *, content_type: str = "application/json") -> Any:
        response = await self.http.post("/", data=body, headers={"Content-Type": content_type})
        assert response.status == 200, await response.text()
        return await response.json()

    def bad(self, reason: str) -> float:
        value = self.registry.get_sample_value(
            "kubescale_webhook_bad_requests_total", {"reason": reason}
        )
        return value or 0.0


async def _setup(tmp_path: Path, settings: WebhookSettings) -> AsyncIterator[Setup]:
    async with ApiServer(seed=1) as api:
        _seed(api)
        api.write_kubeconfig(tmp_path / "kubeconfig")
        kube = await connect(kubeconfig=tmp_path / "kubeconfig", rng=random.Random(0))
        informers, caches = build_caches(kube, settings, clock=kube.clock)
        informers.start()
        assert await informers.wait_synced()
        registry = CollectorRegistry()
        webhook = AdmissionWebhook(settings=settings, registry=registry, caches=caches)
        recorder = EventRecorder(client=kube, component="vpa-admission-controller")
        webhook.recorder = recorder
        app = make_https_app()
        webhook.mount(app)
        http: TestClient[Any, Any] = TestClient(TestServer(app))
        await http.start_server()
        try:
            yield Setup(
                api=api,
                kube=kube,
                caches=caches,
                informers=informers,
                webhook=webhook,
                registry=registry,
                http=http,
            )
        finally:
            await http.close()
            await recorder.close()
            await informers.stop()
            await kube.close()


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings()):
        yield value


def _patched(answer: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    response = answer["response"]
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    patched: dict[str, Any] = apply_json_patch(obj, patch)
    return patched


def _well_formed_allowed(answer: Any, uid: str) -> None:
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == uid
    assert answer["response"]["allowed"] is True
    assert "patch" not in answer["response"]


async def test_a_pod_of_a_vpa_controlled_deployment_is_mutated(setup: Setup) -> None:
    pod = web_pod()
    answer = await setup.post(
        json.dumps(
            admission_review(
                uid="req-1", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    assert answer["response"]["uid"] == "req-1"
    assert answer["response"]["allowed"] is True
    mutated = _patched(answer, pod)
    assert mutated["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "250m", "memory": "200Mi"},
        "limits": {"cpu": "500m", "memory": "400Mi"},
    }
    assert mutated["metadata"]["annotations"]["vpaObservedContainers"] == "app"
    registry = setup.registry
    assert (
        registry.get_sample_value(
            "vpa_admission_controller_admission_pods_total", {"applied": "true"}
        )
        == 1.0
    )
    assert (
        registry.get_sample_value(
            "vpa_admission_controller_admission_latency_seconds_count",
            {"status": "applied", "resource": "Pod"},
        )
        == 1.0
    )


async def test_content_type_parameters_are_ignored(setup: Setup) -> None:
    pod = web_pod()
    body = json.dumps(
        admission_review(
            uid="charset", namespace="default", request={"object": pod, "oldObject": None}
        )
    ).encode()
    answer = await setup.post(body, content_type="application/json; charset=utf-8")
    assert _patched(answer, pod)["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "250m"


async def test_a_pod_without_a_vpa_is_skipped(setup: Setup) -> None:
    pod = web_pod()
    pod["metadata"]["ownerReferences"] = []
    answer = await setup.post(
        json.dumps(
            admission_review(
                uid="req-1", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    _well_formed_allowed(answer, "req-1")
    assert (
        setup.registry.get_sample_value(
            "vpa_admission_controller_admission_pods_total", {"applied": "false"}
        )
        == 1.0
    )
    assert (
        setup.registry.get_sample_value(
            "vpa_admission_controller_admission_latency_seconds_count",
            {"status": "skipped", "resource": "Pod"},
        )
        == 1.0
    )


POD_REVIEW = admission_review(
    uid="uid-ok", namespace="default", request={"object": web_pod(), "oldObject": None}
)


@dataclass(frozen=True)
class BadInput:
    case: str
    body: bytes
    content_type: str
    uid: str
    """The uid the answer must carry (what could be read of the request)."""
    reason: str
    """The counted reason."""
    resource: str
    """The latency metric's resource label."""


BAD_INPUTS = [
    BadInput(*case)
    for case in [
        # (case, body, content type, uid in the answer, counted reason, latency metric resource)
        (
            "malformed JSON",
            b'{"request": {"uid": ',
            "application/json",
            "",
            "malformed-json",
            "unknown",
        ),
        ("not UTF-8", b"\xff\xfe\x00{}", "application/json", "", "malformed-json", "unknown"),
        (
            "wrong Content-Type",
            json.dumps(POD_REVIEW).encode(),
            "text/plain",
            "uid-ok",
            "content-type",
            "unknown",
        ),
        (
            "no Content-Type value",
            json.dumps(POD_REVIEW).encode(),
            "",
            "uid-ok",
            "content-type",
            "unknown",
        ),
        ("a JSON array", b"[1, 2]", "application/json", "", "not-an-object", "unknown"),
        (
            "no request",
            b'{"kind": "AdmissionReview"}',
            "application/json",
            "",
            "missing-request",
            "unknown",
        ),
        (
            "request not an object",
            b'{"request": 7}',
            "application/json",
            "",
            "missing-request",
            "unknown",
        ),
        (
            "no uid",
            json.dumps({"request": {"resource": {}}}).encode(),
            "application/json",
            "",
            "missing-uid",
            "unknown",
        ),
        (
            "no resource",
            json.dumps({"request": {"uid": "u-3"}}).encode(),
            "application/json",
            "u-3",
            "missing-resource",
            "unknown",
        ),
        (
            "unknown kind",
            json.dumps(
                admission_review(
                    uid="u-4",
                    group="apps",
                    resource="deployments",
                    namespace="default",
                    request={"object": {}, "oldObject": None},
                )
            ).encode(),
            "application/json",
            "u-4",
            "unsupported-resource",
            "unknown",
        ),
        (
            "pods of another version",
            json.dumps(
                admission_review(
                    uid="u-5",
                    version="v2",
                    namespace="default",
                    request={"object": web_pod(), "oldObject": None},
                )
            ).encode(),
            "application/json",
            "u-5",
            "unsupported-resource",
            "Pod",
        ),
        (
            "pod object missing",
            json.dumps(
                admission_review(
                    uid="u-6", namespace="default", request={"object": None, "oldObject": None}
                )
            ).encode(),
            "application/json",
            "u-6",
            "missing-object",
            "Pod",
        ),
        (
            "VPA object not an object",
            json.dumps(
                admission_review(
                    uid="u-7",
                    group="autoscaling.k8s.io",
                    resource="verticalpodautoscalers",
                    namespace="default",
                    request={"object": "x", "oldObject": None},
                )
            ).encode(),
            "application/json",
            "u-7",
            "missing-object",
            "VPA",
        ),
        (
            "deeply nested JSON (recursion limit)",
            b'{"request": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "application/json",
            "",
            "malformed-json",
            "unknown",
        ),
    ]
]


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[bad.case for bad in BAD_INPUTS])
async def test_bad_input_gets_a_well_formed_allowing_answer_counted_and_logged(
    setup: Setup, caplog: pytest.LogCaptureFixture, bad: BadInput
) -> None:
    with caplog.at_level(logging.WARNING, logger="kubescale.webhook"):
        answer = await setup.post(bad.body, content_type=bad.content_type)
    _well_formed_allowed(answer, bad.uid)
    assert setup.bad(bad.reason) == 1.0
    assert any(getattr(r, "fields", {}).get("reason") == bad.reason for r in caplog.records)
    assert (
        setup.registry.get_sample_value(
            "vpa_admission_controller_admission_latency_seconds_count",
            {"status": "error", "resource": bad.resource},
        )
        == 1.0
    )


async def test_an_oversize_body_is_refused_with_413_before_the_handler_and_counted(
    setup: Setup,
) -> None:
    body = b'{"request": {"uid": "big", "padding": "' + b"x" * MAX_BODY_BYTES + b'"}}'
    response = await setup.http.post("/", data=body, headers={"Content-Type": "application/json"})
    assert response.status == 413
    assert setup.bad("body-too-large") == 1.0
    # a chunked body (no Content-Length) that grows past the limit while being read: 413 too

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"request": {"uid": "chunked", "padding": "'
        for _ in range(6):
            yield b"x" * (1024 * 1024)
        yield b'"}}'

    response = await setup.http.post(
        "/", data=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status == 413
    assert setup.bad("body-too-large") == 2.0
    # just under the limit is processed (and answered: no resource in it)
    small = json.dumps({"request": {"uid": "fits", "padding": "x" * 1000}}).encode()
    answer = await setup.post(small)
    _well_formed_allowed(answer, "fits")


@pytest.mark.parametrize(
    "target",
    [
        {"cpu": "9223372036854775807", "memory": "9223372036854775807"},
        {"cpu": "1e100", "memory": "1e100"},
        {"cpu": "999999999999999999999999999999999999999", "memory": "8Ei"},
        {"cpu": "-1", "memory": "-5Gi"},
        {"cpu": "abc", "memory": "12 Mi"},
    ],
    ids=["int64 max", "1e100", "40 digits", "negative", "not quantities"],
)
async def test_huge_or_broken_quantities_still_allow_the_pod(
    setup: Setup, target: dict[str, str]
) -> None:
    vpa = setup.api.store.get(VERTICAL_POD_AUTOSCALERS, "web-vpa", "default")
    setup.api.store.update_status({**vpa, "status": {"recommendation": _recommendation(target)}})
    lister = setup.informers.informers.lister(VERTICAL_POD_AUTOSCALERS)

    def cached() -> bool:
        current = lister.get("web-vpa", "default") or {}
        recs = ((current.get("status") or {}).get("recommendation") or {}).get(
            "containerRecommendations"
        ) or [{}]
        return bool(recs[0].get("target") == target)

    await eventually(cached)
    pod = web_pod()
    answer = await setup.post(
        json.dumps(
            admission_review(
                uid="huge", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    response = answer["response"]
    assert response["uid"] == "huge"
    assert response["allowed"] is True
    if "patch" in response:  # whatever was computed must apply to the pod
        _patched(answer, pod)


async def test_first_sight_of_a_scalable_kind_admits_unmutated_and_looks_it_up(
    setup: Setup,
) -> None:
    store = setup.api.store
    store.create(
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "pool", "namespace": "default"},
            "spec": {
                "clusterName": "c",
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"clusterName": "c"}},
            },
        }
    )
    vpa = vpas.vpa(
        name="pool-vpa",
        target=vpas.target_ref(
            kind="MachineDeployment", name="pool", api_version="cluster.x-k8s.io/v1beta1"
        ),
        update_mode="Recreate",
        status={"recommendation": _recommendation({"cpu": "300m"})},
    )
    created = store.create({k: v for k, v in vpa.items() if k != "status"})
    store.update_status({**created, "status": vpa["status"]})
    lister = setup.informers.informers.lister(VERTICAL_POD_AUTOSCALERS)
    await eventually(lambda: "status" in (lister.get("pool-vpa", "default") or {}))
    pod = web_pod(
        owner_references=[
            owner_reference(
                kind="MachineDeployment",
                name="pool",
                api_version="cluster.x-k8s.io/v1beta1",
                uid=RS_UID,
            )
        ]
    )
    first = await setup.post(
        json.dumps(
            admission_review(
                uid="first", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    _well_formed_allowed(first, "first")
    assert (
        setup.registry.get_sample_value(
            "kubescale_webhook_pods_not_matched_total", {"reason": "controller-lookup-pending"}
        )
        == 1.0
    )
    lookups = setup.caches.controllers.scale_lookups
    assert lookups.pending > 0
    await lookups.resolve_pending()  # the background task's work, off the request path
    assert lookups.pending == 0
    second = await setup.post(
        json.dumps(
            admission_review(
                uid="second", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    mutated = _patched(second, pod)
    assert mutated["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "300m"
    # the selector came from the /scale subresource: a pod it does not select is left alone
    other = web_pod(
        owner_references=[
            owner_reference(
                kind="MachineDeployment",
                name="pool",
                api_version="cluster.x-k8s.io/v1beta1",
                uid=RS_UID,
            )
        ]
    )
    other["metadata"]["labels"] = {"app": "other"}
    third = await setup.post(
        json.dumps(
            admission_review(
                uid="third", namespace="default", request={"object": other, "oldObject": None}
            )
        ).encode()
    )
    _well_formed_allowed(third, "third")


async def test_without_caches_pods_are_admitted_unmutated_and_counted(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=registry)
    app = make_https_app()
    webhook.mount(app)
    async with TestClient(TestServer(app)) as http:
        response = await http.post(
            "/",
            json=admission_review(
                uid="early", namespace="default", request={"object": web_pod(), "oldObject": None}
            ),
            headers={"Content-Type": "application/json"},
        )
        answer = await response.json()
    _well_formed_allowed(answer, "early")
    assert (
        registry.get_sample_value(
            "kubescale_webhook_pods_not_matched_total", {"reason": "caches-not-synced"}
        )
        == 1.0
    )


@pytest.fixture
async def hpa_setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings(avoid_hpa_conflict=True)):
        yield value


async def test_avoid_hpa_conflict_leaves_cpu_alone_and_records_an_event(hpa_setup: Setup) -> None:
    setup = hpa_setup
    setup.api.store.create(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web-hpa", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1,
                "maxReplicas": 5,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 60},
                        },
                    }
                ],
            },
        }
    )
    await eventually(lambda: bool(setup.caches.hpas_for("default", "Deployment", "web")))
    pod = web_pod()
    answer = await setup.post(
        json.dumps(
            admission_review(
                uid="hpa", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    mutated = _patched(answer, pod)
    # cpu left as the pod asks (HPA scales on it); memory from the recommendation, limit 2:1
    assert mutated["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "100m", "memory": "200Mi"},
        "limits": {"cpu": "200m", "memory": "400Mi"},
    }
    recorder = setup.webhook.recorder
    assert recorder is not None
    await recorder.flush()
    events = setup.api.store.snapshots(CORE_EVENTS, "default")
    (event,) = [e for e in events if e["reason"] == "HPAConflict"]
    assert event["involvedObject"]["kind"] == "VerticalPodAutoscaler"
    assert event["involvedObject"]["name"] == "web-vpa"
    assert event["type"] == "Normal"
    assert event["message"] == (
        "HorizontalPodAutoscaler web-hpa scales Deployment/web on cpu: "
        "the cpu requests and limits of its pods are left as they are"
    )


@pytest.fixture
async def node_setup(tmp_path: Path) -> AsyncIterator[Setup]:
    async for value in _setup(tmp_path, WebhookSettings(cap_to_largest_node=True)):
        yield value


async def test_cap_to_largest_node_scales_requests_down_to_the_largest_ready_node(
    node_setup: Setup,
) -> None:
    setup = node_setup
    store = setup.api.store
    for node in (
        nodes.node(
            name="small",
            allocatable={"cpu": "1", "memory": "1Gi", "pods": "110"},
            conditions=[nodes.ready_condition("True")],
        ),
        nodes.node(
            name="large",
            allocatable={"cpu": "2", "memory": "1Gi", "pods": "110"},
            conditions=[nodes.ready_condition("True")],
        ),
        nodes.node(
            name="huge-but-not-ready",
            allocatable={"cpu": "64", "memory": "256Gi", "pods": "110"},
            conditions=[nodes.ready_condition("False")],
        ),
    ):
        created = store.create({k: v for k, v in node.items() if k != "status"})
        store.update_status({**created, "status": node["status"]})
    vpa = store.get(VERTICAL_POD_AUTOSCALERS, "web-vpa", "default")
    store.update_status(
        {**vpa, "status": {"recommendation": _recommendation({"cpu": "3", "memory": "100Mi"})}}
    )

    def ready() -> bool:
        largest = setup.caches.largest_node_allocatable() or {}
        current = setup.informers.informers.lister(VERTICAL_POD_AUTOSCALERS).get(
            "web-vpa", "default"
        )
        target = (
            (((current or {}).get("status") or {}).get("recommendation") or {})
            .get("containerRecommendations", [{}])[0]
            .get("target", {})
        )
        return str(largest.get("cpu")) == "2" and target.get("cpu") == "3"

    await eventually(ready)
    pod = web_pod()
    answer = await setup.post(
        json.dumps(
            admission_review(
                uid="fit", namespace="default", request={"object": pod, "oldObject": None}
            )
        ).encode()
    )
    mutated = _patched(answer, pod)
    # cpu target 3 > the largest Ready node's 2 → 2; limit keeps the 2:1 ratio → 4
    resources = mutated["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "2"
    assert resources["limits"]["cpu"] == "4"
    assert "cpu capped to fit the largest node" in mutated["metadata"]["annotations"]["vpaUpdates"]


async def test_a_limit_range_override_is_one_warning_event_for_many_pods(setup: Setup) -> None:
    store = setup.api.store
    store.create(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "cpu", "namespace": "default"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "300m"}}]},
        }
    )
    vpa = store.get(VERTICAL_POD_AUTOSCALERS, "web-vpa", "default")
    vpa["spec"]["resourcePolicy"] = {
        "containerPolicies": [{"containerName": "*", "minAllowed": {"cpu": "1"}}]
    }
    store.update(vpa)
    lister = setup.caches.cache.informers.lister(VERTICAL_POD_AUTOSCALERS)

    def caught_up() -> bool:
        cached = lister.get("web-vpa", "default")
        return (
            bool(setup.caches.limit_ranges("default"))
            and cached is not None
            and ("resourcePolicy" in cached["spec"])
        )

    await eventually(caught_up)
    # 100m / 200m (ratio 2), LimitRange max 300m -> request at most 100m x 300m / 200m = 150m.
    # Recommendation 250m -> 150m; minAllowed 1 would raise it to 1 (limit 2 > 300m): the
    # LimitRange wins, 150m / 300m.
    for index in range(30):  # the pods of one ReplicaSet
        pod = web_pod()
        answer = await setup.post(
            json.dumps(
                admission_review(
                    uid=f"pod-{index}",
                    namespace="default",
                    request={"object": pod, "oldObject": None},
                )
            ).encode()
        )
        resources = _patched(answer, pod)["spec"]["containers"][0]["resources"]
        assert resources["requests"]["cpu"] == "150m"
        assert resources["limits"]["cpu"] == "300m"
    recorder = setup.webhook.recorder
    assert recorder is not None
    await recorder.flush()
    events = [
        e
        for e in setup.api.store.snapshots(CORE_EVENTS, "default")
        if e["reason"] == "LimitRangeConflict"
    ]
    assert len(events) == 1
    (event,) = events
    assert (event["type"], event["count"]) == ("Warning", 1)
    assert event["involvedObject"]["name"] == "web-vpa"
    assert event["message"] == (
        "a LimitRange of the namespace wins over this VPA for pods of Deployment/web: "
        "container app: cpu minAllowed 1 is above what the container LimitRange allows "
        "(max 300m): the request is set to 150m"
    )
    assert setup.webhook.event_throttle.suppressed == 29


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@pytest.mark.parametrize("count", [10_000, 20_000])
async def test_a_pod_at_the_largest_kube_apiserver_sends_is_answered_within_the_body_budget(
    setup: Setup, count: int
) -> None:
    # kube-apiserver reads a create body of at most 3 MiB (3,145,728 bytes) and calls the
    # webhook before etcd's 1.5 MiB applies, so that is the largest pod a review can carry.
    # Labels at their largest (63-character keys and values: json.dumps writes
    # '"k": "v", ' = 63 + 63 + 8 = 134 bytes each) and annotations at their 256 KiB cap:
    # 10,000 labels = 1,340,000 + 262,144 bytes ~ 1.6 MB (the issue's case); 20,000 labels =
    # 2,680,000 + 262,144 ~ 2.94 MB, under 3 MiB; both under the webhook's 5 MiB budget.
    labels = {"app": "web"} | {
        f"label-{index:05d}".ljust(63, "k"): f"value-{index:05d}".ljust(63, "v")
        for index in range(count)
    }
    annotations = {LAST_APPLIED: "x" * (256 * 1024 - len(LAST_APPLIED))}
    pod = web_pod(labels=labels, annotations=annotations)
    body = json.dumps(
        admission_review(
            uid="huge", namespace="default", request={"object": pod, "oldObject": None}
        )
    ).encode()
    assert len(body) < 3 * 1024 * 1024  # what kube-apiserver can send; the budget is 5 MiB
    answer = await setup.post(body)
    assert answer["response"]["uid"] == "huge"
    assert answer["response"]["allowed"] is True
    mutated = _patched(answer, pod)
    assert mutated["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "250m",
        "memory": "200Mi",
    }
    # the question (the body less its uid) is over MAX_QUESTION_BYTES: not remembered, and the
    # memo stays within its byte bound
    assert setup.webhook.memo.answers() == 0
    assert setup.webhook.memo.bytes <= setup.webhook.memo.max_bytes
