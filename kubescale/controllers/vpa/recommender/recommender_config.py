"""Flags of the VPA recommender in ``kubescale serve``, and the settings built from them.

Names and defaults are upstream's (``pkg/recommender/config/config.go``, ``main.go``, reference
§2.1): the loop (``--recommender-name default``, ``--recommender-interval 1m``,
``--checkpoints-gc-interval 10m``, ``--checkpoints-timeout 1m``, ``--storage``,
``--memory-saver``), every model flag (percentiles, margin, pod minimums, confidence intervals,
half-lives, memory aggregation, OOM bump-up, rounding, the integer-CPU post-processor and the
global ``--container-recommendation-max-allowed-*`` caps), and the Prometheus history flags
used with ``--storage=prometheus``. Model flags become
:class:`kubescale.controllers.vpa.model.model_config.RecommenderConfig`, Prometheus flags
:class:`kubescale.controllers.vpa.recommender.prometheus_history_config.PrometheusHistoryConfig`.

Shared with the webhook (declared once, by :mod:`kubescale.webhook.webhook_config`, when both run in
``serve``): ``--vpa-object-namespace`` and ``--ignored-vpa-object-namespaces``.

kubescale's additions: ``--vpa-recommender auto|true|false``, whether ``serve`` runs the loop
(``auto``: in a cluster or with ``--kubeconfig``, like ``--webhook``), and
``--recommendation-policy upstream|adaptive`` (default ``upstream``: upstream's estimator, bit for
bit; ``adaptive``: :mod:`kubescale.controllers.vpa.model.policy.adaptive_estimator`).

``--dry-run`` (kubescale's one flag for every system that plans, :mod:`kubescale.plans.dry_run`;
upstream's recommender has none): the loop computes and decides as usual, and logs each status
write, checkpoint write and checkpoint deletion instead of sending it.

``--min-checkpoints 10``: checkpoints written per loop even after ``--checkpoints-timeout``
(upstream's rule up to VPA 1.3; deprecated there since 1.4, whose rule is ``--min-checkpoints 0``:
:mod:`kubescale.controllers.vpa.checkpoint.checkpoint_store`).

Accepted for compatibility, without effect: ``--update-worker-count`` (the loop computes every
VPA in one vectorised pass and writes statuses one after another). Not provided:
``--use-external-metrics`` and its metric flags (PodMetrics come from ``metrics.k8s.io``),
upstream's ``--address`` (``serve`` has one metrics address) and the recommender's own
leader-election flags (``serve``'s gate every loop).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal

from kubescale.base.flag_types import FlagValueError, add_bool_flag, positive_duration
from kubescale.base.go_time import parse_duration
from kubescale.controllers.vpa.api.vpa_flags import add_vpa_namespace_arguments, vpa_namespaces
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.model.policy.adaptive_config import (
    RECOMMENDATION_POLICIES,
    UPSTREAM_POLICY,
)
from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    PrometheusHistoryConfig,
    bearer_token_from_flags,
    parse_prometheus_duration,
    password_from_flags,
)
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.plans.dry_run import add_dry_run_flag

__all__ = [
    "DEFAULT_RECOMMENDER_NAME",
    "PROMETHEUS_STORAGE",
    "RecommenderConfigError",
    "RecommenderMode",
    "RecommenderSettings",
    "add_recommender_arguments",
    "recommender_settings_from_args",
]

RecommenderMode = Literal["auto", "true", "false"]

DEFAULT_RECOMMENDER_NAME: Final = "default"
PROMETHEUS_STORAGE: Final = "prometheus"
"""``--storage=prometheus``: history from Prometheus at start, no checkpoints (else checkpoints)."""


class RecommenderConfigError(FlagValueError):
    """A recommender flag value that parsed but does not make sense; the message names it."""


@dataclass(frozen=True, kw_only=True)
class RecommenderSettings:
    """The recommender's settings, validated once at start."""

    mode: RecommenderMode = "auto"
    recommender_name: str = DEFAULT_RECOMMENDER_NAME
    interval: float = 60.0
    """``--recommender-interval`` in seconds."""
    checkpoints_gc_interval: float = 600.0
    checkpoints_timeout: float = 60.0
    """Seconds from the start of an iteration after which no further checkpoint is written."""
    min_checkpoints: int = 10
    """``--min-checkpoints``: checkpoints written per iteration even after the timeout."""
    dry_run: bool = False
    """``--dry-run``: the loop's intents are logged, not sent (:mod:`kubescale.plans.dry_run`)."""
    storage: str = ""
    vpa_object_namespace: str = ""
    ignored_namespaces: tuple[str, ...] = ()
    model: RecommenderConfig = field(default_factory=RecommenderConfig)
    prometheus: PrometheusHistoryConfig = field(default_factory=PrometheusHistoryConfig)

    @property
    def use_checkpoints(self) -> bool:
        """Upstream ``useCheckpoints := config.Storage != "prometheus"``."""
        return self.storage != PROMETHEUS_STORAGE


def _duration(group: argparse._ArgumentGroup, flag: str, default: str, text: str) -> None:
    group.add_argument(
        flag, default=default, metavar="DURATION", help=f"{text} (default: {default})"
    )


def _number(
    group: argparse._ArgumentGroup, flag: str, default: float, text: str, *, kind: type = float
) -> None:
    group.add_argument(flag, type=kind, default=default, help=f"{text} (default: {default})")


def add_recommender_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the recommender flags on ``parser`` (the VPA namespace flags are shared with
    the webhook and the updater: :mod:`kubescale.controllers.vpa.api.vpa_flags`)."""
    loop = parser.add_argument_group("VPA recommender (upstream recommender flags)")
    loop.add_argument(
        "--vpa-recommender",
        choices=("auto", "true", "false"),
        default="auto",
        help="run the VPA recommender loop: auto = when in a cluster or given --kubeconfig "
        "(default: %(default)s)",
    )
    loop.add_argument(
        "--recommender-name",
        default=DEFAULT_RECOMMENDER_NAME,
        help="handle VPAs naming this recommender (default: %(default)s; 'default' also takes "
        "VPAs that name none)",
    )
    loop.add_argument(
        "--recommender-interval",
        type=positive_duration,
        default=60.0,
        metavar="DURATION",
        help="how often metrics are fetched and recommendations updated (default: 1m)",
    )
    loop.add_argument(
        "--checkpoints-gc-interval",
        type=positive_duration,
        default=600.0,
        metavar="DURATION",
        help="how often checkpoints of deleted VPAs are garbage-collected (default: 10m)",
    )
    loop.add_argument(
        "--checkpoints-timeout",
        type=positive_duration,
        default=60.0,
        metavar="DURATION",
        help="checkpoint writing stops this long after an iteration starts (default: 1m)",
    )
    loop.add_argument(
        "--storage",
        default="",
        help="history at start: 'prometheus', else checkpoints (default: checkpoints)",
    )
    add_bool_flag(loop, "--memory-saver", False, "track only pods some VPA matches")
    _number(loop, "--update-worker-count", 10, "accepted, no effect here", kind=int)
    _number(
        loop,
        "--min-checkpoints",
        10,
        "minimum number of checkpoints to write per recommender's main loop, even after "
        "--checkpoints-timeout",
        kind=int,
    )
    add_vpa_namespace_arguments(loop)
    add_dry_run_flag(loop)

    model = parser.add_argument_group("VPA recommender model")
    model.add_argument(
        "--recommendation-policy",
        choices=RECOMMENDATION_POLICIES,
        default=UPSTREAM_POLICY,
        help="upstream = upstream VPA's estimator; adaptive = kubescale's OOM-aware policy "
        "(docs/vpa-recommendation-policy.md) (default: %(default)s)",
    )
    _number(model, "--recommendation-margin-fraction", 0.15, "safety margin on every estimate")
    _number(model, "--pod-recommendation-min-cpu-millicores", 25.0, "pod minimum CPU")
    _number(model, "--pod-recommendation-min-memory-mb", 250.0, "pod minimum memory, MiB")
    _number(model, "--target-cpu-percentile", 0.9, "CPU target percentile")
    _number(model, "--recommendation-lower-bound-cpu-percentile", 0.5, "CPU lower bound")
    _number(model, "--recommendation-upper-bound-cpu-percentile", 0.95, "CPU upper bound")
    _number(model, "--target-memory-percentile", 0.9, "memory target percentile")
    _number(model, "--recommendation-lower-bound-memory-percentile", 0.5, "memory lower bound")
    _number(model, "--recommendation-upper-bound-memory-percentile", 0.95, "memory upper bound")
    _duration(model, "--confidence-interval-cpu", "24h", "history for full CPU confidence")
    _duration(model, "--confidence-interval-memory", "24h", "history for full memory confidence")
    add_bool_flag(model, "--humanize-memory", False, "deprecated: memory in binary units")
    _number(model, "--round-cpu-millicores", 1, "round CPU up to a multiple of this", kind=int)
    _number(model, "--round-memory-bytes", 1, "round memory up to a multiple of this", kind=int)
    _duration(model, "--memory-aggregation-interval", "24h", "one memory peak per interval")
    _number(model, "--memory-aggregation-interval-count", 8, "intervals kept", kind=int)
    _duration(model, "--memory-histogram-decay-half-life", "24h", "memory sample half-life")
    _duration(model, "--cpu-histogram-decay-half-life", "24h", "CPU sample half-life")
    _number(model, "--oom-bump-up-ratio", 1.2, "memory after an OOM: at least × this")
    _number(model, "--oom-min-bump-up-bytes", 104857600.0, "and at least + this")
    add_bool_flag(
        model, "--cpu-integer-post-processor-enabled", False, "honour the integer-CPU annotation"
    )
    model.add_argument(
        "--container-recommendation-max-allowed-cpu",
        default="",
        help="cap on every container's CPU recommendation (a VPA's maxAllowed wins)",
    )
    model.add_argument(
        "--container-recommendation-max-allowed-memory",
        default="",
        help="cap on every container's memory recommendation (a VPA's maxAllowed wins)",
    )

    defaults = PrometheusHistoryConfig()
    history = parser.add_argument_group("VPA recommender history (--storage=prometheus)")
    history.add_argument("--prometheus-address", default=defaults.address, help="Prometheus URL")
    add_bool_flag(history, "--prometheus-insecure", False, "skip TLS verification")
    history.add_argument("--prometheus-cadvisor-job-name", default=defaults.cadvisor_job_name)
    history.add_argument("--history-length", default=defaults.history_length)
    history.add_argument("--history-resolution", default=defaults.history_resolution)
    history.add_argument("--history-cpu-metric", default=defaults.cpu_metric)
    history.add_argument("--history-memory-metric", default=defaults.memory_metric)
    _duration(history, "--prometheus-query-timeout", "5m", "timeout of each query")
    history.add_argument("--pod-label-prefix", default=defaults.pod_label_prefix)
    history.add_argument("--metric-for-pod-labels", default=defaults.pod_labels_metric)
    history.add_argument("--pod-namespace-label", default=defaults.pod_namespace_label)
    history.add_argument("--pod-name-label", default=defaults.pod_name_label)
    history.add_argument("--container-namespace-label", default=defaults.container_namespace_label)
    history.add_argument("--container-pod-name-label", default=defaults.container_pod_name_label)
    history.add_argument("--container-name-label", default=defaults.container_name_label)
    history.add_argument("--username", default="", help="Prometheus basic-auth user")
    history.add_argument(
        "--password",
        default="",
        help="Prometheus basic-auth password (visible in the process list: prefer "
        "--password-file or PROMETHEUS_PASSWORD)",
    )
    history.add_argument(
        "--password-file",
        default="",
        metavar="FILE",
        help="file holding the Prometheus basic-auth password, read at start "
        "(kubescale's addition)",
    )
    history.add_argument("--prometheus-bearer-token", default="")
    history.add_argument("--prometheus-bearer-token-file", default="")


def _go_duration_ns(flag: str, text: str) -> int:
    try:
        seconds = parse_duration(text)
    except argparse.ArgumentTypeError as exc:
        raise RecommenderConfigError(f"{flag}: {exc}") from None
    if seconds <= 0:
        raise RecommenderConfigError(f"{flag}: duration must be > 0, got {text!r}")
    return round(seconds * 1e9)


def _quantity(flag: str, text: str) -> Quantity | None:
    if not text.strip():
        return None
    try:
        value = Quantity.parse(text.strip())
    except QuantityError as exc:
        raise RecommenderConfigError(f"{flag}: {exc}") from None
    # initGlobalMaxAllowed: a zero cap is no cap.
    return None if value.is_zero() else value


def _percentile(flag: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise RecommenderConfigError(f"{flag}: must be within [0, 1], got {value}")
    return value


def _model_config(args: argparse.Namespace) -> RecommenderConfig:
    if args.round_cpu_millicores < 1 or args.round_memory_bytes < 1:
        raise RecommenderConfigError("--round-cpu-millicores and --round-memory-bytes must be >= 1")
    if args.memory_aggregation_interval_count < 1:
        raise RecommenderConfigError("--memory-aggregation-interval-count must be >= 1")
    if args.recommendation_margin_fraction < 0:
        raise RecommenderConfigError("--recommendation-margin-fraction must be >= 0")
    return RecommenderConfig(
        recommendation_margin_fraction=args.recommendation_margin_fraction,
        pod_recommendation_min_cpu_millicores=args.pod_recommendation_min_cpu_millicores,
        pod_recommendation_min_memory_mb=args.pod_recommendation_min_memory_mb,
        target_cpu_percentile=_percentile("--target-cpu-percentile", args.target_cpu_percentile),
        recommendation_lower_bound_cpu_percentile=_percentile(
            "--recommendation-lower-bound-cpu-percentile",
            args.recommendation_lower_bound_cpu_percentile,
        ),
        recommendation_upper_bound_cpu_percentile=_percentile(
            "--recommendation-upper-bound-cpu-percentile",
            args.recommendation_upper_bound_cpu_percentile,
        ),
        target_memory_percentile=_percentile(
            "--target-memory-percentile", args.target_memory_percentile
        ),
        recommendation_lower_bound_memory_percentile=_percentile(
            "--recommendation-lower-bound-memory-percentile",
            args.recommendation_lower_bound_memory_percentile,
        ),
        recommendation_upper_bound_memory_percentile=_percentile(
            "--recommendation-upper-bound-memory-percentile",
            args.recommendation_upper_bound_memory_percentile,
        ),
        confidence_interval_cpu_ns=_go_duration_ns(
            "--confidence-interval-cpu", args.confidence_interval_cpu
        ),
        confidence_interval_memory_ns=_go_duration_ns(
            "--confidence-interval-memory", args.confidence_interval_memory
        ),
        memory_aggregation_interval_ns=_go_duration_ns(
            "--memory-aggregation-interval", args.memory_aggregation_interval
        ),
        memory_aggregation_interval_count=args.memory_aggregation_interval_count,
        memory_histogram_decay_half_life_ns=_go_duration_ns(
            "--memory-histogram-decay-half-life", args.memory_histogram_decay_half_life
        ),
        cpu_histogram_decay_half_life_ns=_go_duration_ns(
            "--cpu-histogram-decay-half-life", args.cpu_histogram_decay_half_life
        ),
        oom_bump_up_ratio=args.oom_bump_up_ratio,
        oom_min_bump_up_bytes=args.oom_min_bump_up_bytes,
        round_cpu_millicores=args.round_cpu_millicores,
        round_memory_bytes=args.round_memory_bytes,
        humanize_memory=args.humanize_memory,
        cpu_integer_post_processor_enabled=args.cpu_integer_post_processor_enabled,
        container_recommendation_max_allowed_cpu=_quantity(
            "--container-recommendation-max-allowed-cpu",
            args.container_recommendation_max_allowed_cpu,
        ),
        container_recommendation_max_allowed_memory=_quantity(
            "--container-recommendation-max-allowed-memory",
            args.container_recommendation_max_allowed_memory,
        ),
        memory_saver=args.memory_saver,
        recommendation_policy=args.recommendation_policy,
    )


def _prometheus_config(args: argparse.Namespace, *, namespace: str) -> PrometheusHistoryConfig:
    for flag, text in (
        ("--history-length", args.history_length),
        ("--history-resolution", args.history_resolution),
    ):
        try:
            parse_prometheus_duration(text)
        except ValueError as exc:
            raise RecommenderConfigError(f"{flag}: {exc}") from None
    try:
        token = bearer_token_from_flags(
            token=args.prometheus_bearer_token,
            token_file=args.prometheus_bearer_token_file,
            username=args.username,
        )
    except ValueError as exc:
        raise RecommenderConfigError(str(exc)) from None
    except OSError as exc:
        raise RecommenderConfigError(
            f"--prometheus-bearer-token-file: unable to read bearer token file: {exc}"
        ) from None
    try:
        password = password_from_flags(password=args.password, password_file=args.password_file)
    except ValueError as exc:
        raise RecommenderConfigError(str(exc)) from None
    except OSError as exc:
        raise RecommenderConfigError(
            f"--password-file: cannot read {args.password_file}: {exc.strerror or exc}"
        ) from None
    timeout_ns = _go_duration_ns("--prometheus-query-timeout", args.prometheus_query_timeout)
    return PrometheusHistoryConfig(
        address=args.prometheus_address,
        insecure=args.prometheus_insecure,
        cadvisor_job_name=args.prometheus_cadvisor_job_name,
        history_length=args.history_length,
        history_resolution=args.history_resolution,
        query_timeout=timedelta(microseconds=timeout_ns // 1000),
        cpu_metric=args.history_cpu_metric,
        memory_metric=args.history_memory_metric,
        pod_label_prefix=args.pod_label_prefix,
        pod_labels_metric=args.metric_for_pod_labels,
        pod_namespace_label=args.pod_namespace_label,
        pod_name_label=args.pod_name_label,
        container_namespace_label=args.container_namespace_label,
        container_pod_name_label=args.container_pod_name_label,
        container_name_label=args.container_name_label,
        namespace=namespace,
        username=args.username,
        password=password,
        bearer_token=token,
    )


def recommender_settings_from_args(args: argparse.Namespace) -> RecommenderSettings:
    """Build and cross-check the settings; raises :class:`RecommenderConfigError`."""
    selected, ignored = vpa_namespaces(args)
    storage = args.storage.strip()
    model = _model_config(args)
    prometheus = (
        _prometheus_config(args, namespace=selected)
        if storage == PROMETHEUS_STORAGE
        else PrometheusHistoryConfig(namespace=selected)
    )
    if args.min_checkpoints < 0:
        raise RecommenderConfigError(f"--min-checkpoints: must be >= 0, got {args.min_checkpoints}")
    return RecommenderSettings(
        mode=args.vpa_recommender,
        recommender_name=args.recommender_name,
        interval=args.recommender_interval,
        checkpoints_gc_interval=args.checkpoints_gc_interval,
        checkpoints_timeout=args.checkpoints_timeout,
        min_checkpoints=args.min_checkpoints,
        dry_run=bool(args.dry_run),
        storage=storage,
        vpa_object_namespace=selected,
        ignored_namespaces=ignored,
        model=model,
        prometheus=prometheus,
    )


SERVE_ONLY_FLAGS: Final = frozenset(
    {
        "storage",
        "update-worker-count",
        "prometheus-address",
        "prometheus-insecure",
        "prometheus-cadvisor-job-name",
        "history-length",
        "history-resolution",
        "history-cpu-metric",
        "history-memory-metric",
        "prometheus-query-timeout",
        "pod-label-prefix",
        "metric-for-pod-labels",
        "pod-namespace-label",
        "pod-name-label",
        "container-namespace-label",
        "container-pod-name-label",
        "container-name-label",
        "username",
        "password",
        "password-file",
        "prometheus-bearer-token",
        "prometheus-bearer-token-file",
    }
)
"""Flags a simulated run refuses (the registry entry, :mod:`kubescale.components`)."""
