"""Parsers for flag values written the way upstream's Go components write them.

Each raises :class:`argparse.ArgumentTypeError` with a message that, prefixed by argparse with the
flag's name, makes one clear line.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable, Mapping

from kubescale.base.go_time import parse_duration


def positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration must be > 0, got {text!r}")
    return seconds


def parse_bool(text: str) -> bool:
    """Go ``strconv.ParseBool`` spellings."""
    lowered = text.strip().lower()
    if lowered in ("1", "t", "true", "y", "yes"):
        return True
    if lowered in ("0", "f", "false", "n", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (want true or false)")


def parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r} (want 0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} out of range 0-65535")
    return port


def parse_address(text: str) -> tuple[str | None, int]:
    """``host:port`` as Go's ``net.Listen`` takes it: ``:8944``, ``0.0.0.0:8944``, ``[::1]:8944``.

    An empty host means every interface and is returned as ``None``.
    """
    value = text.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or value[end + 1 : end + 2] != ":":
            raise argparse.ArgumentTypeError(f"invalid address {text!r} (want [ipv6]:port)")
        host, port_text = value[1:end], value[end + 2 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid address {text!r}: {host!r} is not an IPv6 address"
            ) from None
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"invalid address {text!r} (want host:port or :port)")
        if ":" in host:
            raise argparse.ArgumentTypeError(
                f"invalid address {text!r} (write IPv6 hosts in brackets: [::1]:8944)"
            )
    return (host or None), parse_port(port_text)


class FlagValueError(ValueError):
    """A flag value that parsed but does not make sense; the message names the flag.

    Each component's settings builder raises a subclass of it; ``serve`` and ``simulate`` turn
    it into one line on stderr (``serve``) or a scenario field error (``simulate``)."""


def add_shared_argument(
    container: argparse.ArgumentParser | argparse._ArgumentGroup, *names: str, **kwargs: object
) -> None:
    """Declare a flag that several components read (``--feature-gates``,
    ``--vpa-object-namespace`` ...): each declares it with the same definition, and whichever
    comes first on a parser adds it. A second, different definition is a programming error.
    """
    existing = container._option_string_actions.get(names[0])
    if existing is None:
        container.add_argument(*names, **kwargs)  # type: ignore[arg-type]
        return
    default = kwargs.get("default")
    if existing.default != default or set(existing.option_strings) != set(names):
        raise ValueError(f"flag {names[0]} declared twice with different definitions")


def add_bool_flag(group: argparse._ActionsContainer, flag: str, default: bool, text: str) -> None:
    """A boolean flag as Go's ``flag`` package takes it: ``--x`` (true), ``--x=false``,
    ``--x true``; the help ends with the default."""
    group.add_argument(
        flag,
        type=parse_bool,
        nargs="?",
        const=True,
        default=default,
        metavar="BOOL",
        help=f"{text} (default: {str(default).lower()})",
    )


def add_duration_flag(
    group: argparse._ActionsContainer,
    flag: str,
    default: str,
    text: str,
    *,
    parse: Callable[[str], float] = positive_duration,
) -> None:
    """A Go-duration flag read as seconds by ``parse`` (default: positive); the help ends with
    the default as written."""
    group.add_argument(
        flag,
        type=parse,
        default=parse(default),
        metavar="DURATION",
        help=f"{text} (default: {default})",
    )


def parse_feature_gates(
    flag: str,
    text: str,
    defaults: Mapping[str, bool],
    *,
    error: type[FlagValueError] = FlagValueError,
) -> dict[str, bool]:
    """A ``Gate=bool,...`` flag over ``defaults``, with component-base's error texts (missing
    value, unknown gate with the known ones, invalid bool); raises ``error`` naming ``flag``."""
    gates = dict(defaults)
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise error(f"{flag}: missing bool value for {name}")
        if name not in defaults:
            known = ", ".join(sorted(defaults))
            raise error(f"{flag}: unrecognized feature gate: {name} (known: {known})")
        try:
            gates[name] = parse_bool(value)
        except argparse.ArgumentTypeError:
            raise error(
                f"{flag}: invalid value of {name}={value.strip()}, err: invalid syntax"
            ) from None
    return gates
