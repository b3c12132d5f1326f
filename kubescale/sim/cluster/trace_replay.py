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
``requests``/``limits`` quantities (exact, via :mod:`kubescale.objects.quantities`) a scenario can
start a container with.
"""

from __future__ import annotations

import bisect
import csv
import io
import lzma
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Final, Literal, TextIO

from kubescale.objects.quantities import BINARY_SI, DECIMAL_SI, Quantity

from .usage_models import Usage, per_pod

__all__ = [
    "REPLICA_COLUMNS",
    "REQUIRED_COLUMNS",
    "ReplicaSeries",
    "SeriesSummary",
    "Trace",
    "TraceError",
    "TraceReplay",
    "TraceSeries",
    "load_replica_series",
    "load_trace",
    "scan_trace",
]

REQUIRED_COLUMNS: Final = ("timestamp", "workload", "container", "cpu_cores", "memory_bytes")
REPLICA_COLUMNS: Final = ("timestamp", "workload", "replicas")
"""The columns of a replica series file: how many replicas each workload ran from a time on."""
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


@dataclass(frozen=True)
class ReplicaSeries:
    """How many replicas one workload ran: ``counts[i]`` from ``times[i]`` on."""

    workload: str
    times: tuple[float, ...]
    counts: tuple[int, ...]

    def count_at(self, when: float) -> int:
        """The count of the last entry at or before ``when`` (the first one before it)."""
        position = bisect.bisect_right(self.times, when) - 1
        return self.counts[max(position, 0)]


@dataclass(frozen=True, eq=False)
class Trace:
    """The loaded series, and the trace time that simulation time 0 maps to (``start``)."""

    start: float
    end: float
    series: dict[tuple[str, str], TraceSeries] = field(repr=False)
    replicas: dict[str, ReplicaSeries] = field(default_factory=dict, repr=False)
    """The recorded replica counts per workload, when a replica series file was given."""

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


def load_trace(
    path: Path | str,
    *,
    workloads: set[str] | None = None,
    start: float | None = None,
    end: float | None = None,
    replica_file: Path | str | None = None,
) -> Trace:
    """Read a trace; keep the ``workloads`` given (all if ``None``) and samples in
    ``[start, end]`` (open ends if ``None``). ``Trace.start`` is ``start`` if given, else the
    earliest kept sample, so all series keep their alignment to one another. With
    ``replica_file``, ``Trace.replicas`` holds its series of the kept workloads."""
    path = Path(path)
    builders: dict[tuple[str, str], list[_Row]] = {}
    with _open_text(path) as text:
        reader = csv.reader(text)
        columns = _header(reader, path, REQUIRED_COLUMNS)
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
    replicas: dict[str, ReplicaSeries] = {}
    if replica_file is not None:
        replayed = {workload for workload, _ in series}
        replicas = {
            workload: counts
            for workload, counts in load_replica_series(replica_file).items()
            if workload in replayed
        }
    return Trace(
        start=first if start is None else start, end=last, series=series, replicas=replicas
    )


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
    scale_by_replicas: bool = False
    """The samples are one replica's usage while the workload ran the recorded number of
    replicas (the trace's replica series): the workload's total is sample × recorded count,
    shared among the running replicas when ``shared``."""
    _series: TraceSeries = field(init=False, repr=False, compare=False)
    _replicas: ReplicaSeries | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.hold not in ("previous", "linear"):
            raise ValueError(f"hold must be 'previous' or 'linear', not {self.hold!r}")
        object.__setattr__(self, "_series", self.trace.get(self.workload, self.container))
        recorded = self.trace.replicas.get(self.workload) if self.scale_by_replicas else None
        if self.scale_by_replicas and recorded is None:
            raise KeyError(f"the replica series has no counts for {self.workload}")
        object.__setattr__(self, "_replicas", recorded)

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        when = self.trace.start + self.time_offset + t
        sample = self._series.sample_at(when, hold=self.hold)
        factor = 1 if self._replicas is None else self._replicas.count_at(when)
        return per_pod(
            sample.cpu_cores * factor,
            sample.memory_bytes * factor,
            shared=self.shared,
            replicas=replicas,
        )


class TraceError(ValueError):
    """A trace or replica series file that breaks replay protocol v1, as one line naming the
    file and line: ``trace.csv:17: cpu_cores -0.5 is negative``."""


@dataclass(frozen=True)
class SeriesSummary:
    """What a strict pass over a trace learned of one (workload, container) series."""

    workload: str
    container: str
    first: float
    last: float
    samples: int
    interval: float | None
    """The series' sampling period: the most common time between two consecutive samples,
    in whole seconds (the shortest of equally common ones; ``None`` with one sample)."""
    provisioned: Usage | None
    """The first sample's provisioned CPU and memory, when it has both."""


def _number(
    row: list[str], column: int, name: str, where: str, *, optional: bool = False
) -> float | None:
    text = row[column].strip() if column < len(row) else ""
    if not text and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: {name} {text!r} is not a finite number")
    if value < 0 and name != "timestamp":
        raise TraceError(f"{where}: {name} {text} is negative")
    return value


def _header(reader: Iterator[list[str]], path: Path, required: tuple[str, ...]) -> dict[str, int]:
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(f"{path}:1: the file is empty (want a header row)") from None
    columns = {name.strip(): position for position, name in enumerate(header)}
    missing = [name for name in required if name not in columns]
    if missing:
        raise TraceError(
            f"{path}:1: missing column(s) {', '.join(missing)} (want {', '.join(required)})"
        )
    return columns


def scan_trace(path: Path | str) -> dict[tuple[str, str], SeriesSummary]:
    """Check a whole trace against replay protocol v1 and summarize each series.

    Strict where :func:`load_trace` is lenient, because a cluster built from the trace must not
    rest on a guess: the required columns are there, every number parses and is finite, usage
    and provisioned amounts are ≥ 0, and each (workload, container) series is in strictly
    increasing time order (rows of different series may interleave). The first problem raises
    :class:`TraceError` naming the file and line."""
    path = Path(path)
    first: dict[tuple[str, str], tuple[float, int]] = {}
    last: dict[tuple[str, str], tuple[float, int]] = {}
    counts: dict[tuple[str, str], int] = {}
    gaps: dict[tuple[str, str], Counter[int]] = {}
    provisioned: dict[tuple[str, str], Usage | None] = {}
    with _open_text(path) as text:
        reader = csv.reader(text)
        columns = _header(reader, path, REQUIRED_COLUMNS)
        at, name, box = columns["timestamp"], columns["workload"], columns["container"]
        cpu_at, memory_at = columns["cpu_cores"], columns["memory_bytes"]
        cpu_prov_at = columns.get(_CPU_PROVISIONED)
        memory_prov_at = columns.get(_MEMORY_PROVISIONED)
        width = max(columns.values()) + 1
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            where = f"{path}:{line}"
            if len(row) < width:
                raise TraceError(f"{where}: {len(row)} fields, the header has {width}")
            key = (row[name].strip(), row[box].strip())
            if not key[0] or not key[1]:
                raise TraceError(f"{where}: workload and container must not be empty")
            when = _number(row, at, "timestamp", where)
            _number(row, cpu_at, "cpu_cores", where)
            _number(row, memory_at, "memory_bytes", where)
            cpu_prov = (
                None
                if cpu_prov_at is None
                else _number(row, cpu_prov_at, _CPU_PROVISIONED, where, optional=True)
            )
            memory_prov = (
                None
                if memory_prov_at is None
                else _number(row, memory_prov_at, _MEMORY_PROVISIONED, where, optional=True)
            )
            assert when is not None
            previous = last.get(key)
            if previous is None:
                first[key] = (when, line)
                counts[key] = 0
                provisioned[key] = (
                    Usage(cpu_prov, memory_prov)
                    if cpu_prov is not None and memory_prov is not None
                    else None
                )
            else:
                if when <= previous[0]:
                    raise TraceError(
                        f"{where}: timestamp {row[at].strip()} of {key[0]}/{key[1]} is not after "
                        f"its previous sample (line {previous[1]}): rows must be in time order"
                    )
                gaps.setdefault(key, Counter())[round(when - previous[0])] += 1
            last[key] = (when, line)
            counts[key] += 1
    if not first:
        raise TraceError(f"{path}:2: the trace has no samples")
    return {
        key: SeriesSummary(
            workload=key[0],
            container=key[1],
            first=first[key][0],
            last=last[key][0],
            samples=counts[key],
            interval=_most_common(gaps.get(key)),
            provisioned=provisioned[key],
        )
        for key in sorted(first)
    }


def _most_common(gaps: Counter[int] | None) -> float | None:
    if not gaps:
        return None
    return float(min(gaps.items(), key=lambda item: (-item[1], item[0]))[0])


def load_replica_series(
    path: Path | str, *, known: set[str] | None = None, trace_name: str = "the trace"
) -> dict[str, ReplicaSeries]:
    """Read a replica series file (columns :data:`REPLICA_COLUMNS`): per workload, counts
    (integers ≥ 0) in strictly increasing time order. A workload not in ``known`` (the trace's
    workloads, when given) is an error naming its line, as is every other problem."""
    path = Path(path)
    entries: dict[str, tuple[list[float], list[int], list[int]]] = {}
    with _open_text(path) as text:
        reader = csv.reader(text)
        columns = _header(reader, path, REPLICA_COLUMNS)
        at, name, count_at = columns["timestamp"], columns["workload"], columns["replicas"]
        width = max(columns.values()) + 1
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            where = f"{path}:{line}"
            if len(row) < width:
                raise TraceError(f"{where}: {len(row)} fields, the header has {width}")
            workload = row[name].strip()
            if known is not None and workload not in known:
                raise TraceError(f"{where}: workload {workload!r} is not in {trace_name}")
            when = _number(row, at, "timestamp", where)
            text_count = row[count_at].strip()
            if not text_count.isdigit():
                raise TraceError(f"{where}: replicas {text_count!r} is not an integer ≥ 0")
            times, counts, lines = entries.setdefault(workload, ([], [], []))
            assert when is not None
            if times and when <= times[-1]:
                raise TraceError(
                    f"{where}: timestamp {row[at].strip()} of {workload} is not after its "
                    f"previous entry (line {lines[-1]}): rows must be in time order"
                )
            times.append(when)
            counts.append(int(text_count))
            lines.append(line)
    if not entries:
        raise TraceError(f"{path}:2: the replica series has no entries")
    return {
        workload: ReplicaSeries(workload=workload, times=tuple(times), counts=tuple(counts))
        for workload, (times, counts, _) in sorted(entries.items())
    }
