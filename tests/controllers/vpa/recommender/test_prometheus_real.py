"""The Prometheus history bootstrap against a real Prometheus (Debian's ``prometheus`` package).

A day of cAdvisor-style history for three pods is written as OpenMetrics text, turned into TSDB
blocks with ``promtool tsdb create-blocks-from openmetrics`` and served by ``prometheus`` on a
loopback port. The provider loads it with upstream's queries (defaults, except
``--metric-for-pod-labels=up{job="kubernetes-pods"}[8d]``: the default instant selector is
rejected upstream, see :mod:`kubescale.controllers.vpa.recommender.prometheus_history`), and the
recommendation built from that history must equal the one built by feeding the same samples live.

What "the same samples" means. The provider never sees the scraped points: it sees one CPU
and one memory value per container and ``--history-resolution`` step (1h), at the steps
``now - 8d + k·1h``. The memory value is the gauge at the step (the instant selector takes the
latest point at or before it, and a point sits on every step). The CPU value is
``rate(counter[1h])`` at the step, i.e. the counter's increase over the hour *ending* at the step
divided by 3600 — so the test makes each counter grow at a constant rate within each clock hour
(the steps fall on whole hours), and Prometheus' extrapolation has nothing to extrapolate: the
hour window holds 61 points spanning exactly 3600 s (60 points and one 60 s scrape interval on
Prometheus 3's left-open windows). The rate then is that hour's constant rate up to float
rounding (~1e-15 relative); rates are chosen as ``n + 0.5`` millicores so ``CPUAmountFromCores``'
truncation gives ``n`` whatever that rounding. The step at the first scrape has a one-point
window and no rate, so a container has 24 CPU samples (steps 1..24 h after its first scrape)
and 25 memory samples (0..24 h). The test first checks that the provider read exactly those
samples and labels (noise series — the ``POD`` pause container, the pod-level ``name=""``
cgroup, another job — must not match the selector), then feeds them into a second
ClusterState the way the live loop would: time-major (every container's samples of one step,
then the next step) rather than the history loader's pod-major order, so the two paths share
no ordering, and compares the recommendations (and the checkpointed histograms).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.prometheus_history import (
    HistoryLoadResult,
    HistorySample,
    PodHistory,
    PrometheusHistoryProvider,
    load_history,
)
from kubescale.controllers.vpa.recommender.prometheus_history_config import PrometheusHistoryConfig
from kubescale.objects.selectors import label_selector_from_dict
from kubescale.prometheus.client_settings import PrometheusAuth
from tests import builders
from tests.prometheus.prometheus_fixtures import (
    RealPrometheus,
    Series,
    create_blocks,
    prometheus_tools,
    write_openmetrics,
)

NOW = datetime(2026, 1, 2, tzinfo=UTC)
"""The history provider's ``time.Now()``: the range queries end here."""
FIRST_SCRAPE = NOW - timedelta(days=1)
SCRAPE_SECONDS = 60
HOURS = 24
NAMESPACE = "shop"
LABELS_QUERY = 'up{job="kubernetes-pods"}[8d]'


def _unix(moment: datetime) -> int:
    return int(moment.timestamp())


PODS: dict[str, tuple[str, ...]] = {
    "web-1": ("app", "istio-proxy"),
    "web-2": ("app", "istio-proxy"),
    "db-0": ("postgres",),
}
FINAL_LABELS = {
    "web-1": {"app": "web", "version": "v2"},
    "web-2": {"app": "web", "version": "v2"},
    "db-0": {"app": "db"},
}


def _millicores(pod: int, container: int, hour: int) -> int:
    """The whole millicores of the constant rate in hour ``hour`` (the rate is this + 0.5)."""
    return 100 + 37 * pod + 53 * container + ((hour * 17 + pod * 5 + container * 3) % 23) * 7


def _memory_bytes(pod: int, container: int, minute: int) -> int:
    return (
        200_000_000
        + 50_000_000 * container
        + 30_000_000 * pod
        + ((minute * 7919 + pod * 13 + container * 29) % 1000) * 137_000
    )


def _cadvisor_labels(pod: str, container: str, job: str = "kubernetes-cadvisor") -> dict[str, str]:
    return {"job": job, "namespace": NAMESPACE, "pod_name": pod, "name": container}


def _history_series() -> Iterator[Series]:
    minutes = range(HOURS * 60 + 1)
    start = _unix(FIRST_SCRAPE)
    for p, (pod, containers) in enumerate(PODS.items()):
        for c, container in enumerate(containers):
            counter = 5000.0 + 100.0 * p + 10.0 * c
            cpu: list[tuple[int, float]] = []
            for minute in minutes:
                cpu.append((start + minute * SCRAPE_SECONDS, counter))
                counter += SCRAPE_SECONDS * (_millicores(p, c, minute // 60) + 0.5) / 1000.0
            memory = [
                (start + minute * SCRAPE_SECONDS, float(_memory_bytes(p, c, minute)))
                for minute in minutes
            ]
            yield "container_cpu_usage_seconds_total", _cadvisor_labels(pod, container), cpu
            yield "container_memory_working_set_bytes", _cadvisor_labels(pod, container), memory
            if pod == "web-2" and container == "app":  # the same container from another job
                other = _cadvisor_labels(pod, container, job="kubelet")
                yield "container_cpu_usage_seconds_total", other, [(t, v * 3) for t, v in cpu]
                yield "container_memory_working_set_bytes", other, memory
        if pod == "web-1":  # the pause container and the pod-level cgroup: not containers
            for name in ("POD", ""):
                flat = [(start + m * SCRAPE_SECONDS, 1e6 + m) for m in minutes]
                yield "container_cpu_usage_seconds_total", _cadvisor_labels(pod, name), flat
                yield "container_memory_working_set_bytes", _cadvisor_labels(pod, name), flat
    # Pod labels as the kubernetes-pods scrape job relabels them; web-1 was relabelled at noon.
    for pod, labels in FINAL_LABELS.items():
        identity = {"job": "kubernetes-pods", "kubernetes_namespace": NAMESPACE}
        identity["kubernetes_pod_name"] = pod
        pod_labels = {f"pod_label_{key}": value for key, value in labels.items()}
        if pod == "web-1":
            early = {**identity, "pod_label_app": "web", "pod_label_version": "v1"}
            yield "up", early, [(start + m * SCRAPE_SECONDS, 1.0) for m in minutes if m <= 720]
            yield (
                "up",
                identity | pod_labels,
                [(start + m * SCRAPE_SECONDS, 1.0) for m in minutes if m > 720],
            )
        else:
            yield "up", identity | pod_labels, [(start + m * SCRAPE_SECONDS, 1.0) for m in minutes]


def _expected_history() -> dict[tuple[str, str], PodHistory]:
    """What the provider must read back: see the module docstring."""
    history: dict[tuple[str, str], PodHistory] = {}
    for p, (pod, containers) in enumerate(PODS.items()):
        samples: dict[str, list[HistorySample]] = {}
        for c, container in enumerate(containers):
            merged: list[HistorySample] = []
            for step in range(HOURS + 1):
                moment = FIRST_SCRAPE + timedelta(hours=step)
                if step > 0:
                    usage = _millicores(p, c, step - 1)
                    merged.append(HistorySample(measure_start=moment, usage=usage, resource="cpu"))
                memory = _memory_bytes(p, c, step * 60)
                merged.append(HistorySample(measure_start=moment, usage=memory, resource="memory"))
            samples[container] = merged
        history[(NAMESPACE, pod)] = PodHistory(
            last_labels=FINAL_LABELS[pod], last_seen=NOW, samples=samples
        )
    return history


def _cluster_state() -> ClusterState:
    state = ClusterState(config=RecommenderConfig())
    for app in ("web", "db"):
        selector = label_selector_from_dict({"matchLabels": {"app": app}})
        state.add_or_update_vpa(
            builders.vpas.typed_vpa(
                name=app, namespace=NAMESPACE, target=builders.vpas.target_ref(name=app)
            ),
            selector=selector,
        )
    return state


def _feed_live(history: dict[tuple[str, str], PodHistory]) -> ClusterState:
    """The same samples, added as a live loop would: all containers per step, step by step."""
    state = _cluster_state()
    for (namespace, pod), pod_history in sorted(history.items()):
        state.add_or_update_pod(
            namespace=namespace,
            name=pod,
            labels=pod_history.last_labels,
            phase="Running",
            containers={name: {} for name in pod_history.samples},
            now=FIRST_SCRAPE,
        )
    by_time: dict[datetime, list[tuple[str, str, str, HistorySample]]] = {}
    for (namespace, pod), pod_history in history.items():
        for container, samples in pod_history.samples.items():
            for sample in samples:
                by_time.setdefault(sample.measure_start, []).append(
                    (namespace, pod, container, sample)
                )
    for moment in sorted(by_time):
        for namespace, pod, container, sample in sorted(
            by_time[moment], key=lambda item: (item[1], item[2], item[3].resource)
        ):
            accepted = state.add_sample(
                namespace=namespace,
                pod=pod,
                container=container,
                resource=sample.resource,
                usage=sample.usage,
                request=0,
                measure_start=moment,
            )
            assert accepted, (pod, container, sample)
    return state


@pytest.fixture
def tools() -> tuple[str, str]:
    found = prometheus_tools()
    if isinstance(found, str):
        pytest.skip(found)
    return found


async def test_history_from_real_prometheus_matches_live_feed(
    tools: tuple[str, str], tmp_path: Path
) -> None:
    prometheus, promtool = tools
    openmetrics = tmp_path / "history.om"
    write_openmetrics(openmetrics, _history_series())
    tsdb = tmp_path / "tsdb"
    async with asyncio.timeout(40):
        await create_blocks(promtool, openmetrics, tsdb)
        async with RealPrometheus(binary=prometheus, tsdb=tsdb, workdir=tmp_path) as server:
            config = PrometheusHistoryConfig(address=server.address, pod_labels_metric=LABELS_QUERY)
            async with PrometheusHistoryProvider(config, auth=PrometheusAuth()) as provider:
                history = await provider.get_cluster_history(now=NOW)
                from_history = _cluster_state()
                loaded = await load_history(provider, from_history, now=NOW)

    expected = _expected_history()
    assert sorted(history) == sorted(expected)
    for key, pod_history in expected.items():
        assert history[key] == pod_history, key
    assert loaded == HistoryLoadResult(pods=3, containers=5, samples_added=5 * (24 + 25))

    live = _feed_live(expected)
    for vpa in ("web", "db"):
        from_prometheus = from_history.recommendation(namespace=NAMESPACE, name=vpa, now=NOW)
        from_live = live.recommendation(namespace=NAMESPACE, name=vpa, now=NOW)
        assert from_prometheus.container_recommendations == from_live.container_recommendations
        assert from_prometheus.pod_count == from_live.pod_count == (2 if vpa == "web" else 1)
        assert from_history.checkpoints(namespace=NAMESPACE, name=vpa, now=NOW) == (
            live.checkpoints(namespace=NAMESPACE, name=vpa, now=NOW)
        )
    web = from_history.recommendation(namespace=NAMESPACE, name="web", now=NOW)
    targets = {r["containerName"]: r["target"] for r in web.container_recommendations}
    assert sorted(targets) == ["app", "istio-proxy"]
    # Well above the pod minimums (25m / 250Mi split over two containers): history decided it.
    assert all(
        target["cpu"].endswith("m") and int(target["cpu"][:-1]) > 150 for target in targets.values()
    )
