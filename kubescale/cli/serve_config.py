"""Flags of ``kubescale serve``: the process's own (:mod:`kubescale.runtime.process_config`) and
every registered component's (:mod:`kubescale.components`), and the settings built from them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kubescale.base.flag_types import FlagValueError
from kubescale.components import REGISTRY
from kubescale.runtime.process_config import (
    ConfigError,
    ProcessConfig,
    add_process_arguments,
    process_config_from_args,
)

__all__ = ["ConfigError", "ServeConfig", "add_serve_arguments", "serve_config_from_args"]


@dataclass(frozen=True, kw_only=True)
class ServeConfig(ProcessConfig):
    """Settings of the ``serve`` command, validated once at start."""

    components: Mapping[str, Any] = field(default_factory=dict)
    """Each registered component's settings, by name (:mod:`kubescale.components`)."""


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``serve`` flags on ``parser``."""
    add_process_arguments(parser)
    for spec in REGISTRY:
        spec.add_arguments(parser)


def serve_config_from_args(args: argparse.Namespace) -> ServeConfig:
    """Build and cross-check the settings; raises :class:`ConfigError` naming the flag."""
    process = process_config_from_args(args)
    components: dict[str, Any] = {}
    for spec in REGISTRY:
        try:
            components[spec.name] = spec.settings(args, os.environ)
        except FlagValueError as exc:
            raise ConfigError(str(exc)) from None
    values = {f.name: getattr(process, f.name) for f in fields(ProcessConfig)}
    return ServeConfig(**values, components=components)
