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
   ``sum(|target - applied| / applied)`` over CPU and memory is >= 0.1. Each update is a pod
   restart: the ``updates`` column.

Upstream VPA 1.8 defaults throughout. CPU usage in cores becomes a ResourceAmount as the model
converts cores, ``int64(cores * 1000)``; the applied CPU is kept in millicores and compared in
cores (``millicores / 1000``).

The recommender is driven through the model API directly: one ``ContainerState`` feeding one
``AggregateContainerState`` per workload, and for a single container either upstream's
estimator chain (``--policy upstream``, the default) or kubescale's ``adaptive`` recommendation
policy (``--policy adaptive``; ``--policy both`` replays both; ``--policy-param NAME=VALUE``
overrides a field of ``AdaptivePolicyConfig``, e.g. ``oom_hold_ns=12h``,
``memory_rungs=0.9:0.15,1.0:0.15``, ``cpu_percentiles=0.9,0.95``). The "provisioned" policy
scores the provisioned amounts of each row and never updates. Each policy's totals also split
off the slack of each workload's first 24 hours (JSON only).

Upstream's recommender model flags (``--target-memory-percentile``,
``--recommendation-margin-fraction``, ``--oom-bump-up-ratio``, ``--oom-min-bump-up-bytes``, the
histogram half-lives, the bound percentiles, ...: ``REPLAY_MODEL_FLAGS``) set the model of
either policy, parsed and checked as ``kubescale serve`` does; ``bench/vpa_frontier.py`` sweeps
them. The published reference is upstream's defaults, so it is not checked when any is given.

The reference table of the trace README (upstream VPA 1.8 on bitbrains-rnd, month 2013-07, all
500 workloads) is printed beside the results only when the replay is that one: the dataset named
by the file, the month the samples fall in, every workload. Then the upstream policy must
reproduce it (counts exactly, hour totals within 1e-6 relative) or the exit status is 1; so is
it when ``--compare`` finds a differing row.

Usage (from the repository root)::

    .venv/bin/python bench/vpa_trace_replay.py                       # all 500 workloads
    .venv/bin/python bench/vpa_trace_replay.py --policy both --out /tmp/month.json
    .venv/bin/python bench/vpa_trace_replay.py --workloads vm-001-vm-020 \\
        --compare ../shared/traces/upstream-vpa-replay-2013-07-vm001-020.csv.xz

The trace is read straight from the ``.csv.xz`` and streamed workload by workload. The traces
are looked up in ``$KUBESCALE_TRACES``, else ``shared/traces`` beside the checkout or one level
further up (a git worktree).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import lzma
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.base.go_time import parse_duration
from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState, ContainerState
from kubescale.controllers.vpa.model.estimators import estimate
from kubescale.controllers.vpa.model.go_math import go_float_to_int64
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.model.policy.adaptive_config import (
    ADAPTIVE_POLICY,
    RECOMMENDATION_POLICIES,
    UPSTREAM_POLICY,
    AdaptivePolicyConfig,
)
from kubescale.controllers.vpa.model.policy.adaptive_estimator import estimate_adaptive
from kubescale.controllers.vpa.recommender.recommender_config import (
    RecommenderConfigError,
    add_recommender_arguments,
    recommender_settings_from_args,
)

REPO = Path(__file__).resolve().parent.parent


def _traces_dir() -> Path:
    configured = os.environ.get("KUBESCALE_TRACES")
    if configured:
        return Path(configured)
    for base in (REPO.parent, REPO.parent.parent):
        if (base / "shared" / "traces").is_dir():
            return base / "shared" / "traces"
    return REPO.parent / "shared" / "traces"


TRACES = _traces_dir()
DEFAULT_TRACE = TRACES / "bitbrains-rnd-2013-07.csv.xz"
DEFAULT_REFERENCE = TRACES / "upstream-vpa-replay-2013-07-vm001-020.csv.xz"
SAMPLE_HOURS = 5 / 60
GIB = float(1 << 30)
_HOUR_US = 3600 * 10**6
_DAY_US = 24 * _HOUR_US
_UPDATE_AGE_US = 12 * _HOUR_US
_UNIX_EPOCH_GO_US = 62135596800 * 10**6
"""Microseconds from Go's zero time (0001-01-01) to the Unix epoch."""
PROVISIONED = "provisioned"


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
    """One policy's column of the reference table (+ the first day's slack, JSON only)."""

    cpu_requested_core_h: float = 0.0
    cpu_slack_core_h: float = 0.0
    memory_requested_gib_h: float = 0.0
    memory_slack_gib_h: float = 0.0
    oom_samples: int = 0
    workloads_with_oom: int = 0
    throttled_samples: int = 0
    updates: int = 0
    cpu_slack_first_day_core_h: float = 0.0
    memory_slack_first_day_gib_h: float = 0.0

    def add(self, other: PolicyTotals) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def score(
        self, *, cpu_cores: float, memory_bytes: int, sample: Sample, first_day: bool
    ) -> None:
        """Step 1: one sample against the request applied before it."""
        cpu_slack = (cpu_cores - sample.cpu_cores) * SAMPLE_HOURS
        memory_slack = (memory_bytes - sample.memory_bytes) / GIB * SAMPLE_HOURS
        self.cpu_requested_core_h += cpu_cores * SAMPLE_HOURS
        self.cpu_slack_core_h += cpu_slack
        self.memory_requested_gib_h += memory_bytes / GIB * SAMPLE_HOURS
        self.memory_slack_gib_h += memory_slack
        if first_day:
            self.cpu_slack_first_day_core_h += cpu_slack
            self.memory_slack_first_day_gib_h += memory_slack
        if sample.memory_bytes > memory_bytes:
            self.oom_samples += 1
        if sample.cpu_cores > cpu_cores:
            self.throttled_samples += 1


_FIELDS = tuple(f.name for f in dataclasses.fields(PolicyTotals))


@dataclass
class WorkloadOutcome:
    workload: str
    recommender: PolicyTotals
    provisioned: PolicyTotals
    rows: list[RecommendationRow] = field(default_factory=list)
    first_timestamp: int = 0
    last_timestamp: int = 0


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
    """``all``, ``vm-001-vm-020`` (inclusive range) or a comma-separated list (of either)."""
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
    workload: str,
    samples: Sequence[Sample],
    *,
    config: RecommenderConfig | None = None,
    policy: AdaptivePolicyConfig | None = None,
) -> WorkloadOutcome:
    """Replay one workload under protocol v1 (see module docstring): upstream's estimator
    chain, or the adaptive policy with ``policy``."""
    config = config or RecommenderConfig()
    aggregate = AggregateContainerState.standalone(config.aggregations)
    container = ContainerState(request_cpu=0, request_memory=0, aggregator=aggregate)
    recommender = PolicyTotals()
    provisioned = PolicyTotals()
    outcome = WorkloadOutcome(workload, recommender, provisioned)
    applied_cpu_m = -1
    applied_memory = -1
    first_us = 0
    last_computed_us = 0
    last_update_us = 0
    oomed = provisioned_oomed = False
    for sample in samples:
        time_us = _UNIX_EPOCH_GO_US + sample.timestamp * 10**6
        if applied_cpu_m < 0:
            applied_cpu_m = _cpu_amount(sample.cpu_provisioned_cores)
            applied_memory = sample.memory_provisioned_bytes
            first_us = last_update_us = time_us
            outcome.first_timestamp = sample.timestamp
        outcome.last_timestamp = sample.timestamp
        first_day = time_us - first_us < _DAY_US
        # 1. scoring, recommender policy and the provisioned baseline.
        applied_cores = applied_cpu_m / 1000
        recommender.score(
            cpu_cores=applied_cores, memory_bytes=applied_memory, sample=sample, first_day=first_day
        )
        oom = sample.memory_bytes > applied_memory
        oomed = oomed or oom
        provisioned.score(
            cpu_cores=sample.cpu_provisioned_cores,
            memory_bytes=sample.memory_provisioned_bytes,
            sample=sample,
            first_day=first_day,
        )
        provisioned_oomed = (
            provisioned_oomed or sample.memory_bytes > sample.memory_provisioned_bytes
        )
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
        if policy is None:
            result = estimate(aggregate, config, containers=1)
        else:
            result = estimate_adaptive(
                aggregate, config, now_us=time_us, containers=1, policy=policy
            )
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


# -- the reference ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """Published totals of one replay: which trace, month and workload count they belong to."""

    dataset: str
    month: str
    workloads: int
    totals: dict[str, PolicyTotals]


def _totals(*values: float) -> PolicyTotals:
    names = _FIELDS[:8]
    return PolicyTotals(**dict(zip(names, values, strict=True)))  # type: ignore[arg-type]


REFERENCES = (
    Reference(
        dataset="bitbrains-rnd",
        month="2013-07",
        workloads=500,
        totals={
            PROVISIONED: _totals(
                891170.583, 811720.016, 2789721.971, 2647735.489, 257, 87, 49475, 0
            ),
            UPSTREAM_POLICY: _totals(
                94248.615, 14798.048, 902808.013, 760821.531, 12203, 375, 186799, 11158
            ),
        },
    ),
)
"""The trace README's figures (upstream VPA 1.8, replay protocol v1)."""

REFERENCE_TOLERANCE = 1e-6
"""Hour totals must agree within this relative difference; counts exactly."""


def dataset_name(trace: Path) -> str:
    """The dataset a trace file holds: its name without suffixes and a trailing ``-YYYY-MM``."""
    name = trace.name.split(".", 1)[0]
    return re.sub(r"-\d{4}-\d{2}$", "", name)


def data_month(first_timestamp: int, last_timestamp: int) -> str:
    """The month the samples fall in: that of the middle of their span (UTC)."""
    middle = (first_timestamp + last_timestamp) // 2
    return datetime.fromtimestamp(middle, tz=UTC).strftime("%Y-%m")


def reference_for(*, dataset: str, month: str, workloads: int, subset: bool) -> Reference | None:
    """The reference of exactly this replay, if any (never for a subset of the workloads)."""
    if subset:
        return None
    for reference in REFERENCES:
        if (reference.dataset, reference.month, reference.workloads) == (
            dataset,
            month,
            workloads,
        ):
            return reference
    return None


def reference_misses(ours: PolicyTotals, theirs: PolicyTotals) -> list[str]:
    """The columns where ``ours`` does not reproduce ``theirs`` (empty when it does)."""
    misses = []
    for attribute, title in _COLUMNS:
        a, b = getattr(ours, attribute), getattr(theirs, attribute)
        if isinstance(b, float):
            if abs(a - b) > REFERENCE_TOLERANCE * abs(b):
                misses.append(f"{title}: {a:.3f}, reference {b:.3f}")
        elif a != b:
            misses.append(f"{title}: {a}, reference {b}")
    return misses


# -- the table --------------------------------------------------------------------------------

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
_NAMES = {
    PROVISIONED: "provisioned (manual)",
    UPSTREAM_POLICY: "upstream VPA 1.8 defaults",
    ADAPTIVE_POLICY: "adaptive policy",
}


def _cells(totals: PolicyTotals) -> list[str]:
    cells = []
    for attribute, _ in _COLUMNS:
        value = getattr(totals, attribute)
        cells.append(f"{value:.3f}" if isinstance(value, float) else str(value))
    return cells


def markdown_table(totals: dict[str, PolicyTotals], *, reference: Reference | None) -> str:
    """The results table: ours, and with a ``reference`` its rows and the difference."""
    lines = ["| policy | " + " | ".join(title for _, title in _COLUMNS) + " |"]
    lines.append("|---" * (len(_COLUMNS) + 1) + "|")
    for policy, ours in totals.items():
        lines.append(f"| kubescale, {_NAMES[policy]} | " + " | ".join(_cells(ours)) + " |")
        theirs = reference.totals.get(policy) if reference is not None else None
        if theirs is None:
            continue
        deltas = []
        for attribute, _ in _COLUMNS:
            a, b = getattr(ours, attribute), getattr(theirs, attribute)
            if isinstance(b, float):
                deltas.append(f"{a - b:+.3f} ({(a - b) / b:+.1e})")
            else:
                deltas.append(f"{a - b:+d}")
        lines.append(f"| reference, {_NAMES[policy]} | " + " | ".join(_cells(theirs)) + " |")
        lines.append(f"| delta, {_NAMES[policy]} | " + " | ".join(deltas) + " |")
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


def write_workload_totals(path: Path, rows: Iterable[tuple[str, str, PolicyTotals]]) -> None:
    """One CSV row per workload and policy: ``workload, policy`` and every total."""
    with open(path, "w", encoding="utf-8", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["workload", "policy", *_FIELDS])
        for workload, policy, totals in rows:
            writer.writerow([workload, policy, *(getattr(totals, name) for name in _FIELDS)])


# -- policy parameters ------------------------------------------------------------------------


def _duration_ns(text: str) -> int:
    return round(parse_duration(text) * 1e9)


def policy_from_params(params: Iterable[str]) -> AdaptivePolicyConfig:
    """``NAME=VALUE`` overrides of :class:`AdaptivePolicyConfig` fields (durations as Go
    durations, ``memory_rungs`` as ``p:m,p:m``, ``cpu_percentiles`` as ``p,p``)."""
    types = {f.name: f for f in dataclasses.fields(AdaptivePolicyConfig)}
    changes: dict[str, object] = {}
    for param in params:
        name, sep, text = param.partition("=")
        if not sep or name not in types:
            raise ValueError(
                f"--policy-param {param!r}: want NAME=VALUE, NAME one of {sorted(types)}"
            )
        try:
            if name == "memory_rungs":
                changes[name] = tuple(
                    (float(p), float(m)) for p, m in (rung.split(":") for rung in text.split(","))
                )
            elif name == "cpu_percentiles":
                changes[name] = tuple(float(p) for p in text.split(","))
            elif name.endswith("_ns"):
                changes[name] = _duration_ns(text)
            else:
                changes[name] = float(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise ValueError(f"--policy-param {param!r}: {exc}") from None
    return dataclasses.replace(AdaptivePolicyConfig(), **changes)  # type: ignore[arg-type]


# -- upstream's recommender flags --------------------------------------------------------------

REPLAY_MODEL_FLAGS = (
    "--target-cpu-percentile",
    "--target-memory-percentile",
    "--recommendation-margin-fraction",
    "--oom-bump-up-ratio",
    "--oom-min-bump-up-bytes",
    "--memory-histogram-decay-half-life",
    "--cpu-histogram-decay-half-life",
    "--recommendation-lower-bound-cpu-percentile",
    "--recommendation-upper-bound-cpu-percentile",
    "--recommendation-lower-bound-memory-percentile",
    "--recommendation-upper-bound-memory-percentile",
    "--confidence-interval-cpu",
    "--confidence-interval-memory",
    "--memory-aggregation-interval",
    "--memory-aggregation-interval-count",
    "--pod-recommendation-min-cpu-millicores",
    "--pod-recommendation-min-memory-mb",
)
"""Upstream's recommender model flags the replay honours (names and defaults are upstream's,
``pkg/recommender/config/config.go``; parsed and checked by kubescale's own recommender flags)."""


def model_config_from_flags(flags: dict[str, str]) -> RecommenderConfig:
    """A :class:`RecommenderConfig` from upstream flag values (``{"--target-memory-percentile":
    "0.95"}``), parsed exactly as ``kubescale serve`` parses them; a ``ValueError`` naming the
    flag for an unknown flag or a bad value."""
    argv: list[str] = []
    for flag, value in flags.items():
        if flag not in REPLAY_MODEL_FLAGS:
            raise ValueError(f"{flag}: not a recommender model flag the replay honours")
        argv += [flag, str(value)]
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    add_recommender_arguments(parser)
    try:
        args = parser.parse_args(argv)
        return recommender_settings_from_args(args).model
    except (argparse.ArgumentError, RecommenderConfigError, ValueError) as exc:
        raise ValueError(str(exc)) from None


# -- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument(
        "--workloads", default="all", help="all, vm-001-vm-020, or a comma-separated list"
    )
    parser.add_argument(
        "--policy",
        choices=(*RECOMMENDATION_POLICIES, "both"),
        default=UPSTREAM_POLICY,
        help="recommendation policy to replay (default: %(default)s)",
    )
    parser.add_argument(
        "--policy-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override an adaptive policy parameter (repeatable)",
    )
    upstream_flags = parser.add_argument_group(
        "upstream recommender flags (upstream's names and defaults; either policy)"
    )
    for flag in REPLAY_MODEL_FLAGS:
        upstream_flags.add_argument(flag, default=None, metavar="VALUE")
    parser.add_argument("--compare", type=Path, help="upstream's per-recommendation CSV")
    parser.add_argument("--out", type=Path, help="write the totals and timing as JSON")
    parser.add_argument(
        "--out-workloads",
        type=Path,
        help="write each workload's totals per policy as CSV (slices can be summed from it)",
    )
    args = parser.parse_args(argv)
    try:
        adaptive = policy_from_params(args.policy_param)
        given = {
            flag: value
            for flag in REPLAY_MODEL_FLAGS
            if (value := getattr(args, flag[2:].replace("-", "_"))) is not None
        }
        config = model_config_from_flags(given)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.trace.exists():
        parser.error(f"--trace: {args.trace} not found")
    only = workload_range(args.workloads)
    policies = [UPSTREAM_POLICY, ADAPTIVE_POLICY] if args.policy == "both" else [str(args.policy)]
    started = time.process_time()
    totals = {name: PolicyTotals() for name in [PROVISIONED, *policies]}
    rows: list[RecommendationRow] = []
    per_workload: list[tuple[str, str, PolicyTotals]] = []
    count = 0
    first_timestamp, last_timestamp = 2**63, 0
    for workload, samples in read_workloads(args.trace, only=only):
        for policy in policies:
            outcome = replay_workload(
                workload,
                samples,
                config=config,
                policy=adaptive if policy == ADAPTIVE_POLICY else None,
            )
            totals[policy].add(outcome.recommender)
            per_workload.append((workload, policy, outcome.recommender))
            if policy == UPSTREAM_POLICY:
                rows.extend(outcome.rows)
        totals[PROVISIONED].add(outcome.provisioned)
        per_workload.append((workload, PROVISIONED, outcome.provisioned))
        first_timestamp = min(first_timestamp, outcome.first_timestamp)
        last_timestamp = max(last_timestamp, outcome.last_timestamp)
        count += 1
    seconds = time.process_time() - started
    if count == 0:
        print(f"no workload of {args.workloads!r} in {args.trace}", file=sys.stderr)
        return 1
    month = data_month(first_timestamp, last_timestamp)
    reference = reference_for(
        dataset=dataset_name(args.trace),
        month=month,
        workloads=count,
        subset=only is not None or bool(given),  # the reference is upstream's defaults
    )
    print(markdown_table(totals, reference=reference))
    print(
        f"\n{dataset_name(args.trace)} {month}, {count} workloads, "
        f"{seconds:.1f} CPU s ({', '.join(policies)})"
    )
    status = 0
    if reference is not None and UPSTREAM_POLICY in totals:
        misses = reference_misses(totals[UPSTREAM_POLICY], reference.totals[UPSTREAM_POLICY])
        if misses:
            status = 1
            print("upstream policy does NOT reproduce the reference:", "; ".join(misses))
        else:
            print("upstream policy reproduces the reference")
    elif reference is None:
        print("no published reference for this replay (dataset, month and all workloads)")
    if args.compare is not None and UPSTREAM_POLICY in totals:
        names = {row.workload for row in rows}
        mismatches = compare_rows(rows, read_reference(args.compare, only=names))
        print(f"row-by-row against {args.compare.name}: {len(mismatches)} differing rows")
        for a, b in mismatches[:10]:
            print(f"  ours {a}\n  upstream {b}")
        status = status or (1 if mismatches else 0)
    if args.out_workloads is not None:
        write_workload_totals(args.out_workloads, per_workload)
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "trace": args.trace.name,
                    "month": month,
                    "workloads": count,
                    "selection": args.workloads,
                    "policies": policies,
                    "policy_params": args.policy_param,
                    "upstream_flags": given,
                    "adaptive_policy": asdict(adaptive) if ADAPTIVE_POLICY in policies else None,
                    "cpu_seconds": seconds,
                    "reference_reproduced": (status == 0) if reference is not None else None,
                    "totals": {name: asdict(value) for name, value in totals.items()},
                },
                indent=2,
            )
            + "\n"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
