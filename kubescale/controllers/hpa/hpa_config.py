"""Flags of the HPA controller in ``kubescale serve``, and the settings built from them.

Upstream's names and defaults (kube-controller-manager, reference §0):
``--horizontal-pod-autoscaler-sync-period 15s``, ``--horizontal-pod-autoscaler-tolerance 0.1``,
``--horizontal-pod-autoscaler-downscale-stabilization 5m``,
``--horizontal-pod-autoscaler-cpu-initialization-period 5m``,
``--horizontal-pod-autoscaler-initial-readiness-delay 30s`` and
``--concurrent-horizontal-pod-autoscaler-syncs 5``.

kubescale's additions:

* ``--hpa-controller auto|true|false`` — whether ``serve`` runs the loop (``auto``: in a cluster
  or with ``--kubeconfig``, like ``--vpa-updater``);
* ``--hpa-selection annotated|all`` — which HPAs it reconciles (``docs/hpa.md``, coexistence
  with kube-controller-manager): ``annotated`` (default) only those annotated
  ``hpa.kubescale.io/controller: kubescale``; ``all`` every HPA except those annotated
  ``hpa.kubescale.io/controller: kube-controller-manager``;
* ``--hpa-feature-gates`` — upstream's HPA gates: ``HPAScaleToZero`` (alpha, default false)
  and ``HPAConfigurableTolerance`` (beta, default true);
* ``--hpa-prometheus-address`` — Prometheus for PromQL metrics; empty: ``--prometheus-address``
  (the VPA recommender's flag) when ``serve`` declares it;
* ``--hpa-reconcile-timeout`` (default 30s, one request's client timeout) — each HPA's own
  deadline for what one reconcile reads and writes: one hung dependency fails the HPAs that
  use it with "context deadline exceeded" instead of holding a worker for the client's five
  tries. Upstream has no such deadline (its workers wait on the client).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal, cast

from kubescale.base.flag_types import (
    FlagValueError,
    add_duration_flag,
    parse_feature_gates,
)
from kubescale.base.go_time import parse_duration
from kubescale.plans.dry_run import add_dry_run_flag

__all__ = [
    "CONTROLLER_ANNOTATION",
    "HPA_FEATURE_GATES",
    "HpaConfigError",
    "HpaMode",
    "HpaSelection",
    "HpaSettings",
    "add_hpa_arguments",
    "hpa_settings_from_args",
    "parse_hpa_feature_gates",
]

HpaMode = Literal["auto", "true", "false"]
HpaSelection = Literal["annotated", "all"]

CONTROLLER_ANNOTATION: Final = "hpa.kubescale.io/controller"
HPA_FEATURE_GATES: Final = {"HPAScaleToZero": False, "HPAConfigurableTolerance": True}


class HpaConfigError(FlagValueError):
    """An HPA flag value that parsed but does not make sense; the message names the flag."""


@dataclass(frozen=True, kw_only=True)
class HpaSettings:
    mode: HpaMode = "auto"
    selection: HpaSelection = "annotated"
    sync_period: timedelta = timedelta(seconds=15)
    tolerance: float = 0.1
    downscale_stabilization: timedelta = timedelta(minutes=5)
    cpu_initialization_period: timedelta = timedelta(minutes=5)
    initial_readiness_delay: timedelta = timedelta(seconds=30)
    concurrent_syncs: int = 5
    feature_gates: dict[str, bool] = field(default_factory=lambda: dict(HPA_FEATURE_GATES))
    prometheus_address: str = ""
    prometheus_insecure: bool = False
    prometheus_timeout: timedelta = timedelta(seconds=30)
    reconcile_timeout: timedelta = timedelta(seconds=30)
    dry_run: bool = False
    """``--dry-run`` (one flag for every system, :mod:`kubescale.plans.dry_run`): every
    scale, status write and event printed, nothing written."""

    @property
    def scale_to_zero_gate(self) -> bool:
        return self.feature_gates.get("HPAScaleToZero", False)

    @property
    def configurable_tolerance_gate(self) -> bool:
        return self.feature_gates.get("HPAConfigurableTolerance", True)


def parse_hpa_feature_gates(text: str) -> dict[str, bool]:
    """``Gate=bool,...`` over :data:`HPA_FEATURE_GATES`' defaults."""
    return parse_feature_gates("--hpa-feature-gates", text, HPA_FEATURE_GATES, error=HpaConfigError)


def add_hpa_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the HPA flags on ``parser``."""
    group = parser.add_argument_group("HPA controller (kube-controller-manager HPA flags)")
    group.add_argument(
        "--hpa-controller",
        choices=("auto", "true", "false"),
        default="auto",
        help="run the HPA loop: auto = when in a cluster or given --kubeconfig "
        "(default: %(default)s)",
    )
    group.add_argument(
        "--hpa-selection",
        choices=("annotated", "all"),
        default="annotated",
        help=f"which HPAs to reconcile: annotated = only those with {CONTROLLER_ANNOTATION}: "
        "kubescale; all = every HPA not annotated kube-controller-manager (turn kube-controller-"
        "manager's HPA loop off first) (default: %(default)s)",
    )
    add_duration_flag(
        group,
        "--horizontal-pod-autoscaler-sync-period",
        "15s",
        "the period for syncing the number of pods in horizontal pod autoscaler",
        parse=parse_duration,
    )
    group.add_argument(
        "--horizontal-pod-autoscaler-tolerance",
        type=float,
        default=0.1,
        help="the minimum change (from 1.0) in the desired-to-actual metrics ratio for the "
        "horizontal pod autoscaler to consider scaling (default: %(default)s)",
    )
    add_duration_flag(
        group,
        "--horizontal-pod-autoscaler-downscale-stabilization",
        "5m",
        "the period for which autoscaler will look backwards and not scale down below any "
        "recommendation it made during that period",
        parse=parse_duration,
    )
    add_duration_flag(
        group,
        "--horizontal-pod-autoscaler-cpu-initialization-period",
        "5m",
        "the period after pod start when CPU samples might be skipped",
        parse=parse_duration,
    )
    add_duration_flag(
        group,
        "--horizontal-pod-autoscaler-initial-readiness-delay",
        "30s",
        "the period after pod start during which readiness changes will be treated as "
        "initial readiness",
        parse=parse_duration,
    )
    group.add_argument(
        "--concurrent-horizontal-pod-autoscaler-syncs",
        type=int,
        default=5,
        help="the number of horizontal pod autoscaler objects that are allowed to sync "
        "concurrently (default: %(default)s)",
    )
    add_duration_flag(
        group,
        "--hpa-reconcile-timeout",
        "30s",
        "each HPA's deadline for what one reconcile reads and writes (the metrics APIs, "
        "/scale, its status); past it the step fails with 'context deadline exceeded'",
        parse=parse_duration,
    )
    group.add_argument(
        "--hpa-feature-gates",
        default="",
        help="HPA feature gates: HPAScaleToZero=true|false (default false), "
        "HPAConfigurableTolerance=true|false (default true)",
    )
    group.add_argument(
        "--hpa-prometheus-address",
        default="",
        help="Prometheus answering PromQL metrics (hpa.kubescale.io/promql); empty: "
        "--prometheus-address",
    )
    add_dry_run_flag(group)


def hpa_settings_from_args(args: argparse.Namespace) -> HpaSettings:
    """Validate the flags declared by :func:`add_hpa_arguments`."""
    durations = {
        "--horizontal-pod-autoscaler-sync-period": args.horizontal_pod_autoscaler_sync_period,
        "--horizontal-pod-autoscaler-downscale-stabilization": (
            args.horizontal_pod_autoscaler_downscale_stabilization
        ),
        "--horizontal-pod-autoscaler-cpu-initialization-period": (
            args.horizontal_pod_autoscaler_cpu_initialization_period
        ),
        "--horizontal-pod-autoscaler-initial-readiness-delay": (
            args.horizontal_pod_autoscaler_initial_readiness_delay
        ),
    }
    for flag, seconds in durations.items():
        if seconds < 0:
            raise HpaConfigError(f"{flag} must be >= 0, got {seconds}s")
    if args.hpa_reconcile_timeout <= 0:
        raise HpaConfigError(
            f"--hpa-reconcile-timeout must be > 0, got {args.hpa_reconcile_timeout}s"
        )
    if args.horizontal_pod_autoscaler_sync_period <= 0:
        raise HpaConfigError(
            "--horizontal-pod-autoscaler-sync-period must be > 0, got "
            f"{args.horizontal_pod_autoscaler_sync_period}s"
        )
    tolerance = float(args.horizontal_pod_autoscaler_tolerance)
    if not tolerance >= 0:
        raise HpaConfigError(f"--horizontal-pod-autoscaler-tolerance must be >= 0, got {tolerance}")
    if args.concurrent_horizontal_pod_autoscaler_syncs < 1:
        raise HpaConfigError(
            "--concurrent-horizontal-pod-autoscaler-syncs must be >= 1, got "
            f"{args.concurrent_horizontal_pod_autoscaler_syncs}"
        )
    address = str(args.hpa_prometheus_address or getattr(args, "prometheus_address", "") or "")
    timeout = getattr(args, "prometheus_query_timeout", None)
    return HpaSettings(
        mode=cast(HpaMode, args.hpa_controller),
        selection=cast(HpaSelection, args.hpa_selection),
        sync_period=timedelta(seconds=args.horizontal_pod_autoscaler_sync_period),
        tolerance=tolerance,
        downscale_stabilization=timedelta(
            seconds=args.horizontal_pod_autoscaler_downscale_stabilization
        ),
        cpu_initialization_period=timedelta(
            seconds=args.horizontal_pod_autoscaler_cpu_initialization_period
        ),
        initial_readiness_delay=timedelta(
            seconds=args.horizontal_pod_autoscaler_initial_readiness_delay
        ),
        concurrent_syncs=int(args.concurrent_horizontal_pod_autoscaler_syncs),
        reconcile_timeout=timedelta(seconds=args.hpa_reconcile_timeout),
        dry_run=bool(args.dry_run),
        feature_gates=parse_hpa_feature_gates(args.hpa_feature_gates or ""),
        prometheus_address=address,
        prometheus_insecure=bool(getattr(args, "prometheus_insecure", False)),
        prometheus_timeout=timedelta(seconds=float(timeout))
        if isinstance(timeout, int | float) and timeout > 0
        else timedelta(seconds=30),
    )


SERVE_ONLY_FLAGS: Final = frozenset({"hpa-prometheus-address"})
"""Flags a simulated run refuses (the registry entry, :mod:`kubescale.components`)."""
