"""``--dry-run``: every loop that returns plans decides and prints them, executing nothing.

The name and default are upstream descheduler's (``--dry-run``, false); in kubescale one flag
serves every system that declares it (the VPA recommender and updater, the descheduler, the
HPA controller, the cluster autoscaler): each declares it
through :func:`add_dry_run_flag`, the same definition, and the first declaration on a parser
adds it (:func:`~kubescale.base.flag_types.add_shared_argument`). Each intent is logged as one
line ``dry-run <actor>: <verb> <resource> <namespace>/<name> ...``
(:func:`~kubescale.plans.intents.describe`), on stderr with the other logs.
"""

from __future__ import annotations

import argparse

from kubescale.base.flag_types import add_shared_argument, parse_bool

__all__ = ["add_dry_run_flag"]


def add_dry_run_flag(container: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Declare ``--dry-run`` (shared by every system that reads it)."""
    add_shared_argument(
        container,
        "--dry-run",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="decide and log each loop's plan (descheduler, VPA recommender, VPA updater, HPA "
        "controller, cluster autoscaler) "
        "without executing it: nothing is written (default: false)",
    )
