"""``kubescale serve --help`` without importing the systems (issue 32 leftovers, 32.6).

``serve`` declares the flags of every registered component, and declaring them imports every
system (:mod:`kubescale.components`): 1.5–3 s of CPU for a help text. The help is therefore
drawn from a catalogue of the flags — each argument group's title and, per flag, its option
strings, its argument text and its help text with the defaults already filled in — stored
beside this module (``serve_flags.json``) and declared on the parser for display only: argparse
formats it for the terminal as it would the real parser. ``tests/cli/test_serve_help.py``
holds the catalogue to the real parser's help, byte for byte, and regenerates it
(``python -m tests.cli.test_serve_help``) when a flag changes.

This module imports argparse and json only; :func:`catalogue_of` reads any parser.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Final, TypedDict

__all__ = ["CATALOGUE_PATH", "Flag", "Group", "add_arguments", "catalogue_of", "load_catalogue"]

CATALOGUE_PATH: Final = Path(__file__).with_name("serve_flags.json")


class Flag(TypedDict):
    """One flag as ``--help`` shows it."""

    options: list[str]
    args: str
    """The argument text after the flag (``SECONDS``, ``[true|false]``); ``""``: no value."""
    help: str
    """The help text, ``%(default)s`` and the like already filled in."""
    required: bool


class Group(TypedDict):
    title: str
    flags: list[Flag]


def catalogue_of(parser: argparse.ArgumentParser) -> list[Group]:
    """The flags of ``parser`` by argument group, as its ``--help`` shows them (the ``-h`` flag,
    which every parser adds, left out)."""
    formatter = parser._get_formatter()
    groups: list[Group] = []
    for group in parser._action_groups:
        flags: list[Flag] = []
        for action in group._group_actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            args = "" if action.nargs == 0 else formatter._format_args(action, action.dest.upper())
            text = formatter._expand_help(action) if action.help else ""
            flags.append(
                Flag(
                    options=list(action.option_strings),
                    args=args,
                    help=text,
                    required=bool(action.required),
                )
            )
        groups.append(Group(title=group.title or "", flags=flags))
    return groups


def load_catalogue() -> list[Group]:
    """The stored catalogue of ``serve``'s flags."""
    data: list[Group] = json.loads(CATALOGUE_PATH.read_text(encoding="utf-8"))
    return data


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``serve``'s flags on ``parser`` for ``--help`` only: no types, no checks."""
    by_title: dict[str, Any] = {group.title or "": group for group in parser._action_groups}
    for group in load_catalogue():
        target = by_title.get(group["title"])
        if target is None:
            target = parser.add_argument_group(group["title"])
            by_title[group["title"]] = target
        for flag in group["flags"]:
            text = flag["help"].replace("%", "%%")
            if flag["args"]:
                target.add_argument(
                    *flag["options"], metavar=flag["args"], help=text, required=flag["required"]
                )
            else:
                target.add_argument(*flag["options"], action="store_true", help=text)
