"""Flags of the descheduler in ``kubescale serve``, and the settings built from them.

Upstream's names and defaults (``cmd/descheduler/app/options/options.go``):

* ``--policy-config-file`` — the ``DeschedulerPolicy`` file (a mounted ConfigMap); read and
  validated at start, an invalid policy stops the process with the field named. Shared with the
  scheduler extender, like kubescale's ``--descheduler-policy`` (the policy as text, for
  scenarios): :mod:`.policy_flags`;
* ``--descheduling-interval`` (``0``) — time between cycles; 0 runs one cycle (a Job or
  CronJob);
* ``--dry-run`` (false) — decide and report every eviction, evict nothing (one flag for
  every system that prints plans: :mod:`kubescale.plans.dry_run`).

Upstream's ``--leader-elect`` applies only with an interval and never in dry-run
(:attr:`DeschedulerSettings.leader_elect`); ``serve`` has the one ``--leader-elect`` flag for
every loop, the kubeconfig, QPS, metrics and serving flags.

kubescale's addition: ``--descheduler auto|true|false``, whether ``serve`` runs the loop
(``auto``: in a cluster or with ``--kubeconfig``, when a policy is given).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import cast

from kubescale.base.flag_types import FlagValueError
from kubescale.base.go_time import parse_duration
from kubescale.plans.dry_run import add_dry_run_flag
from kubescale.scheduling.policy.policy_flags import (
    PolicyGatedMode,
    add_policy_arguments,
    policy_from_args,
    policy_gated_mode,
)
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy

__all__ = [
    "DeschedulerConfigError",
    "DeschedulerMode",
    "DeschedulerSettings",
    "add_descheduler_arguments",
    "descheduler_settings_from_args",
]

DeschedulerMode = PolicyGatedMode


class DeschedulerConfigError(FlagValueError):
    """A descheduler flag that does not make sense (or names a bad policy); the message names
    the flag."""


@dataclass(frozen=True, kw_only=True)
class DeschedulerSettings:
    requested: DeschedulerMode = "auto"
    """The ``--descheduler`` flag as given."""
    policy: DeschedulerPolicy | None = None
    policy_origin: str = ""
    """Which flag gave the policy (logs)."""
    interval: float = 0.0
    """Seconds between cycles; 0: one cycle."""
    dry_run: bool = False

    @property
    def mode(self) -> DeschedulerMode:
        """The on/off mode ``serve`` acts on: ``auto`` without a policy is ``false``."""
        return policy_gated_mode(self.requested, self.policy)

    @property
    def auto_off_reason(self) -> str | None:
        """Why ``--descheduler auto`` does not run it: no policy (``None``: not ``auto``, or a
        policy given)."""
        if self.requested != "auto" or self.policy is not None:
            return None
        return "no policy (--policy-config-file or --descheduler-policy)"

    @property
    def enabled(self) -> bool:
        """Whether the loop would run in a cluster."""
        return self.mode != "false"

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
        help="run the descheduler loop: auto = in a cluster or with --kubeconfig, when "
        "--policy-config-file (or --descheduler-policy) is given (default: %(default)s)",
    )
    add_policy_arguments(group)
    group.add_argument(
        "--descheduling-interval",
        default="0",
        metavar="DURATION",
        help="time between descheduling cycles; 0 runs one cycle (default: 0)",
    )
    add_dry_run_flag(group)


def descheduler_settings_from_args(args: argparse.Namespace) -> DeschedulerSettings:
    try:
        interval = parse_duration(str(args.descheduling_interval))
    except argparse.ArgumentTypeError as err:
        raise DeschedulerConfigError(f"--descheduling-interval: {err}") from None
    if interval < 0:
        raise DeschedulerConfigError(
            f"--descheduling-interval must not be negative, got {args.descheduling_interval}"
        )
    source = policy_from_args(args, error=DeschedulerConfigError)
    mode = cast(DeschedulerMode, args.descheduler)
    if mode == "true" and source.policy is None:
        raise DeschedulerConfigError(
            "--descheduler true needs --policy-config-file (or --descheduler-policy)"
        )
    return DeschedulerSettings(
        requested=mode,
        policy=source.policy,
        policy_origin=source.origin,
        interval=interval,
        dry_run=bool(args.dry_run),
    )
