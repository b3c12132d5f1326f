"""Flags every VPA part reads: which VPA objects count, and the VPA feature gates.

Upstream's admission controller, recommender and updater each declare ``--vpa-object-namespace``,
``--ignored-vpa-object-namespaces`` and ``--feature-gates``; in one kubescale process they are one
flag each, declared here once for all three (:func:`kubescale.base.flag_types.add_shared_argument`
adds whichever declaration comes first), so a scenario or ``serve`` gives every part the same
value.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Final

from kubescale.base.flag_types import FlagValueError, add_shared_argument
from kubescale.base.flag_types import parse_feature_gates as parse_gates

__all__ = [
    "VPA_FEATURE_GATES",
    "add_feature_gates_argument",
    "add_vpa_namespace_arguments",
    "parse_feature_gates",
    "parse_namespaces",
    "vpa_namespaces",
]

VPA_FEATURE_GATES: Final[Mapping[str, bool]] = {
    "CPUStartupBoost": False,
    "InPlace": False,
    "PerVPAConfig": False,
}
"""``pkg/features/versioned_features.go``: every VPA gate is alpha and off by default."""


def add_vpa_namespace_arguments(group: argparse._ArgumentGroup) -> None:
    add_shared_argument(
        group,
        "--vpa-object-namespace",
        default="",
        help="only VPA objects in this namespace are used (default: all)",
    )
    add_shared_argument(
        group,
        "--ignored-vpa-object-namespaces",
        default="",
        help="comma-separated namespaces whose VPA objects are ignored",
    )


def add_feature_gates_argument(group: argparse._ArgumentGroup) -> None:
    add_shared_argument(
        group,
        "--feature-gates",
        default="",
        help="VPA feature gates, e.g. InPlace=true,PerVPAConfig=true "
        f"(known: {', '.join(sorted(VPA_FEATURE_GATES))}; all off by default)",
    )


def parse_namespaces(text: str) -> tuple[str, ...]:
    """A comma-separated namespace list, blanks dropped."""
    return tuple(ns for ns in (part.strip() for part in text.split(",")) if ns)


def vpa_namespaces(args: argparse.Namespace) -> tuple[str, tuple[str, ...]]:
    """``(--vpa-object-namespace, --ignored-vpa-object-namespaces)``, mutually exclusive."""
    selected = str(args.vpa_object_namespace).strip()
    ignored = parse_namespaces(str(args.ignored_vpa_object_namespaces))
    if selected and ignored:
        raise FlagValueError(
            "--vpa-object-namespace and --ignored-vpa-object-namespaces are mutually exclusive "
            "and can't be set together."
        )
    return selected, ignored


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``--feature-gates`` (``Gate=bool,...``) over the VPA gates' defaults."""
    return parse_gates("--feature-gates", text, VPA_FEATURE_GATES)
