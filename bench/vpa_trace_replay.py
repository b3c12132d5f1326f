"""Replay a real trace through kubescale's VPA recommender model (replay protocol v1).

The protocol is ``../shared/traces/README.md``: one workload = one Deployment with one
container whose requests equal limits; per 5-minute sample (weighing 5/60 h), in time order:

1. score the sample against the request applied *before* it (requested and slack hours, an OOM
   sample when memory > applied memory, a throttled sample when CPU > applied CPU);
2. feed it at its timestamp: CPU ``min(usage, applied CPU)``; memory as a usage sample, or —
   for an OOM sample — as an OOM with the applied memory as the request;
3. compute the recommendation at the first sample, when >= 1 h has passed since the last
   computation, and right after an OOM;
4. apply the target (both resources, only if it differs and both are > 0) when the applied CPU
   or memory is outside [lowerBound, upperBound], the sample was an OOM, or >= 12 h have passed
   since the last update (the workload's first sample counts as one) and
   ``sum(|target - applied| / applied)`` over CPU and memory is >= 0.1.

Upstream VPA 1.8 defaults throughout. CPU usage in cores becomes a ResourceAmount as the model
converts cores, ``int64(cores * 1000)``; the applied CPU is kept in millicores and compared in
cores (``millicores / 1000``).

The recommender is driven through the model API directly: one ``ContainerState`` feeding one
``AggregateContainerState`` per workload, the estimator chain of ``recommend_for_vpa`` for a
single container. The "provisioned" policy scores the provisioned amounts of each row and never
updates.

Usage (from the repository root)::

    .venv/bin/python bench/vpa_trace_replay.py                       # all 500 workloads
    .venv/bin/python bench/vpa_trace_replay.py --workloads vm-001-vm-020 \\
        --compare ../shared/traces/upstream-vpa-replay-2013-07-vm001-020.csv.xz

The trace is read straight from the ``.csv.xz`` and streamed workload by workload.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import lzma
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState, ContainerState
from kubescale.controllers.vpa.model.estimators import RecommenderConfig, estimate
from kubescale.controllers.vpa.model.go_math import go_float_to_int64

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO.parent / "shared" / "traces" / "bitbrains-rnd-2013-07.csv.xz"
DEFAULT_REFERENCE = (
    REPO.parent / "shared" / "traces" / "upstream-vpa-replay-2013-07-vm001-020.csv.xz"
)
SAMPLE_HOURS = 5 / 60
GIB = float(1 << 30)
_HOUR_US = 3600 * 10**6
_UPDATE_AGE_US = 12 * _HOUR_US
_UNIX_EPOCH_GO_US = 62135596800 * 10**6
"""Microseconds from Go's zero time (0001-01-01) to the Unix epoch."""


@dataclass(frozen=True, slots=True)
class Sample:
    timestamp: int
    cpu_cores: float
    memory_bytes: int
    cpu_provisioned_cores: float
    memory_provisioned_bytes: int


@dataclass(frozen=True, slots=True)
class RecommendationRow:
    """One computation, in the reference file's columns."""

    timestamp: int
    workload: str
    cpu_target_m: int
    mem_target_b: int
    cpu_lower_m: int
    mem_lower_b: int
    cpu_upper_m: int
    mem_upper_b: int


@dataclass
class PolicyTotals:
    """One policy's column of the reference table."""

    cpu_requested_core_h: float = 0.0
    cpu_slack_core_h: float = 0.0
    memory_requested_gib_h: float = 0.0
    memory_slack_gib_h: float = 0.0
    oom_samples: int = 0
    workloads_with_oom: int = 0
    throttled_samples: int = 0
    updates: int = 0

    def add(self, other: PolicyTotals) -> None:
        self.cpu_requested_core_h += other.cpu_requested_core_h
        self.cpu_slack_core_h += other.cpu_slack_core_h
        self.memory_requested_gib_h += other.memory_requested_gib_h
        self.memory_slack_gib_h += other.memory_slack_gib_h
        self.oom_samples += other.oom_samples
        self.workloads_with_oom += other.workloads_with_oom
        self.throttled_samples += other.throttled_samples
        self.updates += other.updates


@dataclass
class WorkloadOutcome:
    workload: str
    recommender: PolicyTotals
    provisioned: PolicyTotals
    rows: list[RecommendationRow] = field(default_factory=list)


# -- reading ----------------------------------------------------------------------------------


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".xz":
        return io.TextIOWrapper(lzma.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def read_workloads(
    path: Path, *, only: set[str] | None = None
) -> Iterator[tuple[str, list[Sample]]]:
    """The trace's workloads in file order (rows are sorted by workload, then time)."""
    with _open_text(path) as stream:
        reader = csv.reader(stream)
        header = next(reader)
        column = {name: index for index, name in enumerate(header)}
        ts, wl = column["timestamp"], column["workload"]
        cpu, mem = column["cpu_cores"], column["memory_bytes"]
        pcpu, pmem = column["cpu_provisioned_cores"], column["memory_provisioned_bytes"]
        current: str | None = None
        samples: list[Sample] = []
        remaining = set(only) if only is not None else None
        for row in reader:
            workload = row[wl]
            if workload != current:
                if current is not None and samples:
                    yield current, samples
                current, samples = workload, []
                if remaining is not None:
                    if not remaining:
                        return  # every wanted workload done (rows are grouped by workload)
                    remaining.discard(workload)
            if only is not None and workload not in only:
                continue
            samples.append(
                Sample(
                    int(row[ts]),
                    float(row[cpu]),
                    int(row[mem]),
                    float(row[pcpu]),
                    int(row[pmem]),
                )
            )
        if current is not None and samples:
            yield current, samples


def read_reference(path: Path, *, only: set[str] | None = None) -> list[RecommendationRow]:
    with _open_text(path) as stream:
        reader = csv.DictReader(stream)
        return [
            RecommendationRow(
                int(row["timestamp"]),
                row["workload"],
                int(row["cpu_target_m"]),
                int(row["mem_target_b"]),
                int(row["cpu_lower_m"]),
                int(row["mem_lower_b"]),
                int(row["cpu_upper_m"]),
                int(row["mem_upper_b"]),
            )
            for row in reader
            if only is None or row["workload"] in only
        ]


def workload_range(text: str) -> set[str] | None:
    """``all``, ``vm-001-vm-020`` (inclusive range) or a comma-separated list."""
    if text in ("", "all"):
        return None
    names: set[str] = set()
    for raw in text.split(","):
        part = raw.strip()
        if part.count("vm-") == 2:
            low, high = part.split("-vm-")
            start, end = int(low.removeprefix("vm-")), int(high)
            names.update(f"vm-{n:03d}" for n in range(start, end + 1))
        elif part:
            names.add(part)
    return names


# -- the protocol -----------------------------------------------------------------------------


def _cpu_amount(cores: float) -> int:
    """model.CPUAmountFromCores."""
    return go_float_to_int64(cores * 1000.0)


def replay_workload(
    workload: str, samples: Iterable[Sample], *, config: RecommenderConfig | None = None
) -> WorkloadOutcome:
    """Replay one workload under protocol v1 (see module docstring)."""
    config = config or RecommenderConfig()
    aggregate = AggregateContainerState.standalone(config.aggregations)
    container = ContainerState(request_cpu=0, request_memory=0, aggregator=aggregate)
    recommender = PolicyTotals()
    provisioned = PolicyTotals()
    outcome = WorkloadOutcome(workload, recommender, provisioned)
    applied_cpu_m = -1
    applied_memory = -1
    last_computed_us = 0
    last_update_us = 0
    oomed = provisioned_oomed = False
    for sample in samples:
        time_us = _UNIX_EPOCH_GO_US + sample.timestamp * 10**6
        if applied_cpu_m < 0:
            applied_cpu_m = _cpu_amount(sample.cpu_provisioned_cores)
            applied_memory = sample.memory_provisioned_bytes
            last_update_us = time_us
        # 1. scoring, recommender policy and the provisioned baseline.
        applied_cores = applied_cpu_m / 1000
        recommender.cpu_requested_core_h += applied_cores * SAMPLE_HOURS
        recommender.cpu_slack_core_h += (applied_cores - sample.cpu_cores) * SAMPLE_HOURS
        recommender.memory_requested_gib_h += applied_memory / GIB * SAMPLE_HOURS
        recommender.memory_slack_gib_h += (
            (applied_memory - sample.memory_bytes) / GIB * SAMPLE_HOURS
        )
        oom = sample.memory_bytes > applied_memory
        if oom:
            recommender.oom_samples += 1
            oomed = True
        if sample.cpu_cores > applied_cores:
            recommender.throttled_samples += 1
        _score_provisioned(provisioned, sample)
        if sample.memory_bytes > sample.memory_provisioned_bytes:
            provisioned_oomed = True
        # 2. feeding the model.
        container.add_cpu_sample(_cpu_amount(min(sample.cpu_cores, applied_cores)), time_us)
        if oom:
            container.record_oom(time_us, applied_memory)
        else:
            container.add_memory_sample(sample.memory_bytes, time_us)
        # 3. computing.
        if not (last_computed_us == 0 or time_us - last_computed_us >= _HOUR_US or oom):
            continue
        last_computed_us = time_us
        result = estimate(aggregate, config, containers=1)
        outcome.rows.append(
            RecommendationRow(
                sample.timestamp,
                workload,
                result.target_cpu,
                result.target_memory,
                result.lower_cpu,
                result.lower_memory,
                result.upper_cpu,
                result.upper_memory,
            )
        )
        # 4. applying.
        outside = not (
            result.lower_cpu <= applied_cpu_m <= result.upper_cpu
            and result.lower_memory <= applied_memory <= result.upper_memory
        )
        drift = (
            abs(result.target_cpu - applied_cpu_m) / applied_cpu_m
            + abs(result.target_memory - applied_memory) / applied_memory
        )
        stale = time_us - last_update_us >= _UPDATE_AGE_US and drift >= 0.1
        if (outside or oom or stale) and (
            result.target_cpu > 0
            and result.target_memory > 0
            and (result.target_cpu, result.target_memory) != (applied_cpu_m, applied_memory)
        ):
            applied_cpu_m, applied_memory = result.target_cpu, result.target_memory
            last_update_us = time_us
            recommender.updates += 1
    recommender.workloads_with_oom = int(oomed)
    provisioned.workloads_with_oom = int(provisioned_oomed)
    aggregate.release()
    return outcome


def _score_provisioned(totals: PolicyTotals, sample: Sample) -> None:
    cores = sample.cpu_provisioned_cores
    memory = sample.memory_provisioned_bytes
    totals.cpu_requested_core_h += cores * SAMPLE_HOURS
    totals.cpu_slack_core_h += (cores - sample.cpu_cores) * SAMPLE_HOURS
    totals.memory_requested_gib_h += memory / GIB * SAMPLE_HOURS
    totals.memory_slack_gib_h += (memory - sample.memory_bytes) / GIB * SAMPLE_HOURS
    if sample.memory_bytes > memory:
        totals.oom_samples += 1
    if sample.cpu_cores > cores:
        totals.throttled_samples += 1


# -- the table --------------------------------------------------------------------------------

REFERENCE_TABLE = {
    "provisioned": PolicyTotals(
        891170.583, 811720.016, 2789721.971, 2647735.489, 257, 87, 49475, 0
    ),
    "recommender": PolicyTotals(
        94248.615, 14798.048, 902808.013, 760821.531, 12203, 375, 186799, 11158
    ),
}
"""The trace README's figures for bitbrains-rnd-2013-07 (all 500 workloads)."""

_COLUMNS = (
    ("cpu_requested_core_h", "CPU requested (core-h)"),
    ("cpu_slack_core_h", "CPU slack (core-h)"),
    ("memory_requested_gib_h", "memory requested (GiB-h)"),
    ("memory_slack_gib_h", "memory slack (GiB-h)"),
    ("oom_samples", "OOM samples"),
    ("workloads_with_oom", "workloads with an OOM"),
    ("throttled_samples", "throttled samples"),
    ("updates", "updates"),
)


def markdown_table(totals: dict[str, PolicyTotals], *, reference: bool) -> str:
    """The results table: ours, and (``reference``) upstream's with the difference."""
    lines = ["| policy | " + " | ".join(title for _, title in _COLUMNS) + " |"]
    lines.append("|---" * (len(_COLUMNS) + 1) + "|")
    names = {"provisioned": "provisioned (manual)", "recommender": "upstream VPA 1.8 defaults"}
    for policy, ours in totals.items():
        cells = []
        for attribute, _ in _COLUMNS:
            value = getattr(ours, attribute)
            cells.append(f"{value:.3f}" if isinstance(value, float) else str(value))
        lines.append(f"| kubescale, {names[policy]} | " + " | ".join(cells) + " |")
        if reference:
            theirs = REFERENCE_TABLE[policy]
            ref_cells, delta_cells = [], []
            for attribute, _ in _COLUMNS:
                a, b = getattr(ours, attribute), getattr(theirs, attribute)
                if isinstance(b, float):
                    ref_cells.append(f"{b:.3f}")
                    delta_cells.append(f"{a - b:+.3f} ({(a - b) / b:+.1e})")
                else:
                    ref_cells.append(str(b))
                    delta_cells.append(f"{a - b:+d}")
            lines.append(f"| upstream, {names[policy]} | " + " | ".join(ref_cells) + " |")
            lines.append(f"| delta, {names[policy]} | " + " | ".join(delta_cells) + " |")
    return "\n".join(lines)


def compare_rows(
    ours: list[RecommendationRow], theirs: list[RecommendationRow]
) -> list[tuple[RecommendationRow | None, RecommendationRow | None]]:
    """Rows that differ (paired in order), empty when everything matches."""
    mismatches: list[tuple[RecommendationRow | None, RecommendationRow | None]] = []
    for index in range(max(len(ours), len(theirs))):
        a = ours[index] if index < len(ours) else None
        b = theirs[index] if index < len(theirs) else None
        if a != b:
            mismatches.append((a, b))
    return mismatches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument(
        "--workloads", default="all", help="all, vm-001-vm-020, or a comma-separated list"
    )
    parser.add_argument("--compare", type=Path, help="upstream's per-recommendation CSV")
    parser.add_argument("--out", type=Path, help="write the totals and timing as JSON")
    args = parser.parse_args(argv)
    only = workload_range(args.workloads)
    started = time.process_time()
    totals = {"provisioned": PolicyTotals(), "recommender": PolicyTotals()}
    rows: list[RecommendationRow] = []
    count = 0
    for workload, samples in read_workloads(args.trace, only=only):
        outcome = replay_workload(workload, samples)
        totals["provisioned"].add(outcome.provisioned)
        totals["recommender"].add(outcome.recommender)
        rows.extend(outcome.rows)
        count += 1
    seconds = time.process_time() - started
    print(markdown_table(totals, reference=only is None))
    print(f"\n{count} workloads, {len(rows)} recommendations, {seconds:.1f} CPU s")
    status = 0
    if args.compare is not None:
        names = {row.workload for row in rows}
        mismatches = compare_rows(rows, read_reference(args.compare, only=names))
        print(f"row-by-row against {args.compare.name}: {len(mismatches)} differing rows")
        for a, b in mismatches[:10]:
            print(f"  ours {a}\n  upstream {b}")
        status = 1 if mismatches else 0
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "workloads": count,
                    "recommendations": len(rows),
                    "cpu_seconds": seconds,
                    "totals": {name: asdict(value) for name, value in totals.items()},
                },
                indent=2,
            )
            + "\n"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
