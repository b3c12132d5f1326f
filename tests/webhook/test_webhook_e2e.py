"""End to end: ``kubescale serve`` with the VPA webhook, kube-apiserver's admission chain, TLS.

The pieces are the production ones: ``kubescale certs`` makes the CA and the serving certificate
for Service ``kube-system/vpa-webhook``; :func:`kubescale.cli.serve.serve` runs with the
:class:`~kubescale.webhook.component.WebhookComponent` and a kubeconfig for the in-process API
server; the component's self-registration creates the MutatingWebhookConfiguration (caBundle from
``--client-ca-file``, no path), the API server resolves the Service to kubescale's port and
verifies the certificate against that caBundle; the simulated cluster's Deployment and
ReplicaSet controllers create the pods through the admission chain.

Expected values (upstream rules, no capping involved): the container asks for requests
cpu 100m / memory 100Mi and limits cpu 200m / memory 200Mi; the VPA's target is cpu 250m /
memory 200Mi. Requests become the target. ``RequestsAndLimits`` keeps each limit:request ratio
(2:1 for both): cpu limit = 200m × 250m / 100m = 500m, memory limit = 200Mi × 200Mi / 100Mi =
400Mi. ``vpaUpdates`` lists the container's request then limit changes, cpu before memory;
``vpaObservedContainers`` names the container.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser, main
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import (
    CORE_EVENTS,
    DEPLOYMENTS,
    LIMIT_RANGES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.workload_controllers import WorkloadControllers
from kubescale.webhook.component import WebhookComponent
from kubescale.webhook.registration import WEBHOOK_CONFIG_NAME
from tests import builders

SERVICE, NAMESPACE = "vpa-webhook", "kube-system"


@pytest.fixture(scope="module")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("webhook-certs")
    argv = ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out", str(out)]
    assert main([*argv, "--key-type", "ecdsa"]) == 0
    return out


@dataclass
class Cluster:
    api: ApiServer
    client: KubeClient
    server: Server
    component: WebhookComponent
    stop: Callable[[], Any]


async def _wait_for(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def _start_kubescale(
    api: ApiServer, cert_dir: Path, kubeconfig: Path, *flags: str
) -> tuple[Server, WebhookComponent, asyncio.Task[int]]:
    argv = [
        "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
        "--webhook", "true", "--webhook-service-namespace", NAMESPACE, *flags,
    ]  # fmt: skip
    config = serve_config_from_args(build_parser().parse_args(argv))
    enabled = [c for c in default_components(config, environ={}) if c.name == "webhook"]
    started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(config, clock=RealClock(), components=enabled, started=started,
              install_signal_handlers=False)
    )  # fmt: skip
    server = await asyncio.wait_for(started, timeout=10)
    (component,) = server.components
    assert isinstance(component, WebhookComponent)
    api.register_service(
        namespace=NAMESPACE, name=SERVICE, port=443, address=("127.0.0.1", server.https_port)
    )
    await asyncio.wait_for(component.registration.registered.wait(), timeout=10)
    return server, component, task


@pytest.fixture
async def cluster(cert_dir: Path, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with ApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        server, component, task = await _start_kubescale(api, cert_dir, kubeconfig)
        client = await connect(kubeconfig=kubeconfig)
        stopped = False

        async def stop() -> None:
            nonlocal stopped
            if not stopped:
                stopped = True
                server.stop_event.set()
                assert await asyncio.wait_for(task, timeout=10) == 0

        try:
            yield Cluster(api=api, client=client, server=server, component=component, stop=stop)
        finally:
            await client.close()
            await stop()


RECOMMENDATION = {
    "containerRecommendations": [
        {
            "containerName": "app",
            "target": {"cpu": "250m", "memory": "200Mi"},
            "lowerBound": {"cpu": "100m", "memory": "100Mi"},
            "upperBound": {"cpu": "1", "memory": "1Gi"},
        }
    ]
}


async def _vpa_with_recommendation(cluster: Cluster, name: str, target: str) -> dict[str, Any]:
    created = await cluster.client.create(
        VERTICAL_POD_AUTOSCALERS,
        builders.vpas.vpa(name=name, target=builders.vpas.target_ref(name=target)),
    )
    created["status"] = {"recommendation": RECOMMENDATION}
    stored = await cluster.client.update_status(VERTICAL_POD_AUTOSCALERS, created)
    caches = cluster.component.caches
    assert caches is not None

    def seen() -> bool:
        cached = caches.cache.informers.lister(VERTICAL_POD_AUTOSCALERS).get(name, "default")
        return cached is not None and "recommendation" in (cached.get("status") or {})

    await _wait_for(seen)
    return stored


async def _create_deployment_pods(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    await cluster.client.create(
        DEPLOYMENTS,
        builders.workloads.deployment(
            name=name,
            replicas=2,
            match_labels={"app": name},
            template=builders.workloads.pod_template(
                labels={"app": name},
                containers=[
                    builders.pods.container(
                        image="nginx",
                        requests={"cpu": "100m", "memory": "100Mi"},
                        limits={"cpu": "200m", "memory": "200Mi"},
                    )
                ],
            ),
        ),
    )
    controllers = WorkloadControllers(api=cluster.api)
    try:
        await controllers.step(RealClock().now())
    finally:
        controllers.close()
    return [
        pod
        for pod in cluster.api.store.snapshots(PODS, "default")
        if pod["metadata"]["labels"].get("app") == name
    ]


async def test_registration_writes_upstreams_configuration(
    cluster: Cluster, cert_dir: Path
) -> None:
    stored = await cluster.client.get(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIG_NAME)
    (hook,) = stored["webhooks"]
    assert hook["name"] == "vpa.k8s.io"
    assert hook["clientConfig"] == {
        "service": {"namespace": NAMESPACE, "name": SERVICE},
        "caBundle": base64.b64encode((cert_dir / "caCert.pem").read_bytes()).decode(),
    }
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 30
    assert hook["sideEffects"] == "None"


async def test_deployment_pods_get_upstreams_requests_limits_and_annotations(
    cluster: Cluster,
) -> None:
    await _vpa_with_recommendation(cluster, "web-vpa", "web")
    pods = await _create_deployment_pods(cluster, "web")
    assert len(pods) == 2
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["resources"] == {
            "requests": {"cpu": "250m", "memory": "200Mi"},
            "limits": {"cpu": "500m", "memory": "400Mi"},
        }
        annotations = pod["metadata"]["annotations"]
        assert annotations["vpaUpdates"] == (
            "Pod resources updated by web-vpa: container 0: cpu request, memory request, "
            "cpu limit, memory limit"
        )
        assert annotations["vpaObservedContainers"] == "app"
    metrics = cluster.server.registry
    applied = metrics.get_sample_value(
        "vpa_admission_controller_admission_pods_total", {"applied": "true"}
    )
    assert applied == 2.0


async def test_vpa_create_is_defaulted_and_a_bad_field_is_rejected(cluster: Cluster) -> None:
    created = await cluster.client.create(
        VERTICAL_POD_AUTOSCALERS,
        builders.vpas.vpa(name="defaulted", target=builders.vpas.target_ref()),
    )
    assert created["spec"]["updatePolicy"] == {"updateMode": "Recreate"}
    bad = builders.vpas.vpa(name="bad", target=builders.vpas.target_ref(), update_mode="Sometimes")
    with pytest.raises(KubeApiError) as raised:
        await cluster.client.create(VERTICAL_POD_AUTOSCALERS, bad)
    assert raised.value.code == 422
    assert raised.value.message == (
        'admission webhook "vpa.k8s.io" denied the request: VerticalPodAutoscaler.'
        'autoscaling.k8s.io "bad" is invalid: spec.updatePolicy.updateMode: Unsupported value: '
        '"Sometimes": supported values: "InPlace", "InPlaceOrRecreate", "Initial", "Off", '
        '"Recreate"'
    )
    assert cluster.api.store.peek(VERTICAL_POD_AUTOSCALERS, "bad", "default") is None


async def test_with_kubescale_stopped_and_failure_policy_ignore_pods_are_still_created(
    cluster: Cluster,
) -> None:
    await _vpa_with_recommendation(cluster, "api-vpa", "api")
    await cluster.stop()
    pods = await _create_deployment_pods(cluster, "api")
    assert len(pods) == 2
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["resources"]["requests"] == {"cpu": "100m", "memory": "100Mi"}
        assert "vpaUpdates" not in (pod["metadata"].get("annotations") or {})


async def test_readiness_reports_the_webhooks_caches(cluster: Cluster) -> None:
    url = f"http://127.0.0.1:{cluster.server.health_port}/readyz?verbose"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        text = await response.text()
    assert response.status == 200
    assert "[+]webhook-caches ok" in text  # the webhook's own collections


async def test_a_rotated_ca_is_republished_and_the_webhook_keeps_working(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    argv = ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out", str(certs)]
    assert main([*argv, "--key-type", "ecdsa"]) == 0
    async with ApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        server, component, task = await _start_kubescale(
            api, certs, kubeconfig, "--cert-reload-interval", "100ms"
        )
        client = await connect(kubeconfig=kubeconfig)
        try:

            def published() -> str:
                stored = api.store.get(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIG_NAME)
                return str(stored["webhooks"][0]["clientConfig"]["caBundle"])

            before = published()
            assert main([*argv, "--key-type", "ecdsa"]) == 0  # a new CA and serving pair
            rotated = base64.b64encode((certs / "caCert.pem").read_bytes()).decode()
            assert rotated != before
            await _wait_for(lambda: published() == rotated)
            # the store has the new caBundle a moment before the registration hears back
            await _wait_for(lambda: component.registration.refreshes == 1)
            # kube-apiserver now trusts the new CA only, and the server serves the new pair
            new_serial = x509.load_pem_x509_certificate(
                (certs / "serverCert.pem").read_bytes()
            ).serial_number
            tls = server.tls
            assert tls is not None
            await _wait_for(lambda: tls.certificate.serial_number == new_serial)
            await client.create(
                VERTICAL_POD_AUTOSCALERS,
                builders.vpas.vpa(name="after-rotation", target=builders.vpas.target_ref()),
            )
            stored = api.store.get(VERTICAL_POD_AUTOSCALERS, "after-rotation", "default")
            assert stored["spec"]["updatePolicy"] == {"updateMode": "Recreate"}  # admitted by us
        finally:
            await client.close()
            server.stop_event.set()
            assert await asyncio.wait_for(task, timeout=10) == 0


@pytest.mark.parametrize(
    ("flags", "environ", "runs"),
    [
        ([], {}, False),  # auto, on a workstation: off
        ([], {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, True),  # auto, in a pod
        (["--kubeconfig", "/tmp/kubeconfig"], {}, True),  # auto, pointed at a cluster
        (["--webhook", "true"], {}, True),
        (["--webhook", "false", "--kubeconfig", "/tmp/k"], {"KUBERNETES_SERVICE_HOST": "x"}, False),
    ],
)
def test_whether_serve_runs_the_webhook(
    flags: list[str], environ: dict[str, str], runs: bool
) -> None:
    config = serve_config_from_args(build_parser().parse_args(["serve", *flags]))
    components = default_components(config, environ=environ)
    assert [c.name for c in components if c.name == "webhook"] == (["webhook"] if runs else [])


async def test_issue_19_a_limit_range_max_below_min_allowed_no_longer_blocks_the_pods(
    cluster: Cluster,
) -> None:
    """LimitRange ``max: {cpu: 50m}``, a Deployment valid there, a VPA with ``minAllowed: {cpu:
    "4"}``. Upstream answers cpu 4 and LimitRanger refuses every pod ("maximum cpu usage per
    Container is 50m, but limit is 4"); kubescale caps at 50m and the pods are created."""
    limits = {"apiVersion": "v1", "kind": "LimitRange",
              "metadata": {"name": "cpu", "namespace": "default"},
              "spec": {"limits": [{"type": "Container", "max": {"cpu": "50m"}}]}}  # fmt: skip
    await cluster.client.create(LIMIT_RANGES, limits)
    caches = cluster.component.caches
    await _wait_for(lambda: bool(caches.limit_ranges("default")))
    policy = {"containerPolicies": [{"containerName": "*", "minAllowed": {"cpu": "4"}}]}
    created = await cluster.client.create(
        VERTICAL_POD_AUTOSCALERS,
        builders.vpas.vpa(
            name="capped-vpa",
            target=builders.vpas.target_ref(name="capped"),
            spec={"resourcePolicy": policy},
        ),
    )
    created["status"] = {"recommendation": RECOMMENDATION}
    await cluster.client.update_status(VERTICAL_POD_AUTOSCALERS, created)

    def seen() -> bool:
        cached = caches.cache.informers.lister(VERTICAL_POD_AUTOSCALERS).get(
            "capped-vpa", "default"
        )
        return cached is not None and "recommendation" in (cached.get("status") or {})

    await _wait_for(seen)
    deployment = builders.workloads.deployment(
        name="capped",
        replicas=2,
        match_labels={"app": "capped"},
        template=builders.workloads.pod_template(
            labels={"app": "capped"},
            containers=[builders.pods.container(image="nginx")],
        ),
    )
    await cluster.client.create(DEPLOYMENTS, deployment)
    controllers = WorkloadControllers(api=cluster.api)
    try:
        await controllers.step(RealClock().now())
    finally:
        controllers.close()
    pods = [
        pod
        for pod in cluster.api.store.snapshots(PODS, "default")
        if pod["metadata"]["labels"].get("app") == "capped"
    ]
    assert len(pods) == 2
    for pod in pods:
        # LimitRanger gave the container 50m / 50m (default and defaultRequest from max); the
        # recommendation 250m is capped to 50m, minAllowed 4 overridden; memory 200Mi, no limit.
        assert pod["spec"]["containers"][0]["resources"] == {
            "requests": {"cpu": "50m", "memory": "200Mi"},
            "limits": {"cpu": "50m"},
        }
        assert pod["metadata"]["annotations"]["vpaUpdates"] == (
            "Pod resources updated by capped-vpa: container 0: cpu capped to fit Max in "
            "container LimitRange, cpu minAllowed overridden to fit Max in container LimitRange, "
            "memory: limit NOT set since originalLimit is nil or 0, cpu request, memory request, "
            "cpu limit"
        )
    recorder = cluster.component.recorder
    assert recorder is not None
    await recorder.flush()
    events = [
        event
        for event in cluster.api.store.snapshots(CORE_EVENTS, "default")
        if event["reason"] == "LimitRangeConflict"
    ]
    assert len(events) == 1  # two pods, one event
    (event,) = events
    assert (event["type"], event["involvedObject"]["name"]) == ("Warning", "capped-vpa")
    assert event["message"] == (
        "a LimitRange of the namespace wins over this VPA for pods of Deployment/capped: "
        "container app: cpu minAllowed 4 is above what the container LimitRange allows "
        "(max 50m): the request is set to 50m"
    )


async def test_startup_boost_through_the_admission_chain(cert_dir: Path, tmp_path: Path) -> None:
    # --feature-gates CPUStartupBoost=true, --max-allowed-cpu-boost 600m: the VPA's startupBoost
    # (Factor 4) on the target 250m is 1000m, capped to 600m; the limit keeps the pod's 2:1
    # ratio, 200m x 600m / 100m = 1200m = "1200m". The pod API server stores the boost
    # annotation (the original resources) beside upstream's two.
    async with ApiServer() as api:
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        flags = ("--feature-gates", "CPUStartupBoost=true", "--max-allowed-cpu-boost", "600m")
        server, component, task = await _start_kubescale(api, cert_dir, kubeconfig, *flags)
        client = await connect(kubeconfig=kubeconfig)
        cluster = Cluster(api=api, client=client, server=server, component=component, stop=list)
        try:
            boost = {"cpu": {"type": "Factor", "factor": 4, "durationSeconds": 30}}
            created = await client.create(
                VERTICAL_POD_AUTOSCALERS,
                builders.vpas.vpa(
                    name="web-vpa", target=builders.vpas.target_ref(), spec={"startupBoost": boost}
                ),
            )
            created["status"] = {"recommendation": RECOMMENDATION}
            await client.update_status(VERTICAL_POD_AUTOSCALERS, created)
            caches = component.caches
            assert caches is not None

            def seen() -> bool:
                lister = caches.cache.informers.lister(VERTICAL_POD_AUTOSCALERS)
                cached = lister.get("web-vpa", "default")
                return cached is not None and "recommendation" in (cached.get("status") or {})

            await _wait_for(seen)
            pods = await _create_deployment_pods(cluster, "web")
        finally:
            await client.close()
            server.stop_event.set()
            assert await asyncio.wait_for(task, timeout=10) == 0
    assert len(pods) == 2
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        assert container["resources"] == {
            "requests": {"cpu": "600m", "memory": "200Mi"},
            "limits": {"cpu": "1200m", "memory": "400Mi"},
        }
        annotations = pod["metadata"]["annotations"]
        assert annotations["vpaCpuStartupBoost/app"] == (
            '{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}'
        )


def test_max_allowed_cpu_boost_is_checked_at_start() -> None:
    argv = ["serve", "--max-allowed-cpu-boost", "lots"]
    with pytest.raises(ValueError, match="--max-allowed-cpu-boost"):
        serve_config_from_args(build_parser().parse_args(argv))
