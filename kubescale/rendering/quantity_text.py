"""Quantities as people read them: Kubernetes' notation, binary units for memory.

Shared by the simulator's summary and decision log (:mod:`kubescale.sim.scenario.decision_log`)
and by the VPA updater's reasons (why it evicts or resizes a pod: a request below the lower
bound, in the same units). Memory reads in KiB/MiB/GiB, CPU in millicores below a core.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["apart", "human_bytes", "human_cores"]


def human_bytes(value: float | None, decimals: int | None = None) -> str:
    """``362.6Mi``, ``1.50Gi``, ``512Ki`` — binary units, three significant digits or so
    (``decimals``: that many after the point instead)."""
    if value is None:
        return "–"
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if abs(value) >= size:
            scaled = value / size
            if decimals is not None:
                return f"{scaled:.{decimals}f}{suffix}"
            return f"{scaled:.2f}{suffix}" if scaled < 10 else f"{scaled:.1f}{suffix}"
    return f"{value:.{decimals or 0}f}B"


def human_cores(value: float | None, decimals: int | None = None) -> str:
    """``126m`` below a core, ``1.50`` cores above, decimal SI past a thousand (``100G``: the
    all but unbounded upper bound of a VPA with few samples) — Kubernetes' own notation
    (``decimals``: that many more digits)."""
    if value is None:
        return "–"
    if abs(value) < 1:
        if decimals:
            return f"{value * 1000:.{decimals}f}m"
        return f"{round(value * 1000)}m"
    for suffix, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            if decimals:
                return f"{value / size:.{decimals + 2}f}{suffix}"
            return f"{value / size:.3g}{suffix}"
    return f"{value:.{2 + (decimals or 0)}f}"


def apart(
    first: float, second: float, human: Callable[[float | None, int | None], str]
) -> tuple[str, str]:
    """Both values as ``human`` writes them, with more decimals until the texts differ when the
    values do ("512.0Mi below the lower bound 512.0Mi" said nothing; issue 32.6)."""
    texts = human(first, None), human(second, None)
    decimals = 1
    while texts[0] == texts[1] and first != second and decimals <= 15:
        texts = human(first, decimals), human(second, decimals)
        decimals += 1
    return texts
