"""Go's ``time`` package as upstream writes and reads it: ``time.Time.String()`` and
``time.Duration`` (the one parser and formatter of Go durations in kubescale).

:func:`go_time_string` — ``time.Time.String()`` without the monotonic suffix, i.e. layout
``2006-01-02 15:04:05.999999999 -0700 MST`` (fraction with trailing zeros dropped): the status
ConfigMap's ``time`` and ``last-updated`` annotation, the ``delete-machine`` annotation value.
(``metav1.Time`` is :func:`kubescale.base.times.format_time`.)

Times are shown in UTC (zone abbreviation ``UTC``), as a process running with ``TZ=UTC`` does.

:func:`parse_duration` — ``time.ParseDuration`` text (``10s``, ``1m30s``, ``500ms``, ``0``) in
seconds: flags, annotations, ``metav1.Duration`` fields. It raises
:class:`argparse.ArgumentTypeError` (so a flag's parse error is one line prefixed with the flag's
name; callers reading other fields catch it and name their field).
:func:`go_duration_string` — ``time.Duration.String()``-style text of a number of seconds
(``15m0s``, ``1h2m3s``, ``2.5s``), as status messages and metrics windows carry it.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime

__all__ = ["go_duration_string", "go_time_string", "parse_duration"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def go_time_string(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S")
    if utc.microsecond:
        text += "." + f"{utc.microsecond * 1000:09d}".rstrip("0")
    return text + " +0000 UTC"


def parse_duration(text: str) -> float:
    """A Go ``time.Duration`` string (``10s``, ``1m30s``, ``500ms``, ``0``) → seconds."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    sign = 1.0
    if value and value[0] in "+-":
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    pos, total = 0, 0.0
    while pos < len(value):
        match = _DURATION_PART.match(value, pos)
        if match is None:
            raise argparse.ArgumentTypeError(
                f"invalid duration {text!r} (want e.g. 10s, 1m30s, 500ms)"
            )
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (want e.g. 10s, 1m30s, 500ms)")
    return sign * total


def go_duration_string(seconds: float) -> str:
    """Go ``time.Duration`` text of ``seconds`` (``15m0s``, ``1h2m3s``, ``2.5s``, ``-1m0s``)."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    total = abs(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = ""
    if hours:
        text += f"{int(hours)}h"
    if hours or minutes:
        text += f"{int(minutes)}m"
    text += f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    return sign + text
