"""The Prometheus history provider against a small aiohttp Prometheus: what it sends, how it
reads the answers, authentication, deadlines and failures.

Expected PromQL strings and request parameters are upstream's (``history_provider.go``,
``history_provider_test.go``; client_golang ``QueryRange``/``Query``/``DoGetFallback``).
"""

from __future__ import annotations

import asyncio
import base64
import math
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubescale.base.clock import Clock, VirtualClock
from kubescale.certs.authority import generate_ca, issue_serving_certificate
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.prometheus_history import (
    HistoryLoadResult,
    HistorySample,
    PodHistory,
    PrometheusHistoryError,
    PrometheusHistoryProvider,
    load_history,
    resource_amount_from_value,
)
from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    PrometheusHistoryConfig,
    bearer_token_from_flags,
    history_queries,
    read_bearer_token_file,
    resolve_auth,
)
from kubescale.objects.selectors import label_selector_from_dict
from kubescale.prometheus.client_settings import PrometheusAuth
from kubescale.prometheus.query_api import PrometheusClientMetrics
from tests import builders
from tests.prometheus.prometheus_fixtures import FakePrometheus, matrix, success

NOW = datetime(2026, 3, 10, 12, 0, 0, tzinfo=UTC)
NOW_TEXT = "1773144000"
GUARD = 120.0
"""Seconds before a hung query fails a test (only a broken run gets there): a hang guard."""
DEFAULT_CPU = (
    'rate(container_cpu_usage_seconds_total{job="kubernetes-cadvisor", pod_name=~".+", '
    'name!="POD", name!=""}[1h])'
)
DEFAULT_MEMORY = (
    'container_memory_working_set_bytes{job="kubernetes-cadvisor", pod_name=~".+", '
    'name!="POD", name!=""}'
)
LABELS_RANGE = 'up{job="kubernetes-pods"}[8d]'
CTR = {"namespace": "default", "pod_name": "pod", "name": "container"}


@pytest.fixture
async def fake() -> AsyncIterator[FakePrometheus]:
    server = FakePrometheus()
    await server.start()
    yield server
    await server.stop()


def _provider(
    fake: FakePrometheus,
    config: PrometheusHistoryConfig | None = None,
    *,
    auth: PrometheusAuth | None = None,
    metrics: PrometheusClientMetrics | None = None,
    clock: Clock | None = None,
) -> PrometheusHistoryProvider:
    """A provider for ``config`` whose address points at the fake (path and query kept)."""
    base = config or PrometheusHistoryConfig(pod_labels_metric=LABELS_RANGE)
    suffix = base.address.removeprefix(PrometheusHistoryConfig().address)
    return PrometheusHistoryProvider(
        replace(base, address=fake.address + suffix),
        auth=auth or PrometheusAuth(),
        metrics=metrics,
        clock=clock,
    )


# --- PromQL and request parameters ------------------------------------------------------------


def test_upstream_defaults() -> None:
    config = PrometheusHistoryConfig()
    assert (config.address, config.cadvisor_job_name, config.history_length) == (
        "http://prometheus.monitoring.svc",
        "kubernetes-cadvisor",
        "8d",
    )
    assert (config.history_resolution, config.query_timeout) == ("1h", timedelta(minutes=5))
    assert (config.pod_label_prefix, config.pod_labels_metric) == (
        "pod_label_",
        'up{job="kubernetes-pods"}',
    )
    assert (config.pod_namespace_label, config.pod_name_label) == (
        "kubernetes_namespace",
        "kubernetes_pod_name",
    )
    assert (
        config.container_namespace_label,
        config.container_pod_name_label,
        config.container_name_label,
    ) == ("namespace", "pod_name", "name")
    assert (config.cpu_metric, config.memory_metric) == (
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
    )


QUERY_CASES = [
    pytest.param(PrometheusHistoryConfig(), DEFAULT_CPU, DEFAULT_MEMORY, id="defaults"),
    pytest.param(
        # history_provider_test.go: HistoryResolution "30s" and Namespace "kube-system".
        PrometheusHistoryConfig(history_resolution="30s", namespace="kube-system"),
        'rate(container_cpu_usage_seconds_total{job="kubernetes-cadvisor", pod_name=~".+", '
        'name!="POD", name!="", namespace="kube-system"}[30s])',
        'container_memory_working_set_bytes{job="kubernetes-cadvisor", pod_name=~".+", '
        'name!="POD", name!="", namespace="kube-system"}',
        id="namespaced-30s",
    ),
    pytest.param(
        PrometheusHistoryConfig(cadvisor_job_name=""),
        'rate(container_cpu_usage_seconds_total{pod_name=~".+", name!="POD", name!=""}[1h])',
        'container_memory_working_set_bytes{pod_name=~".+", name!="POD", name!=""}',
        id="no-job",
    ),
    pytest.param(
        PrometheusHistoryConfig(
            cadvisor_job_name="cadvisor",
            container_namespace_label="ns",
            container_pod_name_label="pod",
            container_name_label="container",
            cpu_metric="ctr_cpu_seconds_total",
            memory_metric="ctr_memory_rss",
            history_resolution="5m",
            namespace="apps",
        ),
        'rate(ctr_cpu_seconds_total{job="cadvisor", pod=~".+", container!="POD", '
        'container!="", ns="apps"}[5m])',
        'ctr_memory_rss{job="cadvisor", pod=~".+", container!="POD", container!="", ns="apps"}',
        id="custom-labels-and-metrics",
    ),
]


@pytest.mark.parametrize(("config", "cpu", "memory"), QUERY_CASES)
def test_promql(config: PrometheusHistoryConfig, cpu: str, memory: str) -> None:
    queries = history_queries(config)
    assert (queries.cpu, queries.memory, queries.pod_labels) == (
        cpu,
        memory,
        config.pod_labels_metric,
    )


REQUEST_CASES = [
    # (history length, resolution, start, step)
    pytest.param("8d", "1h", "1772452800", "3600", id="defaults"),
    pytest.param("1w2d", "30s", "1772366400", "30", id="weeks-days-30s"),
    pytest.param("1h30m", "1500ms", "1773138600", "1.5", id="minutes-and-fraction"),
    pytest.param("1y", "1d", "1741608000", "86400", id="year"),
]


@pytest.mark.parametrize(("length", "resolution", "start", "step"), REQUEST_CASES)
async def test_range_and_instant_requests(
    fake: FakePrometheus, length: str, resolution: str, start: str, step: str
) -> None:
    config = PrometheusHistoryConfig(
        history_length=length, history_resolution=resolution, pod_labels_metric=LABELS_RANGE
    )
    provider = _provider(fake, config)
    async with provider:
        assert await provider.get_cluster_history(now=NOW) == {}
    queries = history_queries(config)
    cpu, memory, labels = fake.requests
    for request, query in ((cpu, queries.cpu), (memory, queries.memory)):
        assert (request.method, request.path) == ("POST", "/api/v1/query_range")
        assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
        assert request.form == {
            "query": [query],
            "start": [start],
            "end": [NOW_TEXT],
            "step": [step],
        }
        assert request.url_query == {}
        assert "Authorization" not in request.headers
    assert (labels.method, labels.path) == ("POST", "/api/v1/query")
    assert labels.form == {"query": [LABELS_RANGE], "time": [NOW_TEXT]}


async def test_form_is_go_url_values_encode(fake: FakePrometheus) -> None:
    """Keys sorted, QueryEscape (space → '+'); the address' query string rides along."""
    config = PrometheusHistoryConfig(address="http://prometheus.monitoring.svc/prom/?tenant=a b")
    async with _provider(fake, config) as provider:
        await provider.get_cluster_history(now=NOW + timedelta(microseconds=250_000))
    first = fake.requests[0]
    assert first.path == "/prom/api/v1/query_range"
    assert first.url_query == {"tenant": ["a b"]}
    assert first.form["tenant"] == ["a b"]
    assert (first.form["end"], first.form["start"]) == (["1773144000.25"], ["1772452800.25"])


@pytest.mark.parametrize("status", [405, 501])
async def test_get_fallback(fake: FakePrometheus, status: int) -> None:
    fake.post_status = status
    fake.answer(DEFAULT_CPU, matrix((CTR, [(1, "0.5")])))
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    assert [r.method for r in fake.requests] == ["POST", "GET", "POST", "GET", "POST", "GET"]
    get = fake.requests[1]
    assert get.path == "/api/v1/query_range"
    assert get.params["query"] == DEFAULT_CPU
    assert get.params["step"] == "3600"
    assert history[("default", "pod")].samples["container"][0].usage == 500


# --- parsing the matrix -----------------------------------------------------------------------


def _at(seconds: float) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)


async def test_cpu_samples(fake: FakePrometheus) -> None:
    """history_provider_test.go TestGetCPUSamples: 5.5 cores at t=1 → 5500 millicores."""
    fake.answer(DEFAULT_CPU, matrix((CTR, [(1, "5.5")])))
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    assert history == {
        ("default", "pod"): PodHistory(
            samples={"container": [HistorySample(measure_start=_at(1), usage=5500, resource="cpu")]}
        )
    }


async def test_memory_samples(fake: FakePrometheus) -> None:
    """history_provider_test.go TestGetMemorySamples: 12345 bytes at t=1."""
    fake.answer(DEFAULT_MEMORY, matrix(({**CTR, "__name__": "x"}, [(1, "12345")])))
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    assert history == {
        ("default", "pod"): PodHistory(
            samples={
                "container": [HistorySample(measure_start=_at(1), usage=12345, resource="memory")]
            }
        )
    }


async def test_samples_merged_and_sorted_per_container(fake: FakePrometheus) -> None:
    other = {**CTR, "pod_name": "other"}
    fake.answer(
        DEFAULT_CPU,
        matrix(
            (CTR, [(20, "0.25"), (40, "0.5")]),
            ({**CTR, "cpu": "total"}, [(10, "0.125")]),  # a second series of the same container
            (other, [(5, "1")]),
        ),
    )
    fake.answer(DEFAULT_MEMORY, matrix((CTR, [(20, "100"), (30, "200")])))
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    samples = history[("default", "pod")].samples["container"]
    assert [(s.measure_start, s.resource, s.usage) for s in samples] == [
        (_at(10), "cpu", 125),
        (_at(20), "cpu", 250),  # a CPU sample stays before the memory sample of its step
        (_at(20), "memory", 100),
        (_at(30), "memory", 200),
        (_at(40), "cpu", 500),
    ]
    assert history[("default", "other")].samples["container"][0].usage == 1000


VALUE_CASES = [
    # (resource, Prometheus value text, ResourceAmount) — resourceAmountFromFloat
    ("cpu", "0.2505", 250),  # cores × 1000, truncated
    ("cpu", "0.0009999", 0),
    ("cpu", "-1", 0),  # negative → 0
    ("cpu", "1e12", 10**14),  # above MaxResourceAmount → clamped
    ("cpu", "+Inf", 10**14),
    ("cpu", "-Inf", 0),
    ("cpu", "NaN", -(2**63)),  # Go int64(NaN) on amd64; the model rejects the sample
    ("memory", "123456789.9", 123456789),
    ("memory", "1e14", 10**14),
    ("memory", "100000000000000.5", 10**14),
    ("memory", "0x1p10", 1024),  # strconv.ParseFloat reads hex floats too
]


@pytest.mark.parametrize(("resource", "text", "amount"), VALUE_CASES)
async def test_values_become_resource_amounts(
    fake: FakePrometheus, resource: str, text: str, amount: int
) -> None:
    fake.answer(DEFAULT_CPU if resource == "cpu" else DEFAULT_MEMORY, matrix((CTR, [(1, text)])))
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    assert history[("default", "pod")].samples["container"][0].usage == amount


def test_resource_amount_truncates_like_go() -> None:
    assert resource_amount_from_value(0.1234567, "cpu") == 123
    assert resource_amount_from_value(math.nextafter(0.25, 0.0), "cpu") == 249
    assert resource_amount_from_value(99999999999999.99, "memory") == 99999999999999


async def test_timestamps_are_model_time_milliseconds(fake: FakePrometheus) -> None:
    body = (
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
        b'{"namespace":"default","pod_name":"pod","name":"container"},"values":'
        b'[[1435781451.781,"1"],[1435781452.7819,"2"],[1435781453.5,"3"],[1435781454,"4"]]}]}}'
    )
    fake.answer(DEFAULT_MEMORY, body)
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    stamps = [s.measure_start for s in history[("default", "pod")].samples["container"]]
    millis = [int((t - _at(0)) / timedelta(milliseconds=1)) for t in stamps]
    assert millis == [1435781451781, 1435781452781, 1435781453500, 1435781454000]


async def test_pod_labels(fake: FakePrometheus) -> None:
    """history_provider_test.go TestGetLabels: the series seen last wins, prefix stripped."""
    pod = {"kubernetes_namespace": "default", "kubernetes_pod_name": "pod"}
    fake.answer(
        LABELS_RANGE,
        matrix(
            ({**pod, "pod_label_x": "y", "job": "kubernetes-pods"}, [(1, "1"), (10, "1")]),
            ({**pod, "pod_label_x": "z", "pod_label_app": "web"}, [(5, "1"), (20, "1")]),
            ({**pod, "pod_label_x": "late-tie"}, [(20, "1")]),  # not strictly after: ignored
        ),
    )
    async with _provider(fake) as provider:
        history = await provider.get_cluster_history(now=NOW)
    assert history == {
        ("default", "pod"): PodHistory(last_labels={"x": "z", "app": "web"}, last_seen=_at(20))
    }


async def test_pod_labels_join_usage(fake: FakePrometheus) -> None:
    fake.answer(DEFAULT_CPU, matrix((CTR, [(1, "0.1")])))
    fake.answer(
        "kube_pod_labels[8d]",
        matrix(({"namespace": "default", "pod": "pod", "label_app": "db"}, [(3, "1")])),
    )
    config = PrometheusHistoryConfig(
        pod_labels_metric="kube_pod_labels[8d]",
        pod_namespace_label="namespace",
        pod_name_label="pod",
        pod_label_prefix="label_",
    )
    async with _provider(fake, config) as provider:
        history = await provider.get_cluster_history(now=NOW)
    pod = history[("default", "pod")]
    assert (pod.last_labels, pod.last_seen) == ({"app": "db"}, _at(3))
    assert pod.samples["container"] == [
        HistorySample(measure_start=_at(1), usage=100, resource="cpu")
    ]


# --- authentication ---------------------------------------------------------------------------


ENV_CREDENTIALS = {"PROMETHEUS_USERNAME": "eu", "PROMETHEUS_PASSWORD": "ep"}
AUTH_CASES = [
    # (bearer, username, password, environment, Authorization header)
    pytest.param(("tok", "u", "p", {}, "Bearer tok"), id="bearer-wins"),
    pytest.param(("", "u", "p", {}, "Basic " + base64.b64encode(b"u:p").decode()), id="basic"),
    pytest.param(("", "u", "", {}, None), id="username-without-password"),
    pytest.param(
        ("", "", "", ENV_CREDENTIALS, "Basic " + base64.b64encode(b"eu:ep").decode()),
        id="environment",
    ),
    pytest.param(
        ("", "u", "p", ENV_CREDENTIALS, "Basic " + base64.b64encode(b"u:p").decode()),
        id="flags-before-environment",
    ),
    pytest.param(("", "", "", {"PROMETHEUS_USERNAME": "eu"}, None), id="environment-half"),
    pytest.param(("", "", "", {}, None), id="none"),
]


@pytest.mark.parametrize("case", AUTH_CASES)
async def test_authorization_header(
    fake: FakePrometheus, case: tuple[str, str, str, dict[str, str], str | None]
) -> None:
    bearer, username, password, environ, header = case
    config = PrometheusHistoryConfig(
        bearer_token=bearer, username=username, password=password, pod_labels_metric=LABELS_RANGE
    )
    async with _provider(fake, config, auth=resolve_auth(config, environ=environ)) as provider:
        await provider.get_cluster_history(now=NOW)
    assert len(fake.requests) == 3
    assert {r.headers.get("Authorization") for r in fake.requests} == {header}


def test_bearer_token_file_is_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("  s3cr3t-token\n\n", encoding="utf-8")
    assert read_bearer_token_file(path) == "s3cr3t-token"
    # ValidateRecommenderConfig: the file's token replaces --prometheus-bearer-token.
    assert bearer_token_from_flags(token="flag", token_file=str(path), username="") == (
        "s3cr3t-token"
    )
    assert bearer_token_from_flags(token="flag", token_file="", username="u") == "flag"
    with pytest.raises(ValueError, match="are mutually exclusive and can't be set together"):
        bearer_token_from_flags(token="flag", token_file=str(path), username="u")
    with pytest.raises(FileNotFoundError):
        bearer_token_from_flags(token="", token_file=str(tmp_path / "missing"), username="")


async def test_insecure_skips_tls_verification(tmp_path: Path) -> None:
    """--prometheus-insecure: a certificate from an unknown CA is accepted only with it."""
    now = datetime.now(UTC)  # the certificate's validity is checked against the real clock
    ca = generate_ca(common_name="prometheus-test-ca", now=now, days=1, key_type="ecdsa")
    serving = issue_serving_certificate(
        ca=ca, names=["127.0.0.1"], now=now, days=1, key_type="ecdsa"
    )
    (tmp_path / "cert.pem").write_bytes(serving.cert_pem)
    (tmp_path / "key.pem").write_bytes(serving.key_pem)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = FakePrometheus()
    address = await server.start(tls=tls)
    try:
        server.answer(DEFAULT_CPU, matrix((CTR, [(1, "0.25")])))
        verified = PrometheusHistoryConfig(address=address, pod_labels_metric=LABELS_RANGE)
        async with PrometheusHistoryProvider(verified, auth=PrometheusAuth()) as provider:
            with pytest.raises(PrometheusHistoryError) as caught:
                await provider.get_cluster_history(now=NOW)
        assert str(caught.value) == (
            "cannot get usage history: cannot get timeseries for cpu: "
            f'Post "{address}/api/v1/query_range": '
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        )
        assert server.requests == []
        insecure = replace(verified, insecure=True)
        async with PrometheusHistoryProvider(insecure, auth=PrometheusAuth()) as provider:
            history = await provider.get_cluster_history(now=NOW)
        assert history[("default", "pod")].samples["container"][0].usage == 250
    finally:
        await server.stop()


# --- deadlines and failures -------------------------------------------------------------------


async def test_query_timeout(fake: FakePrometheus) -> None:
    # The answer would come after 600 s (cut short at teardown): only the 100 ms query timeout
    # can end the query, so the error proves it — no elapsed time asserted (issue 32.7).
    fake.answer(DEFAULT_CPU, matrix(), delay=600.0)
    config = PrometheusHistoryConfig(query_timeout=timedelta(milliseconds=100))
    address = fake.address
    async with _provider(fake, config) as provider:
        with pytest.raises(PrometheusHistoryError) as caught:
            await provider.get_cluster_history(now=NOW)
    assert str(caught.value) == (
        "cannot get usage history: cannot get timeseries for cpu: "
        f'Post "{address}/api/v1/query_range": context deadline exceeded'
    )


async def test_zero_query_timeout_is_already_past(fake: FakePrometheus) -> None:
    config = PrometheusHistoryConfig(query_timeout=timedelta(0))
    async with _provider(fake, config) as provider:
        with pytest.raises(PrometheusHistoryError) as caught:
            await provider.get_cluster_history(now=NOW)
    assert str(caught.value) == (
        "cannot get usage history: cannot get timeseries for cpu: "
        f'Post "{fake.address}/api/v1/query_range": context deadline exceeded'
    )
    assert fake.requests == []


async def test_timeout_during_get_fallback_names_the_get(fake: FakePrometheus) -> None:
    fake.post_status = 405
    fake.answer(DEFAULT_CPU, matrix(), delay=2.0)
    config = PrometheusHistoryConfig(query_timeout=timedelta(milliseconds=200))
    async with _provider(fake, config) as provider:
        with pytest.raises(PrometheusHistoryError) as caught:
            await provider.get_cluster_history(now=NOW)
    message = str(caught.value)
    prefix = "cannot get usage history: cannot get timeseries for cpu: "
    assert message.startswith(f'{prefix}Get "{fake.address}/api/v1/query_range?end={NOW_TEXT}&')
    assert message.endswith('": context deadline exceeded')


async def test_each_query_has_its_own_deadline(fake: FakePrometheus) -> None:
    # Upstream: each QueryRange runs under its own context.WithTimeout(queryTimeout). Every
    # query is answered 0.3 s (virtual) after it arrives: 0.3 < 0.4 each, but the three take
    # 3 * 0.3 = 0.9 s > 0.4 s, which one deadline for all of them would have cut.
    clock = VirtualClock()

    async def slow(query: str) -> None:
        await clock.advance(0.3)

    fake.on_query = slow
    config = PrometheusHistoryConfig(
        query_timeout=timedelta(milliseconds=400), pod_labels_metric=LABELS_RANGE
    )
    async with _provider(fake, config, clock=clock) as provider:
        assert await provider.get_cluster_history(now=NOW) == {}
    assert len(fake.requests) == 3
    assert clock.elapsed == pytest.approx(0.9)


async def test_query_deadline_is_measured_on_the_injected_clock(fake: FakePrometheus) -> None:
    # The default --prometheus-query-timeout (5m) passes on the virtual clock while the query
    # is held (never answered): the call ends with the deadline's error at once. Measured on
    # asyncio's clock instead, it waited five real minutes (the hang guard failed the test).
    clock = VirtualClock()

    async def held(query: str) -> None:
        await clock.advance(300)
        await fake.closed()

    fake.on_query = held
    async with (
        asyncio.timeout(GUARD),
        _provider(fake, PrometheusHistoryConfig(), clock=clock) as provider,
    ):
        with pytest.raises(PrometheusHistoryError) as caught:
            await provider.get_cluster_history(now=NOW)
    assert str(caught.value) == (
        "cannot get usage history: cannot get timeseries for cpu: "
        f'Post "{fake.address}/api/v1/query_range": context deadline exceeded'
    )


FAILURE_CASES = [
    pytest.param(
        DEFAULT_CPU,
        503,
        b"unavailable",
        "cannot get usage history: cannot get timeseries for cpu: server_error: server error: 503",
        id="server-error",
    ),
    pytest.param(
        DEFAULT_MEMORY,
        404,
        b"",
        "cannot get usage history: cannot get timeseries for memory: "
        "client_error: client error: 404",
        id="client-error",
    ),
    pytest.param(
        DEFAULT_CPU,
        422,
        b'{"status":"error","errorType":"execution","error":"query timed out"}',
        "cannot get usage history: cannot get timeseries for cpu: execution: query timed out",
        id="api-error",
    ),
    pytest.param(
        DEFAULT_CPU,
        400,
        b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
        "cannot get usage history: cannot get timeseries for cpu: "
        "bad_response: inconsistent body for response code",
        id="inconsistent",
    ),
    pytest.param(
        DEFAULT_CPU,
        200,
        success({"resultType": "vector", "result": []}),
        "cannot get usage history: expected query to return a matrix; got result type model.Vector",
        id="vector",
    ),
    pytest.param(
        DEFAULT_CPU,
        200,
        success({"resultType": "scalar", "result": [1, "2"]}),
        "cannot get usage history: expected query to return a matrix; "
        "got result type *model.Scalar",
        id="scalar",
    ),
    pytest.param(
        DEFAULT_CPU,
        200,
        success({"resultType": "histogram", "result": []}),
        "cannot get usage history: cannot get timeseries for cpu: "
        'unexpected value type "histogram"',
        id="unknown-type",
    ),
    pytest.param(
        DEFAULT_CPU,
        200,
        matrix(({"namespace": "default", "name": "c", "__name__": "m"}, [(1, "1")])),
        'cannot get usage history: cannot get container ID from labels: m{name="c", '
        'namespace="default"}',
        id="missing-pod-label",
    ),
    pytest.param(
        LABELS_RANGE,
        200,
        success({"resultType": "vector", "result": []}),
        "cannot read last labels: expected query to return a matrix; got result type model.Vector",
        id="labels-vector",
    ),
    pytest.param(
        LABELS_RANGE,
        200,
        matrix(({"kubernetes_pod_name": "p"}, [(1, "1")])),
        'cannot read last labels: cannot get container ID from labels {kubernetes_pod_name="p"}: '
        "no kubernetes_namespace label",
        id="labels-missing-namespace",
    ),
    pytest.param(
        LABELS_RANGE,
        500,
        b"",
        "cannot read last labels: cannot get timeseries for labels: "
        "server_error: server error: 500",
        id="labels-server-error",
    ),
]


@pytest.mark.parametrize(("query", "status", "body", "message"), FAILURE_CASES)
async def test_failures(
    fake: FakePrometheus, query: str, status: int, body: bytes, message: str
) -> None:
    fake.answer(query, body, status=status)
    async with _provider(fake) as provider:
        with pytest.raises(PrometheusHistoryError) as caught:
            await provider.get_cluster_history(now=NOW)
    assert str(caught.value) == message


async def test_default_labels_metric_is_an_instant_vector_and_fails_as_upstream(
    fake: FakePrometheus,
) -> None:
    """``up{job="kubernetes-pods"}`` (the flag's default) is an instant vector: upstream's
    ``readLastLabels`` rejects it and the whole history fails."""
    fake.answer('up{job="kubernetes-pods"}', success({"resultType": "vector", "result": []}))
    fake.answer(DEFAULT_CPU, matrix((CTR, [(1, "1")])))
    async with _provider(fake, PrometheusHistoryConfig()) as provider:
        with pytest.raises(PrometheusHistoryError, match=r"got result type model\.Vector$"):
            await provider.get_cluster_history(now=NOW)


async def test_bad_json(fake: FakePrometheus) -> None:
    fake.answer(DEFAULT_CPU, b"<html>not json</html>")
    async with _provider(fake) as provider:
        with pytest.raises(PrometheusHistoryError, match=r"for cpu: bad_response: "):
            await provider.get_cluster_history(now=NOW)


async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = PrometheusHistoryConfig(address=f"http://127.0.0.1:{port}")
    async with PrometheusHistoryProvider(config, auth=PrometheusAuth()) as provider:
        with pytest.raises(PrometheusHistoryError) as caught:
            await provider.get_cluster_history(now=NOW)
    assert str(caught.value) == (
        "cannot get usage history: cannot get timeseries for cpu: "
        f'Post "http://127.0.0.1:{port}/api/v1/query_range": '
        f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "history_length",
            "8 days",
            "history length 8 days is not a valid Prometheus duration: "
            'not a valid duration string: "8 days"',
        ),
        (
            "history_resolution",
            "",
            "history resolution  is not a valid Prometheus duration: empty duration string",
        ),
        (
            "history_resolution",
            "1.5h",
            "history resolution 1.5h is not a valid Prometheus "
            'duration: not a valid duration string: "1.5h"',
        ),
    ],
)
def test_invalid_durations(field: str, value: str, message: str) -> None:
    config = (
        PrometheusHistoryConfig(history_length=value)
        if field == "history_length"
        else PrometheusHistoryConfig(history_resolution=value)
    )
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.") + "$"):
        PrometheusHistoryProvider(config, auth=PrometheusAuth())


async def test_request_metrics(fake: FakePrometheus) -> None:
    registry = CollectorRegistry()
    fake.post_status = 405
    async with _provider(fake, metrics=PrometheusClientMetrics(registry)) as provider:
        await provider.get_cluster_history(now=NOW)
    count = "vpa_recommender_prometheus_client_api_requests_count"
    duration = "vpa_recommender_prometheus_client_api_requests_duration_seconds_count"
    assert registry.get_sample_value(count, {"code": "405", "method": "post"}) == 3
    assert registry.get_sample_value(count, {"code": "200", "method": "get"}) == 3
    assert registry.get_sample_value(duration, {"code": "200", "method": "get"}) == 3
    exposition = generate_latest(registry).decode()
    assert 'vpa_recommender_prometheus_client_api_requests_count{code="405",method="post"} 3.0' in (
        exposition
    )


# --- loading into the model -------------------------------------------------------------------


WEB_POD = {"kubernetes_namespace": "default", "kubernetes_pod_name": "web-1"}
WEB_CTR = {"namespace": "default", "pod_name": "web-1", "name": "app"}


async def test_load_history_feeds_the_cluster_state(fake: FakePrometheus) -> None:
    hour = 3600
    start = int((NOW - _at(0)).total_seconds()) - 24 * hour
    fake.answer(
        DEFAULT_CPU,
        matrix(
            (WEB_CTR, [(start + k * hour, "1") for k in range(1, 25)]),
            ({**WEB_CTR, "cpu": "total"}, [(start + hour, "2")]),  # same step again: dropped
            ({**WEB_CTR, "name": "nan"}, [(start + hour, "NaN")]),  # int64(NaN) < 0: dropped
        ),
    )
    fake.answer(DEFAULT_MEMORY, matrix((WEB_CTR, [(start + k * hour, "1e9") for k in range(25)])))
    fake.answer(
        LABELS_RANGE,
        matrix(
            ({**WEB_POD, "pod_label_app": "web"}, [(start + 24 * hour, "1")]),
            (
                {
                    "kubernetes_namespace": "default",
                    "kubernetes_pod_name": "gone",
                    "pod_label_app": "web",
                },
                [(start, "1")],
            ),
        ),
    )
    state = ClusterState(config=RecommenderConfig())
    state.add_or_update_vpa(
        builders.vpas.typed_vpa(name="web", target=builders.vpas.target_ref(name="web")),
        selector=label_selector_from_dict({"matchLabels": {"app": "web"}}),
    )
    async with _provider(fake) as provider:
        result = await load_history(provider, state, now=NOW)
    assert result == HistoryLoadResult(
        pods=2, containers=2, samples_added=24 + 25, samples_rejected=2
    )
    assert state.pod_keys() == [("default", "gone"), ("default", "web-1")]
    assert state.vpa_pod_count(namespace="default", name="web") == 2
    recommendation = state.recommendation(namespace="default", name="web", now=NOW)
    by_name = {r["containerName"]: r for r in recommendation.container_recommendations}
    # A day of 1.0 core and 1e9 bytes: reference §2.4's worked example targets.
    assert by_name["app"]["target"] == {"cpu": "1168m", "memory": "1168723596"}


async def test_load_history_failure_loads_nothing(fake: FakePrometheus) -> None:
    fake.answer(DEFAULT_CPU, matrix((CTR, [(1, "1")])))
    fake.answer(DEFAULT_MEMORY, b"", status=503)
    state = ClusterState(config=RecommenderConfig())
    async with _provider(fake) as provider:
        result = await load_history(provider, state, now=NOW)
    assert result == HistoryLoadResult(
        error="cannot get usage history: cannot get timeseries for memory: "
        "server_error: server error: 503"
    )
    assert state.pod_keys() == []
    assert state.aggregate_count() == 0


async def test_load_history_labels_only_pod(fake: FakePrometheus) -> None:
    fake.answer(LABELS_RANGE, matrix(({**WEB_POD, "pod_label_app": "web"}, [(1, "1")])))
    state = ClusterState(config=RecommenderConfig())
    async with _provider(fake) as provider:
        result = await load_history(provider, state, now=NOW)
    assert result == HistoryLoadResult(pods=1)
    assert state.pod_keys() == [("default", "web-1")]
    assert state.aggregate_count() == 0
