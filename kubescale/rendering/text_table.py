"""Aligned plain-text tables, as ``kubescale simulate`` and ``kubescale report`` print them.

Every line at most :data:`WIDTH` columns: a table wider than that shrinks its first (name) column,
names too long are shortened with ``…``. Column headers may carry their unit on a second line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "WIDTH",
    "Column",
    "clip",
    "fit_table",
    "format_duration",
    "format_number",
    "render_table",
]

WIDTH: Final = 120
_GAP: Final = "  "


@dataclass(frozen=True)
class Column:
    title: str
    unit: str = ""
    numeric: bool = True


def format_duration(seconds: float) -> str:
    """``1d02h03m``, ``2h30m``, ``5m30s``, ``45s`` — the largest units that matter."""
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"


def format_number(value: float | None, decimals: int, scale: float = 1.0) -> str:
    """``value / scale`` at fixed decimals (``-0`` shown as ``0``), ``-`` for none."""
    if value is None:
        return "-"
    text = f"{value / scale:.{decimals}f}"
    return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text


def render_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int = WIDTH
) -> list[str]:
    """Aligned lines; the first (name) column shrinks when the table would exceed ``width``.
    The unit line is left out when no column has a unit."""
    widths = [
        max([len(c.title), len(c.unit)] + [len(row[i]) for row in rows])
        for i, c in enumerate(columns)
    ]
    overflow = sum(widths) + len(_GAP) * (len(columns) - 1) - width
    if overflow > 0:
        widths[0] = max(len(columns[0].title), widths[0] - overflow)

    def line(cells: Sequence[str]) -> str:
        parts = []
        for cell, size, column in zip(cells, widths, columns, strict=True):
            text = cell if len(cell) <= size else cell[: size - 1] + "…"
            parts.append(text.rjust(size) if column.numeric else text.ljust(size))
        return _GAP.join(parts).rstrip()

    units = [line([c.unit for c in columns])] if any(c.unit for c in columns) else []
    return [line([c.title for c in columns]), *units, *[line(row) for row in rows]]


def fit_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], *, width: int = WIDTH
) -> list[str]:
    """:func:`render_table`, and when the table is still wider than ``width`` with its name
    column shrunk to its title: its columns split over several tables, one under the other
    (a blank line between), each led by the name column — every column shown, none cut off at
    the edge (``kubescale report`` lost its last columns to a cut at 120; issue 32.6)."""
    lines = render_table(columns, rows, width=width)
    if len(columns) <= 2 or all(len(line) <= width for line in lines):
        return lines
    groups: list[list[int]] = []
    current = [0]
    for index in range(1, len(columns)):
        trial = [*current, index]
        if len(current) > 1 and _widest(columns, rows, trial, width) > width:
            groups.append(current)
            current = [0, index]
        else:
            current = trial
    groups.append(current)
    fitted: list[str] = []
    for group in groups:
        if fitted:
            fitted.append("")
        fitted += _subtable(columns, rows, group, width)
    return fitted


def _subtable(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], group: Sequence[int], width: int
) -> list[str]:
    return render_table(
        [columns[i] for i in group], [[row[i] for i in group] for row in rows], width=width
    )


def _widest(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], group: Sequence[int], width: int
) -> int:
    return max(len(line) for line in _subtable(columns, rows, group, width))


def clip(line: str, width: int = WIDTH) -> str:
    """``line`` cut to ``width`` columns with a trailing ``…``."""
    return line if len(line) <= width else line[: width - 1] + "…"
