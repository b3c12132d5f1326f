"""Flags of the VPA updater in ``kubescale serve``, and the settings built from them.

Names and defaults are upstream's (``pkg/updater/config/config.go``, reference §3.1):
``--updater-interval 1m``, ``--min-replicas 2``, ``--eviction-tolerance 0.5``,
``--eviction-rate-limit -1`` (``<= 0``: no limit), ``--eviction-rate-burst 1``,
``--use-admission-controller-status true``, ``--admission-controller-status-lease-name
vpa-admission-controller``, ``--admission-controller-status-lease-namespace`` (empty: the
``NAMESPACE`` environment variable, else ``kube-system``),
``--admission-controller-status-lease-timeout 1m``, ``--pod-update-threshold 0.1``,
``--in-recommendation-bounds-eviction-lifetime-threshold 12h``, ``--evict-after-oom-threshold
10m`` and ``--in-place-skip-disruption-budget false``; ``--dry-run`` (false, the descheduler's
flag, one for every system: :mod:`kubescale.plans.dry_run`) prints each plan instead.

kubescale's addition: ``--vpa-updater auto|true|false``, whether ``serve`` runs the loop
(``auto``: in a cluster or with ``--kubeconfig``, like ``--vpa-recommender``).

Not provided: upstream's ``--address`` (``serve`` has one metrics address) and the updater's own
leader-election flags (``serve`` gates every loop on one Lease).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal, cast

from kubescale.base.flag_types import (
    FlagValueError,
    add_bool_flag,
    add_duration_flag,
)
from kubescale.controllers.vpa.api.vpa_flags import add_feature_gates_argument, parse_feature_gates
from kubescale.controllers.vpa.updater.eviction_rate_limit import (
    DEFAULT_EVICTION_RATE_BURST,
    DEFAULT_EVICTION_RATE_LIMIT,
)
from kubescale.controllers.vpa.updater.eviction_restriction import (
    DEFAULT_EVICTION_TOLERANCE,
    DEFAULT_MIN_REPLICAS,
)
from kubescale.controllers.vpa.updater.update_priority import UpdateSettings
from kubescale.plans.dry_run import add_dry_run_flag

__all__ = [
    "DEFAULT_STATUS_LEASE_NAME",
    "UpdaterConfigError",
    "UpdaterMode",
    "UpdaterSettings",
    "add_updater_arguments",
    "updater_settings_from_args",
]

UpdaterMode = Literal["auto", "true", "false"]

DEFAULT_STATUS_LEASE_NAME: Final = "vpa-admission-controller"
_FALLBACK_NAMESPACE: Final = "kube-system"
_NAMESPACE_ENV: Final = "NAMESPACE"


class UpdaterConfigError(FlagValueError):
    """An updater flag value that parsed but does not make sense; the message names it."""


@dataclass(frozen=True, kw_only=True)
class UpdaterSettings:
    """The updater's settings, validated once at start."""

    mode: UpdaterMode = "auto"
    interval: float = 60.0
    """``--updater-interval`` in seconds."""
    min_replicas: int = DEFAULT_MIN_REPLICAS
    eviction_tolerance: float = DEFAULT_EVICTION_TOLERANCE
    eviction_rate_limit: float = DEFAULT_EVICTION_RATE_LIMIT
    eviction_rate_burst: int = DEFAULT_EVICTION_RATE_BURST
    use_admission_controller_status: bool = True
    status_lease_name: str = DEFAULT_STATUS_LEASE_NAME
    status_lease_namespace: str = _FALLBACK_NAMESPACE
    status_lease_timeout: timedelta = timedelta(minutes=1)
    in_place_skip_disruption_budget: bool = False
    priority: UpdateSettings = field(default_factory=UpdateSettings)
    """``--pod-update-threshold``, the lifetime and OOM thresholds."""
    dry_run: bool = False
    """``--dry-run``: decide and print each plan, write nothing."""


def add_updater_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the updater flags on ``parser``."""
    group = parser.add_argument_group("VPA updater (upstream updater flags)")
    group.add_argument(
        "--vpa-updater",
        choices=("auto", "true", "false"),
        default="auto",
        help="run the VPA updater loop: auto = when in a cluster or given --kubeconfig "
        "(default: %(default)s)",
    )
    add_duration_flag(group, "--updater-interval", "1m", "how often the updater loop runs")
    group.add_argument(
        "--min-replicas",
        type=int,
        default=DEFAULT_MIN_REPLICAS,
        help="minimum live replicas of a controller for its pods to be evicted "
        "(default: %(default)s; a VPA's updatePolicy.minReplicas wins)",
    )
    group.add_argument(
        "--eviction-tolerance",
        type=float,
        default=DEFAULT_EVICTION_TOLERANCE,
        help="fraction of a controller's replicas that may be evicted at once "
        "(default: %(default)s)",
    )
    group.add_argument(
        "--eviction-rate-limit",
        type=float,
        default=DEFAULT_EVICTION_RATE_LIMIT,
        help="evictions per second; <= 0 means no limit (default: %(default)s)",
    )
    group.add_argument(
        "--eviction-rate-burst",
        type=int,
        default=DEFAULT_EVICTION_RATE_BURST,
        help="burst of evictions (default: %(default)s)",
    )
    add_bool_flag(
        group,
        "--use-admission-controller-status",
        True,
        "evict only while the admission controller's status Lease is fresh",
    )
    group.add_argument(
        "--admission-controller-status-lease-name",
        default=DEFAULT_STATUS_LEASE_NAME,
        help="the admission controller's status Lease (default: %(default)s)",
    )
    group.add_argument(
        "--admission-controller-status-lease-namespace",
        default="",
        help="its namespace (default: $NAMESPACE, else kube-system)",
    )
    add_duration_flag(
        group,
        "--admission-controller-status-lease-timeout",
        "1m",
        "a status Lease renewed longer ago than this is stale",
    )
    group.add_argument(
        "--pod-update-threshold",
        type=float,
        default=0.1,
        help="minimum resource change for a pod in the recommended range (default: %(default)s)",
    )
    add_duration_flag(
        group,
        "--in-recommendation-bounds-eviction-lifetime-threshold",
        "12h",
        "pods in the recommended range are updated only after living this long",
    )
    add_duration_flag(
        group,
        "--evict-after-oom-threshold",
        "10m",
        "a container OOM-killed within this of its start makes its pod updatable at once",
    )
    add_bool_flag(
        group,
        "--in-place-skip-disruption-budget",
        False,
        "resize in place without the eviction budget when no container needs a restart",
    )
    add_feature_gates_argument(group)
    add_dry_run_flag(group)


def updater_settings_from_args(
    args: argparse.Namespace, *, environ: Mapping[str, str] | None = None
) -> UpdaterSettings:
    """Validate the flags declared by :func:`add_updater_arguments`."""
    if args.min_replicas < 1:
        raise UpdaterConfigError(f"--min-replicas must be >= 1, got {args.min_replicas}")
    if not 0.0 <= args.eviction_tolerance <= 1.0:
        raise UpdaterConfigError(
            f"--eviction-tolerance must be in [0, 1], got {args.eviction_tolerance}"
        )
    if args.pod_update_threshold < 0:
        raise UpdaterConfigError(
            f"--pod-update-threshold must be >= 0, got {args.pod_update_threshold}"
        )
    env = environ if environ is not None else {}
    namespace = (
        args.admission_controller_status_lease_namespace
        or env.get(_NAMESPACE_ENV, "")
        or _FALLBACK_NAMESPACE
    )
    gates = parse_feature_gates(args.feature_gates)
    return UpdaterSettings(
        mode=cast(UpdaterMode, args.vpa_updater),
        interval=float(args.updater_interval),
        min_replicas=int(args.min_replicas),
        eviction_tolerance=float(args.eviction_tolerance),
        eviction_rate_limit=float(args.eviction_rate_limit),
        eviction_rate_burst=int(args.eviction_rate_burst),
        use_admission_controller_status=bool(args.use_admission_controller_status),
        status_lease_name=str(args.admission_controller_status_lease_name),
        status_lease_namespace=namespace,
        status_lease_timeout=timedelta(seconds=args.admission_controller_status_lease_timeout),
        in_place_skip_disruption_budget=bool(args.in_place_skip_disruption_budget),
        dry_run=bool(args.dry_run),
        priority=UpdateSettings(
            pod_update_threshold=float(args.pod_update_threshold),
            lifetime_threshold=timedelta(
                seconds=args.in_recommendation_bounds_eviction_lifetime_threshold
            ),
            evict_after_oom_threshold=timedelta(seconds=args.evict_after_oom_threshold),
            in_place_gate=gates["InPlace"],
            cpu_startup_boost=gates["CPUStartupBoost"],
        ),
    )
