"""Flags of the descheduler in ``kubescale serve``, and the settings built from them.

Upstream's names and defaults (``cmd/descheduler/app/options/options.go``):

* ``--policy-config-file`` — the ``DeschedulerPolicy`` file (a mounted ConfigMap); read and
  validated at start, an invalid policy stops the process with the field named;
* ``--descheduling-interval`` (``0``) — time between cycles; 0 runs one cycle (a Job or
  CronJob);
* ``--dry-run`` (false) — decide and report every eviction, evict nothing.

Upstream's ``--leader-elect`` applies only with an interval and never in dry-run
(:attr:`DeschedulerSettings.leader_elect`); ``serve`` has the one ``--leader-elect`` flag for
every loop, the kubeconfig, QPS, metrics and serving flags, and the ``--feature-gates`` flag.

kubescale's addition: ``--descheduler auto|true|false``, whether ``serve`` runs the loop
(``auto``: when a policy is given).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from kubescale.base.flag_types import parse_bool, parse_duration

from .policy.fields import PolicyError
from .policy.policy_loading import DeschedulerPolicy, load_policy_file

__all__ = [
    "DeschedulerConfigError",
    "DeschedulerMode",
    "DeschedulerSettings",
    "add_descheduler_arguments",
    "descheduler_settings_from_args",
]

DeschedulerMode = Literal["auto", "true", "false"]


class DeschedulerConfigError(ValueError):
    """A descheduler flag that does not make sense (or names a bad policy); the message names
    the flag."""


@dataclass(frozen=True, kw_only=True)
class DeschedulerSettings:
    mode: DeschedulerMode = "auto"
    policy_path: Path | None = None
    policy: DeschedulerPolicy | None = None
    interval: float = 0.0
    """Seconds between cycles; 0: one cycle."""
    dry_run: bool = False

    @property
    def enabled(self) -> bool:
        return self.mode == "true" or (self.mode == "auto" and self.policy is not None)

    @property
    def run_once(self) -> bool:
        return self.interval == 0

    @property
    def leader_elect(self) -> bool:
        """Upstream elects a leader only when looping, and never in dry-run."""
        return self.interval > 0 and not self.dry_run


def add_descheduler_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("descheduler (upstream descheduler flags)")
    group.add_argument(
        "--descheduler",
        choices=("auto", "true", "false"),
        default="auto",
        help="run the descheduler loop: auto = when --policy-config-file is given "
        "(default: %(default)s)",
    )
    group.add_argument(
        "--policy-config-file",
        default="",
        metavar="PATH",
        help="file with the DeschedulerPolicy (descheduler/v1alpha2)",
    )
    group.add_argument(
        "--descheduling-interval",
        default="0",
        metavar="DURATION",
        help="time between descheduling cycles; 0 runs one cycle (default: 0)",
    )
    group.add_argument(
        "--dry-run",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="decide and report evictions without evicting (default: false)",
    )


def descheduler_settings_from_args(args: argparse.Namespace) -> DeschedulerSettings:
    try:
        interval = parse_duration(str(args.descheduling_interval))
    except argparse.ArgumentTypeError as err:
        raise DeschedulerConfigError(f"--descheduling-interval: {err}") from None
    if interval < 0:
        raise DeschedulerConfigError(
            f"--descheduling-interval must not be negative, got {args.descheduling_interval}"
        )
    path = Path(args.policy_config_file) if args.policy_config_file else None
    policy: DeschedulerPolicy | None = None
    if path is not None:
        try:
            policy = load_policy_file(path)
        except PolicyError as err:
            raise DeschedulerConfigError(f"--policy-config-file: {err}") from None
    mode = cast(DeschedulerMode, args.descheduler)
    if mode == "true" and policy is None:
        raise DeschedulerConfigError("--descheduler true needs --policy-config-file")
    return DeschedulerSettings(
        mode=mode,
        policy_path=path,
        policy=policy,
        interval=interval,
        dry_run=bool(args.dry_run),
    )
