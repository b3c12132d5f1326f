"""Flags of the scheduler extender in ``kubescale serve``, and the settings built from them.

* ``--scheduler-extender auto|true|false`` — serve ``<prefix>/filter`` and
  ``<prefix>/prioritize`` on the TLS server (``auto``: when a descheduler policy is given with
  ``--policy-config-file``; the extender enforces that policy);
* ``--extender-url-prefix`` (``/scheduler``) — the path the KubeSchedulerConfiguration's
  ``urlPrefix`` ends with;
* ``--extender-eviction-memory`` (``10m``) — how long a node stays refused to the pods of an
  owner whose pod the descheduler evicted from it (0 turns the memory off);
* ``--extender-eviction-memory-entries`` (10000) — the memory's size bound.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal, cast

from kubescale.base.flag_types import parse_duration
from kubescale.controllers.descheduler.eviction_memory import DEFAULT_MAX_ENTRIES

__all__ = [
    "DEFAULT_URL_PREFIX",
    "ExtenderConfigError",
    "ExtenderMode",
    "ExtenderSettings",
    "add_extender_arguments",
    "extender_settings_from_args",
]

ExtenderMode = Literal["auto", "true", "false"]
DEFAULT_URL_PREFIX: Final = "/scheduler"
DEFAULT_MEMORY: Final = "10m"


class ExtenderConfigError(ValueError):
    """An extender flag value that does not make sense; the message names the flag."""


@dataclass(frozen=True, kw_only=True)
class ExtenderSettings:
    mode: ExtenderMode = "auto"
    url_prefix: str = DEFAULT_URL_PREFIX
    eviction_memory: timedelta = timedelta(minutes=10)
    eviction_memory_entries: int = DEFAULT_MAX_ENTRIES

    def enabled(self, *, policy_given: bool) -> bool:
        return self.mode == "true" or (self.mode == "auto" and policy_given)

    def route(self, verb: str) -> str:
        return f"{self.url_prefix.rstrip('/')}/{verb}"


def add_extender_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scheduler extender")
    group.add_argument(
        "--scheduler-extender",
        choices=("auto", "true", "false"),
        default="auto",
        help="serve the scheduler extender: auto = when --policy-config-file is given "
        "(default: %(default)s)",
    )
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
    return ExtenderSettings(
        mode=cast(ExtenderMode, args.scheduler_extender),
        url_prefix=prefix,
        eviction_memory=timedelta(seconds=memory),
        eviction_memory_entries=int(args.extender_eviction_memory_entries),
    )
