"""The Prometheus history provider's flags, and the PromQL upstream builds from them.

Upstream: ``pkg/recommender/config/config.go`` (flags and defaults, the bearer-token file read
at start-up), ``input/history/history_provider.go`` (``NewPrometheusHistoryProvider``: duration
parsing and the authentication round-tripper; ``GetClusterHistory``: the queries). See
:mod:`kubescale.controllers.vpa.recommender.prometheus_history` for what the queries mean and how
they are used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Final

from kubescale.base.go_strings import go_quote
from kubescale.prometheus.client_settings import PrometheusAuth

__all__ = [
    "HistoryQueries",
    "PrometheusHistoryConfig",
    "bearer_token_from_flags",
    "history_queries",
    "parse_prometheus_duration",
    "password_from_flags",
    "read_bearer_token_file",
    "resolve_auth",
]

_DURATION = re.compile(
    r"(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?"
    r"(?:([0-9]+)ms)?"
)
_DURATION_UNITS_MS: Final = (
    365 * 24 * 3600 * 1000,
    7 * 24 * 3600 * 1000,
    24 * 3600 * 1000,
    3600 * 1000,
    60 * 1000,
    1000,
    1,
)
_MAX_DURATION_NS: Final = 2**63 - 1


@dataclass(frozen=True, kw_only=True)
class PrometheusHistoryConfig:
    """The history provider's flags, with upstream's defaults (``config/config.go``)."""

    address: str = "http://prometheus.monitoring.svc"
    """``--prometheus-address``."""
    insecure: bool = False
    """``--prometheus-insecure``: skip TLS verification."""
    cadvisor_job_name: str = "kubernetes-cadvisor"
    """``--prometheus-cadvisor-job-name``; empty leaves the ``job`` matcher out."""
    history_length: str = "8d"
    """``--history-length``."""
    history_resolution: str = "1h"
    """``--history-resolution``: range-query step and the CPU ``rate()`` window."""
    query_timeout: timedelta = timedelta(minutes=5)
    """``--prometheus-query-timeout`` (a Go duration, per query)."""
    cpu_metric: str = "container_cpu_usage_seconds_total"
    """``--history-cpu-metric``."""
    memory_metric: str = "container_memory_working_set_bytes"
    """``--history-memory-metric``."""
    pod_label_prefix: str = "pod_label_"
    """``--pod-label-prefix``."""
    pod_labels_metric: str = 'up{job="kubernetes-pods"}'
    """``--metric-for-pod-labels`` (see the module docstring: it needs a range selector)."""
    pod_namespace_label: str = "kubernetes_namespace"
    """``--pod-namespace-label``."""
    pod_name_label: str = "kubernetes_pod_name"
    """``--pod-name-label``."""
    container_namespace_label: str = "namespace"
    """``--container-namespace-label``."""
    container_pod_name_label: str = "pod_name"
    """``--container-pod-name-label``."""
    container_name_label: str = "name"
    """``--container-name-label``."""
    namespace: str = ""
    """``--vpa-object-namespace``: restricts the usage queries to one namespace."""
    username: str = ""
    """``--username`` (basic auth, with ``--password``)."""
    password: str = ""
    """``--password``, or the content of ``--password-file`` (kubescale's addition)."""
    bearer_token: str = ""
    """``--prometheus-bearer-token``, or the content of ``--prometheus-bearer-token-file``."""


def parse_prometheus_duration(text: str) -> timedelta:
    """Prometheus ``model.ParseDuration``: ``[Ny][Nw][Nd][Nh][Nm][Ns][Nms]``, or ``0``."""
    if text == "0":
        return timedelta(0)
    if text == "":
        raise ValueError("empty duration string")
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not a valid duration string: {go_quote(text)}")
    total_ms = 0
    for digits, unit_ms in zip(match.groups(), _DURATION_UNITS_MS, strict=True):
        if digits is None:
            continue
        total_ms += int(digits) * unit_ms
        if total_ms * 1_000_000 > _MAX_DURATION_NS:
            raise ValueError("duration out of range")
    return timedelta(milliseconds=total_ms)


def read_bearer_token_file(path: str | Path) -> str:
    """``--prometheus-bearer-token-file``: the file's content, whitespace-trimmed."""
    return Path(path).read_text(encoding="utf-8").strip()


def bearer_token_from_flags(*, token: str, token_file: str, username: str) -> str:
    """``ValidateRecommenderConfig``: the bearer token the provider uses.

    Upstream refuses to start only when all three of ``--prometheus-bearer-token``,
    ``--prometheus-bearer-token-file`` and ``--username`` are set (ValueError with its
    message); a token file's trimmed content replaces ``--prometheus-bearer-token``. An
    unreadable file raises OSError (upstream: "Unable to read bearer token file", exit).
    """
    if token and token_file and username:
        raise ValueError(
            "--bearer-token, --bearer-token-file and --username are mutually exclusive and "
            "can't be set together."
        )
    return read_bearer_token_file(token_file) if token_file else token


def password_from_flags(*, password: str, password_file: str) -> str:
    """``--password`` or the whitespace-trimmed content of ``--password-file``.

    Why a file: a command-line flag is readable by anyone who can list the node's processes
    (``/proc/<pid>/cmdline``); a file mounted from a Secret is not. Upstream has only
    ``--password`` and the ``PROMETHEUS_PASSWORD`` environment variable, both kept. The content
    is trimmed as Prometheus trims its own ``basic_auth.password_file`` and as upstream trims
    ``--prometheus-bearer-token-file``. Raises ValueError when both flags are set (naming them)
    and OSError when the file cannot be read; read once, at start-up.
    """
    if password and password_file:
        raise ValueError("--password and --password-file are mutually exclusive")
    if not password_file:
        return password
    return Path(password_file).read_text(encoding="utf-8").strip()


def resolve_auth(config: PrometheusHistoryConfig, *, environ: Mapping[str, str]) -> PrometheusAuth:
    """Upstream's transport choice: bearer token, then flags' basic auth, then environment's."""
    if config.bearer_token:
        return PrometheusAuth(bearer_token=config.bearer_token)
    if config.username and config.password:
        return PrometheusAuth(username=config.username, password=config.password)
    username = environ.get("PROMETHEUS_USERNAME", "")
    password = environ.get("PROMETHEUS_PASSWORD", "")
    if username and password:
        return PrometheusAuth(username=username, password=password)
    return PrometheusAuth()


@dataclass(frozen=True, kw_only=True)
class HistoryQueries:
    """The three PromQL expressions ``GetClusterHistory`` sends."""

    cpu: str
    memory: str
    pod_labels: str


def history_queries(config: PrometheusHistoryConfig) -> HistoryQueries:
    """The PromQL exactly as upstream builds it from the flags."""
    parts: list[str] = []
    if config.cadvisor_job_name:
        parts.append(f'job="{config.cadvisor_job_name}"')
    parts.append(f'{config.container_pod_name_label}=~".+"')
    parts.append(f'{config.container_name_label}!="POD"')
    parts.append(f'{config.container_name_label}!=""')
    if config.namespace:
        parts.append(f'{config.container_namespace_label}="{config.namespace}"')
    selector = ", ".join(parts)
    return HistoryQueries(
        cpu=f"rate({config.cpu_metric}{{{selector}}}[{config.history_resolution}])",
        memory=f"{config.memory_metric}{{{selector}}}",
        pod_labels=config.pod_labels_metric,
    )
