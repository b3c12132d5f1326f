"""Flags of the scheduler extender in ``kubescale serve``, and the settings built from them.

* ``--scheduler-extender auto|true|false`` — serve ``<prefix>/filter`` and
  ``<prefix>/prioritize`` on the TLS server (``auto``: in a cluster or with ``--kubeconfig``,
  when a descheduler policy is given);
* ``--policy-config-file`` / ``--descheduler-policy`` — the descheduler policy the extender
  enforces, the descheduler's own flags (:mod:`kubescale.scheduling.policy.policy_flags`);
* ``--extender-url-prefix`` (``/scheduler``) — the path the KubeSchedulerConfiguration's
  ``urlPrefix`` ends with;
* ``--extender-eviction-memory`` (``10m``) — how long a node stays refused to the pods of an
  owner whose pod the descheduler evicted from it (0 turns the memory off);
* ``--extender-eviction-memory-entries`` (10000) — the memory's size bound;
* ``--extender-max-waiting-requests`` (8) — filter/prioritize requests that may wait for their
  turn to compute; more are answered at once with a "busy" error
  (:mod:`kubescale.runtime.compute_turns`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, cast

from kubescale.base.flag_types import FlagValueError
from kubescale.base.go_time import parse_duration
from kubescale.coordination.eviction_memory import DEFAULT_MAX_ENTRIES
from kubescale.scheduling.policy.policy_flags import (
    PolicyGatedMode,
    add_policy_arguments,
    policy_from_args,
    policy_gated_mode,
)
from kubescale.scheduling.policy.policy_loading import DeschedulerPolicy

__all__ = [
    "DEFAULT_URL_PREFIX",
    "ExtenderConfigError",
    "ExtenderMode",
    "ExtenderSettings",
    "add_extender_arguments",
    "extender_settings_from_args",
]

ExtenderMode = PolicyGatedMode
DEFAULT_URL_PREFIX: Final = "/scheduler"
DEFAULT_MEMORY: Final = "10m"
DEFAULT_MAX_WAITING: Final = 8
"""kube-scheduler sends one filter per scheduling cycle per profile; 8 waiting 5,000-node
filters (about 100 ms each with their JSON, measured under a flood) stay under its 5 s
``httpTimeout`` on an unloaded core."""


class ExtenderConfigError(FlagValueError):
    """An extender flag value that does not make sense; the message names the flag."""


@dataclass(frozen=True, kw_only=True)
class ExtenderSettings:
    requested: ExtenderMode = "auto"
    """The ``--scheduler-extender`` flag as given."""
    policy: DeschedulerPolicy | None = None
    policy_origin: str = ""
    url_prefix: str = DEFAULT_URL_PREFIX
    eviction_memory: timedelta = timedelta(minutes=10)
    eviction_memory_entries: int = DEFAULT_MAX_ENTRIES
    max_waiting_requests: int = DEFAULT_MAX_WAITING

    @property
    def mode(self) -> ExtenderMode:
        """The on/off mode ``serve`` acts on: ``auto`` without a policy is ``false``."""
        return policy_gated_mode(self.requested, self.policy)

    @property
    def auto_off_reason(self) -> str | None:
        """Why ``--scheduler-extender auto`` does not serve it: no descheduler policy to keep
        pods off nodes for (``None``: not ``auto``, or a policy given)."""
        if self.requested != "auto" or self.policy is not None:
            return None
        return "no descheduler policy (--policy-config-file or --descheduler-policy)"

    @property
    def enabled(self) -> bool:
        return self.mode != "false"

    def route(self, verb: str) -> str:
        return f"{self.url_prefix.rstrip('/')}/{verb}"


def add_extender_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scheduler extender")
    group.add_argument(
        "--scheduler-extender",
        choices=("auto", "true", "false"),
        default="auto",
        help="serve the scheduler extender: auto = in a cluster or with --kubeconfig, when "
        "--policy-config-file (or --descheduler-policy) is given (default: %(default)s)",
    )
    add_policy_arguments(group)
    group.add_argument(
        "--extender-url-prefix",
        default=DEFAULT_URL_PREFIX,
        help="path of the extender's verbs: <prefix>/filter, <prefix>/prioritize "
        "(default: %(default)s)",
    )
    group.add_argument(
        "--extender-eviction-memory",
        default=DEFAULT_MEMORY,
        metavar="DURATION",
        help="how long a node is refused to the pods of an owner evicted from it; 0 turns it "
        f"off (default: {DEFAULT_MEMORY})",
    )
    group.add_argument(
        "--extender-eviction-memory-entries",
        type=int,
        default=DEFAULT_MAX_ENTRIES,
        help="most (owner, node) pairs remembered (default: %(default)s)",
    )
    group.add_argument(
        "--extender-max-waiting-requests",
        type=int,
        default=DEFAULT_MAX_WAITING,
        metavar="N",
        help="filter/prioritize requests that may wait while another computes; more are "
        "answered at once with a 'busy' error (default: %(default)s)",
    )


def extender_settings_from_args(args: argparse.Namespace) -> ExtenderSettings:
    prefix = str(args.extender_url_prefix)
    if not prefix.startswith("/") or " " in prefix or "?" in prefix:
        raise ExtenderConfigError(
            f"--extender-url-prefix must be a path starting with '/', got {prefix!r}"
        )
    try:
        memory = parse_duration(str(args.extender_eviction_memory))
    except argparse.ArgumentTypeError as err:
        raise ExtenderConfigError(f"--extender-eviction-memory: {err}") from None
    if memory < 0:
        raise ExtenderConfigError(
            f"--extender-eviction-memory must not be negative, got {args.extender_eviction_memory}"
        )
    if args.extender_eviction_memory_entries < 1:
        raise ExtenderConfigError(
            "--extender-eviction-memory-entries must be >= 1, got "
            f"{args.extender_eviction_memory_entries}"
        )
    max_waiting = int(args.extender_max_waiting_requests)
    if max_waiting < 0:
        raise ExtenderConfigError(
            f"--extender-max-waiting-requests must not be negative, got {max_waiting}"
        )
    source = policy_from_args(args, error=ExtenderConfigError)
    mode = cast(ExtenderMode, args.scheduler_extender)
    if mode == "true" and source.policy is None:
        raise ExtenderConfigError(
            "--scheduler-extender true needs --policy-config-file (or --descheduler-policy)"
        )
    return ExtenderSettings(
        requested=mode,
        policy=source.policy,
        policy_origin=source.origin,
        url_prefix=prefix,
        eviction_memory=timedelta(seconds=memory),
        eviction_memory_entries=int(args.extender_eviction_memory_entries),
        max_waiting_requests=max_waiting,
    )
