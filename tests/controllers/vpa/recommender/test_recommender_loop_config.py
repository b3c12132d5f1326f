"""The recommender's flags in ``kubescale serve``: upstream names and defaults (reference §2.1),
what they become, the errors, and when ``serve`` runs the recommender at all."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from kubescale.cli.main import build_parser
from kubescale.cli.serve import default_components
from kubescale.cli.serve_config import ConfigError, ServeConfig, serve_config_from_args
from kubescale.components import by_name
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.prometheus_history_config import PrometheusHistoryConfig
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.objects.quantities import Quantity
from kubescale.sim.scenario.scenario_components import scenario_flags
from tests.conftest import component_names

HOUR_NS = 3600 * 10**9
NEED_A_POLICY = ("descheduler", "scheduler-extender", "cluster-autoscaler")
"""Off under ``auto`` until configured: the descheduler and its extender until a policy is given
(``--policy-config-file``), the cluster autoscaler until ``--cloud-provider`` (or
``--node-group-auto-discovery``) is."""
POLICY = (
    "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: default\n"
    "  plugins: {deschedule: {enabled: [RemovePodsViolatingNodeTaints]}}\n"
)


def auto_on(*off: str) -> list[str]:
    """The components ``auto`` runs in a cluster without a descheduler policy, minus ``off``."""
    return [n for n in component_names() if n not in NEED_A_POLICY + off]


def config(*flags: str) -> ServeConfig:
    return serve_config_from_args(build_parser().parse_args(["serve", *flags]))


def test_defaults_are_upstreams() -> None:
    settings = config().components["vpa-recommender"]
    assert settings == RecommenderSettings(
        mode="auto",
        recommender_name="default",
        interval=60.0,
        checkpoints_gc_interval=600.0,
        checkpoints_timeout=60.0,
        storage="",
        model=RecommenderConfig(),
        prometheus=PrometheusHistoryConfig(),
    )
    assert settings.use_checkpoints
    model = settings.model
    assert (model.target_cpu_percentile, model.recommendation_lower_bound_cpu_percentile) == (
        0.9,
        0.5,
    )
    assert model.recommendation_upper_bound_memory_percentile == 0.95
    assert (
        model.pod_recommendation_min_cpu_millicores,
        model.pod_recommendation_min_memory_mb,
    ) == (
        25.0,
        250.0,
    )
    assert model.confidence_interval_cpu_ns == 24 * HOUR_NS
    assert model.memory_aggregation_interval_count == 8
    assert (model.oom_bump_up_ratio, model.oom_min_bump_up_bytes) == (1.2, 104857600.0)


def test_every_model_flag_reaches_the_model() -> None:
    settings = config(
        "--recommender-name=custom",
        "--recommender-interval=30s",
        "--checkpoints-gc-interval=5m",
        "--checkpoints-timeout=20s",
        "--memory-saver",
        "--recommendation-margin-fraction=0.2",
        "--pod-recommendation-min-cpu-millicores=50",
        "--pod-recommendation-min-memory-mb=100",
        "--target-cpu-percentile=0.95",
        "--recommendation-lower-bound-cpu-percentile=0.4",
        "--recommendation-upper-bound-cpu-percentile=0.99",
        "--target-memory-percentile=0.8",
        "--recommendation-lower-bound-memory-percentile=0.3",
        "--recommendation-upper-bound-memory-percentile=0.9",
        "--confidence-interval-cpu=12h",
        "--confidence-interval-memory=48h",
        "--humanize-memory=true",
        "--round-cpu-millicores=10",
        "--round-memory-bytes=1048576",
        "--memory-aggregation-interval=12h",
        "--memory-aggregation-interval-count=4",
        "--memory-histogram-decay-half-life=12h",
        "--cpu-histogram-decay-half-life=1h30m",
        "--oom-bump-up-ratio=1.5",
        "--oom-min-bump-up-bytes=1000",
        "--cpu-integer-post-processor-enabled",
        "--container-recommendation-max-allowed-cpu=4",
        "--container-recommendation-max-allowed-memory=8Gi",
        "--vpa-object-namespace=shop",
    ).components["vpa-recommender"]
    assert (settings.recommender_name, settings.interval) == ("custom", 30.0)
    assert (settings.checkpoints_gc_interval, settings.checkpoints_timeout) == (300.0, 20.0)
    assert settings.vpa_object_namespace == "shop"
    assert settings.model == RecommenderConfig(
        recommendation_margin_fraction=0.2,
        pod_recommendation_min_cpu_millicores=50.0,
        pod_recommendation_min_memory_mb=100.0,
        target_cpu_percentile=0.95,
        recommendation_lower_bound_cpu_percentile=0.4,
        recommendation_upper_bound_cpu_percentile=0.99,
        target_memory_percentile=0.8,
        recommendation_lower_bound_memory_percentile=0.3,
        recommendation_upper_bound_memory_percentile=0.9,
        confidence_interval_cpu_ns=12 * HOUR_NS,
        confidence_interval_memory_ns=48 * HOUR_NS,
        memory_aggregation_interval_ns=12 * HOUR_NS,
        memory_aggregation_interval_count=4,
        memory_histogram_decay_half_life_ns=12 * HOUR_NS,
        cpu_histogram_decay_half_life_ns=90 * 60 * 10**9,
        oom_bump_up_ratio=1.5,
        oom_min_bump_up_bytes=1000.0,
        round_cpu_millicores=10,
        round_memory_bytes=1048576,
        humanize_memory=True,
        cpu_integer_post_processor_enabled=True,
        container_recommendation_max_allowed_cpu=Quantity.parse("4"),
        container_recommendation_max_allowed_memory=Quantity.parse("8Gi"),
        memory_saver=True,
    )
    # The history's namespace follows --vpa-object-namespace.
    assert settings.prometheus.namespace == "shop"


def test_prometheus_storage(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("  secret\n")
    settings = config(
        "--storage=prometheus",
        "--prometheus-address=https://prom.example:9090",
        "--prometheus-insecure",
        "--prometheus-cadvisor-job-name=cadvisor",
        "--history-length=2d",
        "--history-resolution=5m",
        "--history-cpu-metric=cpu_total",
        "--history-memory-metric=mem_ws",
        "--prometheus-query-timeout=30s",
        "--pod-label-prefix=label_",
        "--metric-for-pod-labels=kube_pod_labels[2d]",
        "--pod-namespace-label=ns",
        "--pod-name-label=pod",
        "--container-namespace-label=c_ns",
        "--container-pod-name-label=c_pod",
        "--container-name-label=c_name",
        f"--prometheus-bearer-token-file={token}",
    ).components["vpa-recommender"]
    assert not settings.use_checkpoints
    assert settings.prometheus == PrometheusHistoryConfig(
        address="https://prom.example:9090",
        insecure=True,
        cadvisor_job_name="cadvisor",
        history_length="2d",
        history_resolution="5m",
        query_timeout=timedelta(seconds=30),
        cpu_metric="cpu_total",
        memory_metric="mem_ws",
        pod_label_prefix="label_",
        pod_labels_metric="kube_pod_labels[2d]",
        pod_namespace_label="ns",
        pod_name_label="pod",
        container_namespace_label="c_ns",
        container_pod_name_label="c_pod",
        container_name_label="c_name",
        bearer_token="secret",
    )


def test_the_password_can_come_from_a_file(tmp_path: Path) -> None:
    # A password on the command line is visible to anyone who can list processes; a mounted
    # Secret file is not. Trimmed like Prometheus' own basic_auth password_file and like
    # --prometheus-bearer-token-file.
    secret = tmp_path / "password"
    secret.write_text("s3cr3t pass\n", encoding="utf-8")
    settings = config(
        "--storage=prometheus", "--username=vpa", f"--password-file={secret}"
    ).components["vpa-recommender"]
    assert (settings.prometheus.username, settings.prometheus.password) == ("vpa", "s3cr3t pass")
    # upstream's --password keeps working
    settings = config("--storage=prometheus", "--username=vpa", "--password=p").components[
        "vpa-recommender"
    ]
    assert settings.prometheus.password == "p"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--storage=prometheus", "--password=p", "--password-file=/etc/prometheus/password"],
            "--password and --password-file are mutually exclusive",
        ),
        (
            ["--storage=prometheus", "--password-file=/nonexistent/password"],
            "--password-file: cannot read /nonexistent/password",
        ),
        (
            ["--vpa-object-namespace=a", "--ignored-vpa-object-namespaces=b"],
            "mutually exclusive",
        ),
        (["--target-cpu-percentile=1.5"], "--target-cpu-percentile: must be within [0, 1]"),
        (["--confidence-interval-cpu=soon"], "--confidence-interval-cpu: invalid duration"),
        (["--memory-histogram-decay-half-life=0"], "must be > 0"),
        (["--round-cpu-millicores=0"], "must be >= 1"),
        (["--container-recommendation-max-allowed-cpu=lots"], "max-allowed-cpu"),
        (["--storage=prometheus", "--history-length=8days"], "--history-length"),
        (
            [
                "--storage=prometheus",
                "--prometheus-bearer-token=t",
                "--prometheus-bearer-token-file=/nonexistent",
                "--username=u",
            ],
            "mutually exclusive",
        ),
        (
            ["--storage=prometheus", "--prometheus-bearer-token-file=/nonexistent/token"],
            "--prometheus-bearer-token-file",
        ),
    ],
)
def test_bad_flags_name_themselves(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        config(*flags)
    assert message in str(raised.value)


def test_a_zero_global_cap_is_no_cap() -> None:
    model = (
        config("--container-recommendation-max-allowed-cpu=0").components["vpa-recommender"].model
    )
    assert model.global_max_allowed is None


@pytest.mark.parametrize(
    ("flags", "environ", "kinds"),
    [
        ([], {}, []),  # auto on a workstation: none
        ([], {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, auto_on()),  # auto, in a pod
        (["--kubeconfig", "/tmp/k"], {}, auto_on()),  # auto, pointed at a cluster
        # configured (a descheduler policy, a cloud provider), auto runs every component
        (
            [
                "--kubeconfig",
                "/tmp/k",
                "--descheduler-policy",
                POLICY,
                "--cloud-provider",
                "clusterapi",
            ],
            {},
            component_names(),
        ),
        (["--vpa-recommender", "true"], {}, ["vpa-recommender"]),
        (["--vpa-updater", "true"], {}, ["vpa-updater"]),
        (
            ["--vpa-recommender", "false", "--vpa-updater", "false", "--kubeconfig", "/tmp/k"],
            {},
            auto_on("vpa-recommender", "vpa-updater"),
        ),
        (
            ["--webhook", "false", "--kubeconfig", "/tmp/k"],
            {},
            auto_on("webhook"),
        ),
    ],
)
def test_whether_serve_runs_the_recommender(
    flags: list[str], environ: dict[str, str], kinds: list[str]
) -> None:
    components = default_components(config(*flags), environ=environ)
    assert [c.name for c in components] == kinds


def test_a_scenario_takes_the_model_flags_but_not_the_history_ones() -> None:
    spec = by_name("vpa-recommender")
    assert spec is not None
    flags = scenario_flags(spec)
    assert {"recommender-interval", "memory-saver", "target-cpu-percentile"} <= flags
    assert {"vpa-object-namespace", "ignored-vpa-object-namespaces"} <= flags
    assert not {"storage", "prometheus-address", "vpa-recommender"} & flags
