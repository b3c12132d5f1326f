"""A report as a JSON file: sorted keys, one stable text for one report.

Shared by the simulator's report and the live cluster's (``kubescale report -o json``).

The same report always gives the same bytes: keys are sorted, floats are written as Python's
shortest round-tripping ``repr`` (a report's values are already rounded to fixed decimals by
its builder), non-finite numbers are refused, and the file ends
with a newline. Objects are indented one key per line for reading and diffing, but arrays of plain
values — the per-step columns, thousands long — stay on one line each, so a day at a one-minute
step is a file of a few hundred lines rather than a million.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["dumps_report", "write_json_report"]

_INDENT = "  "


def _scalar(value: Any) -> str:
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _encode(value: Any, depth: int, out: list[str]) -> None:
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = _INDENT * (depth + 1)
        out.append("{\n")
        for position, key in enumerate(sorted(value)):
            if not isinstance(key, str):
                raise TypeError(f"report keys must be strings, got {key!r}")
            out.append(f"{inner}{_scalar(key)}: ")
            _encode(value[key], depth + 1, out)
            out.append(",\n" if position < len(value) - 1 else "\n")
        out.append(f"{_INDENT * depth}}}")
    elif isinstance(value, list | tuple):
        if all(_is_scalar(item) for item in value):
            # the C encoder writes a whole column at once, exactly as item by item
            out.append(json.dumps(value, allow_nan=False, ensure_ascii=False))
            return
        inner = _INDENT * (depth + 1)
        out.append("[\n")
        for position, item in enumerate(value):
            out.append(inner)
            _encode(item, depth + 1, out)
            out.append(",\n" if position < len(value) - 1 else "\n")
        out.append(f"{_INDENT * depth}]")
    elif _is_scalar(value):
        out.append(_scalar(value))
    else:
        raise TypeError(f"a report holds only JSON values, got {type(value).__name__}")


def dumps_report(report: dict[str, Any]) -> str:
    """The JSON text of ``report`` (valid JSON; ``json.loads`` gives ``report`` back)."""
    out: list[str] = []
    _encode(report, 0, out)
    out.append("\n")
    return "".join(out)


def write_json_report(report: dict[str, Any], path: Path) -> None:
    """Write ``report`` to ``path`` as UTF-8 JSON (see :func:`dumps_report`)."""
    path.write_text(dumps_report(report), encoding="utf-8")
