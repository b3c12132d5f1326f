"""The descheduler policy flags, read by the descheduler and by the scheduler extender.

The extender enforces the policy the descheduler applies (what it would evict a pod for, it
refuses to place the pod on), so both read the same flags, declared here once
(:func:`kubescale.base.flag_types.add_shared_argument` adds whichever declaration comes first):

* ``--policy-config-file`` (upstream's) — the ``DeschedulerPolicy`` file (a mounted ConfigMap);
* ``--descheduler-policy`` (kubescale's) — the ``DeschedulerPolicy`` itself, as YAML or JSON
  text: what a simulation scenario gives (``descheduler-policy: |`` and the document). The two
  are mutually exclusive.

The policy is read and validated once, when the settings are built; an invalid one is a
:class:`~kubescale.base.flag_types.FlagValueError` naming the flag and the field.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kubescale.base.flag_types import FlagValueError, add_shared_argument

from .fields import PolicyError
from .policy_loading import DeschedulerPolicy, load_policy, load_policy_file

__all__ = [
    "PolicyGatedMode",
    "PolicySource",
    "add_policy_arguments",
    "policy_from_args",
    "policy_gated_mode",
]

PolicyGatedMode = Literal["auto", "true", "false"]
"""A component that acts only with a policy: ``--descheduler``, ``--scheduler-extender``."""


@dataclass(frozen=True)
class PolicySource:
    """The policy the flags give, and where it came from (for logs)."""

    policy: DeschedulerPolicy | None
    origin: str
    """``--policy-config-file <path>``, ``--descheduler-policy`` or ``""`` (none given)."""


def add_policy_arguments(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    add_shared_argument(
        group,
        "--policy-config-file",
        default="",
        metavar="PATH",
        help="file with the DeschedulerPolicy (descheduler/v1alpha2), read by the descheduler "
        "and the scheduler extender",
    )
    add_shared_argument(
        group,
        "--descheduler-policy",
        default="",
        metavar="YAML",
        help="the DeschedulerPolicy itself as YAML or JSON text, instead of "
        "--policy-config-file (for simulation scenarios)",
    )


def policy_from_args(
    args: argparse.Namespace, *, error: type[FlagValueError] = FlagValueError
) -> PolicySource:
    """The policy ``--policy-config-file`` or ``--descheduler-policy`` gives; ``error`` names
    the flag (and the field of a bad policy)."""
    path_text = str(getattr(args, "policy_config_file", "") or "")
    inline = str(getattr(args, "descheduler_policy", "") or "")
    if path_text and inline.strip():
        raise error("--policy-config-file and --descheduler-policy are mutually exclusive")
    if path_text:
        try:
            return PolicySource(
                load_policy_file(Path(path_text)), f"--policy-config-file {path_text}"
            )
        except PolicyError as err:
            raise error(f"--policy-config-file: {err}") from None
    if inline.strip():
        try:
            return PolicySource(load_policy(inline, source=None), "--descheduler-policy")
        except PolicyError as err:
            raise error(f"--descheduler-policy: {err}") from None
    return PolicySource(None, "")


def policy_gated_mode(
    requested: PolicyGatedMode, policy: DeschedulerPolicy | None
) -> PolicyGatedMode:
    """The on/off mode ``serve`` acts on: ``auto`` without a policy is ``false``."""
    if requested == "auto" and policy is None:
        return "false"
    return requested
