"""``kubescale serve``: the flags of the process and of every registered component, the
components to run, and the process (:func:`kubescale.runtime.process.serve`) until SIGTERM.

A component is enabled by its on/off flag, named like the component (``--webhook``,
``--vpa-recommender``, ``--vpa-updater`` ...): ``auto`` runs it in a cluster
(``$KUBERNETES_SERVICE_HOST`` set) or with ``--kubeconfig``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from kubescale.base.clock import RealClock
from kubescale.base.logs import component_logger, configure_logging
from kubescale.cli.serve_config import (
    ConfigError,
    ServeConfig,
    add_serve_arguments,
    serve_config_from_args,
)
from kubescale.components import REGISTRY
from kubescale.kube.config_loading import SERVICE_HOST_ENV
from kubescale.runtime import event_loop
from kubescale.runtime.component import ConfiguredToRun, EnabledComponent, LoopSpec
from kubescale.runtime.process import Server, serve

__all__ = ["LoopSpec", "Server", "add_arguments", "default_components", "run", "serve"]

log = component_logger("serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_serve_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        config = serve_config_from_args(args)
    except ConfigError as exc:
        sys.stderr.write(f"kubescale serve: error: {exc}\n")
        return 2
    configure_logging(level=config.log_level, fmt=config.log_format)
    for flag in config.ignored_upstream_flags:
        log.warning("accepted for compatibility with upstream and ignored: %s", flag)
    return event_loop.run(serve(config, clock=RealClock(), components=default_components(config)))


def default_components(
    config: ServeConfig, *, environ: Mapping[str, str] | None = None
) -> list[EnabledComponent]:
    """The registered components this ``serve`` runs: each unless its on/off flag says no
    (``auto``: only in a cluster — ``$KUBERNETES_SERVICE_HOST`` set — or with
    ``--kubeconfig``)."""
    env = os.environ if environ is None else environ
    if config.kubeconfig is not None:
        where = "--kubeconfig given"
    elif env.get(SERVICE_HOST_ENV):
        where = "in a cluster"
    else:
        where = ""
    enabled: list[EnabledComponent] = []
    for spec in REGISTRY:
        settings = config.components[spec.name]
        mode = settings.mode
        runs = mode == "true" or (mode == "auto" and bool(where))
        why = _why(spec.mode_flag, settings, where)
        log.info("%s %s: %s", spec.title, "runs" if runs else "is off", why)
        if runs:
            enabled.append(EnabledComponent(spec, settings))
    return enabled


def _why(flag: str, settings: Any, where: str) -> str:
    """Why a component runs or not, in the words of its flags (the first lines of the log)."""
    off_reason = settings.auto_off_reason if isinstance(settings, ConfiguredToRun) else None
    if settings.mode == "false" and off_reason is not None:
        return f"--{flag} auto, but {off_reason}"
    if settings.mode in ("true", "false"):
        return f"--{flag} {settings.mode}"
    return (
        f"--{flag} auto, {where}"
        if where
        else f"--{flag} auto, not in a cluster and no --kubeconfig"
    )
