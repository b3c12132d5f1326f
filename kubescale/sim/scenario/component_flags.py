"""A scenario's flags for one kubescale component, read with that component's own serve flags.

``kubescale: {<component>: {flag: value, ...}}`` takes ``kubescale serve``'s flags of the
component without the dashes; each becomes ``--flag=value`` (booleans as ``true``/``false``) and
goes through the component's real argparse declarations, so a scenario and ``serve`` accept and
default exactly the same values. Flags that only make sense in ``serve`` are excluded by the
caller; any other name, and any bad value, raises the component's config error naming it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

__all__ = ["component_flag_names", "parse_component_flags"]

AddArguments = Callable[[argparse.ArgumentParser], None]


def _parser(add_arguments: AddArguments, error: type[ValueError]) -> argparse.ArgumentParser:
    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise error(message)

    parser = _Parser(add_help=False)
    add_arguments(parser)
    return parser


def component_flag_names(
    add_arguments: AddArguments, *, exclude: frozenset[str] = frozenset()
) -> frozenset[str]:
    """Every ``--flag`` the component declares, without the dashes, less ``exclude``."""
    parser = _parser(add_arguments, ValueError)
    names = {
        option[2:]
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--")
    }
    return frozenset(names - exclude)


def _flag_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_component_flags(
    flags: Mapping[str, Any],
    *,
    component: str,
    add_arguments: AddArguments,
    allowed: frozenset[str],
    error: type[ValueError],
) -> argparse.Namespace:
    """``flags`` parsed by the component's parser; ``error`` names an unknown flag or bad value."""
    argv = []
    for name, value in flags.items():
        if name not in allowed:
            raise error(
                f"{name}: unknown {component} flag (want one of: {', '.join(sorted(allowed))})"
            )
        argv.append(f"--{name}={_flag_text(value)}")
    return _parser(add_arguments, error).parse_args(argv)
