"""KubeClient (its own aiohttp connection) against the in-process API server: verbs, errors,
retries, Retry-After, metrics, and both ways of connecting (kubeconfig and in-cluster)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import ClientSettings, KubeClient, connect
from kubescale.kube.config_loading import InClusterPaths
from kubescale.kube.connection import Configuration
from kubescale.kube.errors import KubeApiError, KubeTransportError, NotLeaderError
from kubescale.kube.resources import CONFIG_MAPS, DEPLOYMENTS, PODS, VERTICAL_POD_AUTOSCALERS
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.kube.objects import PAUSE, PAUSE_POD, config_map

from .conftest import FAST_CLIENT, new_client


def _count(registry: CollectorRegistry, *, verb: str, resource: str, code: str) -> float:
    value = registry.get_sample_value(
        "kubescale_apiserver_client_request_duration_seconds_count",
        {"verb": verb, "resource": resource, "code": code},
    )
    return value or 0.0


async def _until(predicate: object, *, limit: float = 5.0) -> None:
    """Poll (real time) until ``predicate()`` is true."""
    assert callable(predicate)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def test_crud_round_trip(client: KubeClient) -> None:
    created = await client.create(CONFIG_MAPS, config_map("a", data={"k": "1"}, labels={"x": "y"}))
    assert created["metadata"]["uid"]
    rv = created["metadata"]["resourceVersion"]
    got = await client.get(CONFIG_MAPS, "a", namespace="default")
    assert got["data"] == {"k": "1"}
    await client.create(CONFIG_MAPS, config_map("b"))
    listed = await client.list(CONFIG_MAPS, namespace="default", label_selector="x=y")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
    everything = await client.list_all(CONFIG_MAPS, page_size=1)
    assert {i["metadata"]["name"] for i in everything.items} >= {"a", "b"}
    assert int(everything.resource_version) >= int(rv)

    got["data"]["k"] = "2"
    updated = await client.update(CONFIG_MAPS, got)
    assert updated["data"] == {"k": "2"}
    assert updated["metadata"]["resourceVersion"] != rv

    merged = await client.patch(CONFIG_MAPS, "a", {"data": {"m": "3"}}, namespace="default")
    assert merged["data"] == {"k": "2", "m": "3"}
    jsoned = await client.patch(
        CONFIG_MAPS,
        "a",
        [{"op": "remove", "path": "/data/k"}],
        namespace="default",
        patch_type="json",
    )
    assert jsoned["data"] == {"m": "3"}
    strategic = await client.patch(
        CONFIG_MAPS, "a", {"data": {"s": "4"}}, namespace="default", patch_type="strategic"
    )
    assert strategic["data"] == {"m": "3", "s": "4"}

    await client.delete(CONFIG_MAPS, "a", namespace="default")
    with pytest.raises(KubeApiError) as caught:
        await client.get(CONFIG_MAPS, "a", namespace="default")
    assert caught.value.not_found
    assert caught.value.reason == "NotFound"


async def test_conflicts_and_already_exists_carry_the_status(client: KubeClient) -> None:
    created = await client.create(CONFIG_MAPS, config_map("c"))
    with pytest.raises(KubeApiError) as exists:
        await client.create(CONFIG_MAPS, config_map("c"))
    assert exists.value.already_exists
    assert exists.value.code == 409
    fresh = await client.patch(CONFIG_MAPS, "c", {"data": {"a": "b"}}, namespace="default")
    assert fresh["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    with pytest.raises(KubeApiError) as stale:
        await client.update(CONFIG_MAPS, created)  # carries the old resourceVersion
    assert stale.value.conflict
    assert stale.value.reason == "Conflict"
    assert "modified" in stale.value.message
    with pytest.raises(KubeApiError) as precondition:
        await client.delete(CONFIG_MAPS, "c", namespace="default", uid="not-the-uid")
    assert precondition.value.code == 409


async def test_a_429_waits_exactly_retry_after_on_the_clock(
    apiserver: ApiServer, kubeconfig: Path
) -> None:
    clock = VirtualClock()
    registry = CollectorRegistry()
    kube = await new_client(kubeconfig, clock=clock, registry=registry)
    try:
        apiserver.store.create(config_map("r"))
        apiserver.faults.add(verb="get", resource="configmaps", status=429, retry_after=3, count=1)
        task = asyncio.create_task(kube.get(CONFIG_MAPS, "r", namespace="default"))
        await _until(lambda: clock.sleepers == 1)
        assert clock.next_deadline() == pytest.approx(clock.elapsed + 3.0)
        assert not task.done()
        await clock.advance(2.9)
        assert not task.done()
        await clock.advance(0.1)
        got = await asyncio.wait_for(task, 5)
        assert got["metadata"]["name"] == "r"
        assert _count(registry, verb="get", resource="configmaps", code="429") == 1
        assert _count(registry, verb="get", resource="configmaps", code="200") == 1
    finally:
        await kube.close()


async def test_5xx_is_retried_with_backoff_and_bounded(
    apiserver: ApiServer, client: KubeClient, registry: CollectorRegistry
) -> None:
    apiserver.faults.add(verb="list", resource="configmaps", status=500, count=2)
    listed = await client.list(CONFIG_MAPS, namespace="default")
    assert listed["kind"] == "ConfigMapList"
    assert _count(registry, verb="list", resource="configmaps", code="500") == 2

    apiserver.faults.add(verb="list", resource="configmaps", status=503, count=None)
    with pytest.raises(KubeApiError) as caught:
        await client.list(CONFIG_MAPS, namespace="default")
    assert caught.value.code == 503
    assert _count(registry, verb="list", resource="configmaps", code="503") == 5
    apiserver.faults.clear()


async def test_non_idempotent_writes_are_not_retried_after_a_5xx(
    apiserver: ApiServer, client: KubeClient
) -> None:
    apiserver.store.create(config_map("j", data={"a": "1"}))
    apiserver.faults.add(verb="patch", resource="configmaps", status=500, count=1)
    with pytest.raises(KubeApiError):
        await client.patch(
            CONFIG_MAPS,
            "j",
            [{"op": "add", "path": "/data/b", "value": "2"}],
            namespace="default",
            patch_type="json",
        )
    # A write's 5xx without Retry-After is the server's answer (client-go retries a write only
    # when the 5xx carries Retry-After), e.g. an admission webhook failing closed.
    apiserver.faults.add(verb="patch", resource="configmaps", status=500, count=1)
    with pytest.raises(KubeApiError):
        await client.patch(CONFIG_MAPS, "j", {"data": {"c": "3"}}, namespace="default")
    apiserver.faults.add(verb="patch", resource="configmaps", status=503, count=1, retry_after=1)
    merged = await client.patch(CONFIG_MAPS, "j", {"data": {"c": "3"}}, namespace="default")
    assert merged["data"] == {"a": "1", "c": "3"}
    apiserver.faults.add(verb="create", resource="configmaps", status=500, count=1)
    generated = {"metadata": {"generateName": "gen-", "namespace": "default"}, "data": {}}
    with pytest.raises(KubeApiError):
        await client.create(CONFIG_MAPS, generated)
    made = await client.create(CONFIG_MAPS, generated)
    assert made["metadata"]["name"].startswith("gen-")


async def test_a_named_create_whose_answer_was_lost_reports_the_retry_409_as_unanswered(
    apiserver: ApiServer, kubeconfig: Path
) -> None:
    """What the flaky run met, made deterministic: the first attempt is stored but its answer
    lost (here a 503 with Retry-After after the commit, which the transport retries for a named
    create; a client-side timeout is retried the same way), so the retry is answered 409
    AlreadyExists. That 409 speaks for the retry only: the error says one earlier attempt went
    unanswered, so a caller counts the create as possibly done (house rule: an unknown outcome
    counts as done until proven otherwise) rather than as someone else's object."""
    clock = VirtualClock()
    kube = await new_client(kubeconfig, clock=clock)
    try:
        apiserver.faults.add(
            verb="create", resource="configmaps", status=503, retry_after=1, after_commit=True
        )
        task = asyncio.create_task(kube.create(CONFIG_MAPS, config_map("lost")))
        await _until(lambda: clock.sleepers == 1)  # the retry waits Retry-After on the clock
        assert apiserver.store.get(CONFIG_MAPS, "lost", "default")["metadata"]["name"] == "lost"
        await clock.advance(1.0)
        with pytest.raises(KubeApiError) as caught:
            await asyncio.wait_for(task, 5)
        assert caught.value.already_exists
        assert caught.value.unanswered_attempts == 1
        # A 409 with no lost attempt before it is proof: nothing of ours went unanswered.
        with pytest.raises(KubeApiError) as plain:
            await kube.create(CONFIG_MAPS, config_map("lost"))
        assert (plain.value.already_exists, plain.value.unanswered_attempts) == (True, 0)
    finally:
        await kube.close()


async def test_crd_kinds_scale_and_status_go_through_the_same_path(client: KubeClient) -> None:
    made = await client.create(
        VERTICAL_POD_AUTOSCALERS, builders.vpas.vpa(name="v", target=builders.vpas.target_ref())
    )
    assert made["kind"] == "VerticalPodAutoscaler"
    made["status"] = {"conditions": [{"type": "RecommendationProvided", "status": "True"}]}
    with_status = await client.update_status(VERTICAL_POD_AUTOSCALERS, made)
    assert with_status["status"]["conditions"][0]["type"] == "RecommendationProvided"
    listed = await client.list_all(VERTICAL_POD_AUTOSCALERS)
    assert [i["metadata"]["name"] for i in listed.items] == ["v"]

    await client.create(
        DEPLOYMENTS,
        builders.workloads.deployment(
            name="web",
            replicas=2,
            match_labels={"app": "web"},
            template=builders.workloads.pod_template(
                labels={"app": "web"}, containers=[builders.pods.container(image=PAUSE)]
            ),
        ),
    )
    scale = await client.get_scale(DEPLOYMENTS, "web", namespace="default")
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 2
    await client.scale(DEPLOYMENTS, "web", namespace="default", replicas=5)
    got = await client.get(DEPLOYMENTS, "web", namespace="default")
    assert got["spec"]["replicas"] == 5


async def test_eviction(client: KubeClient) -> None:
    await client.create(PODS, PAUSE_POD(name="p", node_name="n1"))
    await client.evict("p", namespace="default", grace_period_seconds=0)
    with pytest.raises(KubeApiError) as caught:
        await client.get(PODS, "p", namespace="default")
    assert caught.value.not_found
    with pytest.raises(KubeApiError) as missing:
        await client.evict("p", namespace="default")
    assert missing.value.not_found


async def test_transport_errors_are_retried_then_raised() -> None:
    configuration = Configuration(host="http://127.0.0.1:9")  # discard port: refused
    registry = CollectorRegistry()
    kube = KubeClient.from_configuration(
        configuration, settings=FAST_CLIENT, rng=random.Random(0), registry=registry
    )
    try:
        with pytest.raises(KubeTransportError):
            await kube.get(CONFIG_MAPS, "x", namespace="default")
        assert _count(registry, verb="get", resource="configmaps", code="error") == 5
    finally:
        await kube.close()


async def test_in_cluster_connect_uses_service_env_ca_and_token(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    token = apiserver.kubeconfig()["users"][0]["user"]["token"]
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_bytes(apiserver.ca_cert_pem)
    host_port = apiserver.https_url.removeprefix("https://")
    host, port = host_port.rsplit(":", 1)
    kube = await connect(
        kubeconfig=None,
        environ={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port},
        in_cluster_paths=InClusterPaths(token=tmp_path / "token", ca_cert=tmp_path / "ca.crt"),
        settings=ClientSettings(max_attempts=1),
    )
    try:
        listed = await kube.list(CONFIG_MAPS, namespace="default")
        assert listed["kind"] == "ConfigMapList"
    finally:
        await kube.close()


async def test_kubeconfig_context_selection(apiserver: ApiServer, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    apiserver.write_kubeconfig(path)
    context = apiserver.kubeconfig()["contexts"][0]["name"]
    kube = await connect(kubeconfig=path, context=context, settings=FAST_CLIENT)
    try:
        assert (await kube.list(CONFIG_MAPS))["kind"] == "ConfigMapList"
    finally:
        await kube.close()


async def test_in_cluster_token_is_re_read_from_the_file(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    clock = VirtualClock()
    (tmp_path / "token").write_text("first-token")
    (tmp_path / "ca.crt").write_bytes(apiserver.ca_cert_pem)
    host, port = apiserver.https_url.removeprefix("https://").rsplit(":", 1)
    kube = await connect(
        kubeconfig=None,
        clock=clock,
        environ={"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port},
        in_cluster_paths=InClusterPaths(token=tmp_path / "token", ca_cert=tmp_path / "ca.crt"),
        settings=ClientSettings(max_attempts=1),
    )
    try:
        await kube.list(CONFIG_MAPS, namespace="default")
        assert apiserver.tokens[-1] == "first-token"
        (tmp_path / "token").write_text("rotated-token")
        await kube.list(CONFIG_MAPS, namespace="default")
        assert apiserver.tokens[-1] == "first-token"  # cached for a minute
        await clock.advance(60)
        await kube.list(CONFIG_MAPS, namespace="default")
        assert apiserver.tokens[-1] == "rotated-token"
    finally:
        await kube.close()


async def test_an_eviction_refused_by_a_disruption_budget_is_not_retried(
    apiserver: ApiServer, client: KubeClient, registry: CollectorRegistry
) -> None:
    running = apiserver.store.create(
        PAUSE_POD(name="guarded", labels={"app": "db"}, node_name="n1")
    )
    running["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    apiserver.store.update_status(running)
    budget = apiserver.store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        }
    )
    budget["status"] = {
        "observedGeneration": budget["metadata"].get("generation", 1),
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
    }
    apiserver.store.update_status(budget)
    with pytest.raises(KubeApiError) as caught:
        await client.evict("guarded", namespace="default")
    assert caught.value.too_many_requests
    assert "disruption budget" in caught.value.message
    assert _count(registry, verb="create", resource="pods/eviction", code="429") == 1


async def test_a_gated_write_is_checked_again_before_each_retry(
    apiserver: ApiServer, kubeconfig: Path
) -> None:
    """A leader-only write that waits out a 429 must not go out once the gate (the Lease) has
    closed meanwhile; reads through the gated client are never refused."""
    clock = VirtualClock()
    kube = await new_client(kubeconfig, clock=clock, registry=CollectorRegistry())
    leading = True
    gated = kube.gated(lambda: leading)
    try:
        apiserver.faults.add(
            verb="create", resource="configmaps", status=429, retry_after=3, count=1
        )
        task = asyncio.create_task(gated.create(CONFIG_MAPS, config_map("w"), namespace="default"))
        await _until(lambda: clock.sleepers == 1)  # the 429 came back: waiting to retry
        leading = False  # the Lease is lost meanwhile
        await clock.advance(3.0)
        with pytest.raises(NotLeaderError, match="create configmaps refused"):
            await asyncio.wait_for(task, 5)
        assert apiserver.store.peek(CONFIG_MAPS, "w", "default") is None
        assert apiserver.requests.count(verb="create", resource="configmaps") == 1
        apiserver.store.create(config_map("r"))
        assert (await gated.get(CONFIG_MAPS, "r", namespace="default"))["metadata"]["name"] == "r"
        with pytest.raises(NotLeaderError):
            await gated.create(CONFIG_MAPS, config_map("x"), namespace="default")
    finally:
        await kube.close()


@pytest.mark.parametrize("warm", [False, True])
async def test_a_gated_write_is_checked_again_once_it_holds_a_connection(
    apiserver: ApiServer, kubeconfig: Path, warm: bool
) -> None:
    """The gate passed before the attempt, then closed while the request waited for its
    connection (a new one: ``warm=False``; a pooled one: ``warm=True``) — a replica frozen
    there, or queued behind 7 other writes: the write never reaches the API server."""
    kube = await new_client(kubeconfig, registry=CollectorRegistry())
    checks: list[bool] = []

    def gate() -> bool:
        # open at the check before the attempt, closed at the check on the connection
        checks.append(not checks)
        return checks[-1]

    try:
        if warm:
            await kube.list(CONFIG_MAPS, namespace="default")  # a pooled connection to reuse
        with pytest.raises(NotLeaderError, match="create configmaps refused"):
            await kube.gated(gate).create(CONFIG_MAPS, config_map("late"), namespace="default")
        assert checks == [True, False]
        assert apiserver.store.peek(CONFIG_MAPS, "late", "default") is None
        assert apiserver.requests.count(verb="create", resource="configmaps") == 0
        # the client still works (the refused request's connection did not jam the pool)
        for index in range(12):
            await kube.create(CONFIG_MAPS, config_map(f"ok-{index}"), namespace="default")
    finally:
        await kube.close()
