"""Recorded usage traces (CSV, plain or xz) and the model that replays them.

CSV format (a header row names the columns; their order is free, extra columns are ignored):

==========================  ========  ====================================================
column                      required  meaning
==========================  ========  ====================================================
``timestamp``               yes       Unix seconds (integer or decimal) of the sample
``workload``                yes       the workload the sample belongs to
``container``               yes       the container within the workload
``cpu_cores``               yes       CPU used, in cores
``memory_bytes``            yes       memory used, in bytes
``cpu_provisioned_cores``   no        what the recorded system had provisioned (cores)
``memory_provisioned_bytes`` no       likewise, bytes
==========================  ========  ====================================================

Rows may come in any order; each (workload, container) series is sorted by time, and of two
samples with the same timestamp the later row wins. A path ending in ``.xz`` is decompressed on
the fly. ``load_trace`` keeps only the rows of the wanted workloads and time range, testing the
workload column before converting any number, so picking a few VMs out of the 3.7-million-row
Bitbrains month costs one pass over the file (about 3 s), not the memory of all of it.

Replay: :class:`TraceReplay` answers for simulation time ``t`` with the sample of trace time
``trace.start + time_offset + t`` — the last sample at or before it (``hold="previous"``, what a
monitoring system showing 5-minute averages would have shown), or the straight line between the
two samples around it (``hold="linear"``). At a sample's own time both give the sample's values
exactly. Before a series' first sample its first sample holds; after its last, the last.

The provisioned columns are the operator's hand-set sizes of the recorded system:
:meth:`Trace.provisioned` gives them and :meth:`Trace.initial_resources` turns them into the
``requests``/``limits`` quantities (exact, via :mod:`kubescale.kube.quantities`) a scenario can
start a container with.
"""

from __future__ import annotations

import bisect
import csv
import io
import lzma
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Final, Literal, TextIO

from kubescale.kube.quantities import BINARY_SI, DECIMAL_SI, Quantity

from .usage_models import Usage, per_pod

__all__ = ["REQUIRED_COLUMNS", "Trace", "TraceReplay", "TraceSeries", "load_trace"]

REQUIRED_COLUMNS: Final = ("timestamp", "workload", "container", "cpu_cores", "memory_bytes")
_CPU_PROVISIONED: Final = "cpu_provisioned_cores"
_MEMORY_PROVISIONED: Final = "memory_provisioned_bytes"

Hold = Literal["previous", "linear"]


@dataclass(frozen=True)
class TraceSeries:
    """The samples of one (workload, container), sorted by time."""

    workload: str
    container: str
    times: tuple[float, ...]
    cpu_cores: tuple[float, ...]
    memory_bytes: tuple[float, ...]
    cpu_provisioned_cores: tuple[float | None, ...]
    memory_provisioned_bytes: tuple[float | None, ...]

    def __len__(self) -> int:
        return len(self.times)

    def sample_at(self, when: float, *, hold: Hold = "previous") -> Usage:
        """The usage at trace time ``when`` (see the module docstring)."""
        times = self.times
        position = bisect.bisect_right(times, when) - 1
        if position < 0:
            return Usage(self.cpu_cores[0], self.memory_bytes[0])
        if hold == "linear" and position + 1 < len(times) and times[position] != when:
            before, after = times[position], times[position + 1]
            share = (when - before) / (after - before)
            return Usage(
                self.cpu_cores[position]
                + (self.cpu_cores[position + 1] - self.cpu_cores[position]) * share,
                self.memory_bytes[position]
                + (self.memory_bytes[position + 1] - self.memory_bytes[position]) * share,
            )
        return Usage(self.cpu_cores[position], self.memory_bytes[position])


@dataclass(frozen=True, eq=False)
class Trace:
    """The loaded series, and the trace time that simulation time 0 maps to (``start``)."""

    start: float
    end: float
    series: dict[tuple[str, str], TraceSeries] = field(repr=False)

    def workloads(self) -> list[str]:
        return sorted({workload for workload, _ in self.series})

    def containers(self, workload: str) -> list[str]:
        return sorted(container for name, container in self.series if name == workload)

    def get(self, workload: str, container: str) -> TraceSeries:
        found = self.series.get((workload, container))
        if found is None:
            raise KeyError(f"the trace has no samples for {workload}/{container}")
        return found

    def provisioned(self, workload: str, container: str) -> Usage | None:
        """The provisioned (cpu, memory) of the series' first sample that has both, if any."""
        series = self.get(workload, container)
        for cpu, memory in zip(
            series.cpu_provisioned_cores, series.memory_provisioned_bytes, strict=True
        ):
            if cpu is not None and memory is not None:
                return Usage(cpu, memory)
        return None

    def initial_resources(self, workload: str, container: str) -> dict[str, str] | None:
        """``{"cpu": ..., "memory": ...}`` quantities of :meth:`provisioned` (cpu to the
        millicore, memory to the byte, upwards), for a container's requests or limits."""
        amount = self.provisioned(workload, container)
        if amount is None:
            return None
        millicores = math.ceil(Fraction(amount.cpu_cores) * 1000)
        memory = math.ceil(Fraction(amount.memory_bytes))
        return {
            "cpu": Quantity.from_milli(millicores, DECIMAL_SI).to_json(),
            "memory": Quantity.from_int(memory, BINARY_SI).to_json(),
        }


_Row = tuple[float, int, float, float, float | None, float | None]
"""A kept sample: time, line number, cpu, memory, provisioned cpu and memory."""


def _open_text(path: Path) -> TextIO:
    if path.suffix == ".xz":
        return io.TextIOWrapper(lzma.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def _optional_float(row: list[str], column: int | None) -> float | None:
    if column is None or column >= len(row) or not row[column].strip():
        return None
    return float(row[column])


def _rows(reader: Iterator[list[str]], path: Path) -> tuple[dict[str, int], Iterator[list[str]]]:
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError(f"{path}: the trace is empty (no header row)") from None
    columns = {name.strip(): position for position, name in enumerate(header)}
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    if missing:
        raise ValueError(f"{path}: the trace lacks the column(s) {', '.join(missing)}")
    return columns, reader


def load_trace(
    path: Path | str,
    *,
    workloads: set[str] | None = None,
    start: float | None = None,
    end: float | None = None,
) -> Trace:
    """Read a trace; keep the ``workloads`` given (all if ``None``) and samples in
    ``[start, end]`` (open ends if ``None``). ``Trace.start`` is ``start`` if given, else the
    earliest kept sample, so all series keep their alignment to one another."""
    path = Path(path)
    builders: dict[tuple[str, str], list[_Row]] = {}
    with _open_text(path) as text:
        columns, reader = _rows(csv.reader(text), path)
        at, name, box = columns["timestamp"], columns["workload"], columns["container"]
        cpu_at, memory_at = columns["cpu_cores"], columns["memory_bytes"]
        cpu_prov_at, memory_prov_at = (
            columns.get(_CPU_PROVISIONED),
            columns.get(_MEMORY_PROVISIONED),
        )
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            if workloads is not None and row[name] not in workloads:
                continue
            try:
                when = float(row[at])
                if (start is not None and when < start) or (end is not None and when > end):
                    continue
                sample = (
                    when,
                    line,
                    float(row[cpu_at]),
                    float(row[memory_at]),
                    _optional_float(row, cpu_prov_at),
                    _optional_float(row, memory_prov_at),
                )
            except (ValueError, IndexError) as exc:
                raise ValueError(f"{path}:{line}: not a valid sample ({exc})") from None
            builders.setdefault((row[name], row[box]), []).append(sample)
    series: dict[tuple[str, str], TraceSeries] = {}
    for key in sorted(builders):
        deduplicated: dict[float, _Row] = {}
        for sample in sorted(builders[key]):  # by time, then by line: the later duplicate wins
            deduplicated[sample[0]] = sample
        kept = list(deduplicated.values())
        series[key] = TraceSeries(
            workload=key[0],
            container=key[1],
            times=tuple(s[0] for s in kept),
            cpu_cores=tuple(s[2] for s in kept),
            memory_bytes=tuple(s[3] for s in kept),
            cpu_provisioned_cores=tuple(s[4] for s in kept),
            memory_provisioned_bytes=tuple(s[5] for s in kept),
        )
    if not series:
        raise ValueError(f"{path}: no samples matched the workloads and time range asked for")
    first = min(s.times[0] for s in series.values())
    last = max(s.times[-1] for s in series.values())
    return Trace(start=first if start is None else start, end=last, series=series)


@dataclass(frozen=True)
class TraceReplay:
    """A :class:`~kubescale.sim.cluster.usage_models.UsageModel` replaying one series of a trace.

    Every pod of the workload gets the series' values (the recorded system's one instance per
    pod), or its share of them when ``shared`` (the recording was the whole service's load).
    """

    trace: Trace
    workload: str
    container: str
    time_offset: float = 0.0
    hold: Hold = "previous"
    shared: bool = False
    _series: TraceSeries = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.hold not in ("previous", "linear"):
            raise ValueError(f"hold must be 'previous' or 'linear', not {self.hold!r}")
        object.__setattr__(self, "_series", self.trace.get(self.workload, self.container))

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        sample = self._series.sample_at(self.trace.start + self.time_offset + t, hold=self.hold)
        return per_pod(sample.cpu_cores, sample.memory_bytes, shared=self.shared, replicas=replicas)
