"""The ``kubescale`` section of a scenario: which registered components run, with which flags.

``kubescale: {<component>: {flag: value, ...}}`` names components of the registry
(:mod:`kubescale.components`) and gives each ``kubescale serve``'s flags of that component
without the dashes. They go through the component's own flag declarations and settings builder
(:mod:`.component_flags`), so a scenario and ``serve`` accept and default exactly the same
values. Refused: the component's on/off flag (the section decides: it is ``true``) and its
``serve_only_flags`` (what means nothing without a real cluster). The environment is empty in
a run (no ``$NAMESPACE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubescale.base.flag_types import FlagValueError
from kubescale.components import REGISTRY, by_name
from kubescale.runtime.component import ComponentSpec, EnabledComponent

from .component_flags import component_flag_names, parse_component_flags

__all__ = [
    "component_names",
    "component_settings",
    "enabled_components",
    "scenario_flags",
    "validate_flags",
]


def component_names() -> list[str]:
    return sorted(spec.name for spec in REGISTRY)


def scenario_flags(spec: ComponentSpec[Any]) -> frozenset[str]:
    """The flag names (without dashes) a scenario may give ``spec``."""
    return component_flag_names(
        spec.add_arguments, exclude=spec.serve_only_flags | {spec.mode_flag}
    )


def component_settings(spec: ComponentSpec[Any], flags: Mapping[str, Any]) -> Any:
    """The settings a scenario's ``flags`` give ``spec`` (:class:`FlagValueError` names a bad
    flag)."""
    args = parse_component_flags(
        flags,
        component=spec.name,
        add_arguments=spec.add_arguments,
        allowed=scenario_flags(spec),
        error=FlagValueError,
    )
    # the section enables the component: its on/off flag is "true", so settings that need
    # another flag when on (the descheduler's policy) say so when the scenario is validated
    setattr(args, spec.mode_flag.replace("-", "_"), "true")
    return spec.settings(args, {})


def validate_flags(name: str, flags: Mapping[str, Any], *, path: str) -> list[str]:
    """Problems with a component's scenario flags, each ``"<path>: <message>"``."""
    spec = by_name(name)
    if spec is None:
        return [f'{path}: unknown kubescale component "{name}"']
    try:
        component_settings(spec, flags)
    except FlagValueError as exc:
        return [f"{path}: {exc}"]
    return []


def enabled_components(section: Mapping[str, Mapping[str, Any]]) -> list[EnabledComponent]:
    """The components a (validated) section enables, in name order, with their settings."""
    enabled: list[EnabledComponent] = []
    for name in sorted(section):
        spec = by_name(name)
        if spec is None:
            raise ValueError(f"unknown kubescale component {name!r}")
        enabled.append(EnabledComponent(spec, component_settings(spec, section[name])))
    return enabled
