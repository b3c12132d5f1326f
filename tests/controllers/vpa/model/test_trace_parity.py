"""Parity with upstream VPA 1.8 on a real trace (replay protocol v1 of
``../shared/traces/README.md``): every recommendation upstream's own recommender computed for
bitbrains-rnd-2013-07 workloads vm-001 … vm-020 (12,839 rows), matched row for row.

The traces live outside the repository (``../shared/traces`` from the repository root, as on
CI); without them the test is skipped. The full month (500 workloads) is
``bench/vpa_trace_replay.py``, results in ``docs/vpa-recommender-parity.md``.
"""

from __future__ import annotations

import pytest

from bench.vpa_trace_replay import (
    DEFAULT_REFERENCE,
    DEFAULT_TRACE,
    compare_rows,
    read_reference,
    read_workloads,
    replay_workload,
    workload_range,
)

WORKLOADS = workload_range("vm-001-vm-020")

pytestmark = pytest.mark.skipif(
    not (DEFAULT_TRACE.exists() and DEFAULT_REFERENCE.exists()),
    reason=(
        f"trace files not found under {DEFAULT_TRACE.parent}: the replay needs "
        f"{DEFAULT_TRACE.name} and {DEFAULT_REFERENCE.name} from the shared traces folder "
        "beside the repository (../shared/traces; where to get them: README, 'Traces')"
    ),
)


def test_vm001_to_vm020_match_upstream_row_for_row() -> None:
    assert WORKLOADS is not None
    assert len(WORKLOADS) == 20
    ours = []
    replayed = set()
    for workload, samples in read_workloads(DEFAULT_TRACE, only=WORKLOADS):
        ours.extend(replay_workload(workload, samples).rows)
        replayed.add(workload)
    theirs = read_reference(DEFAULT_REFERENCE, only=WORKLOADS)
    assert replayed == WORKLOADS
    assert len(theirs) == 12839
    mismatches = compare_rows(ours, theirs)
    assert mismatches == [], f"{len(mismatches)} rows differ, first: {mismatches[:3]}"
