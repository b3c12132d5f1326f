"""The recommender's iteration as one decision, with no API server: model state and VPAs in,
``describe(intent)`` lines out (:mod:`kubescale.controllers.vpa.recommender.recommender_decision`).

Upstream's rules the rows work out (``routines/recommender.go RunOnce``: ``UpdateVPAs``, then
``MaintainCheckpoints``; ``utils/vpa/api.go UpdateVpaStatusIfNeeded``;
``checkpoint/checkpoint_writer.go StoreCheckpoints``; ``input/cluster_feeder.go
GarbageCollectCheckpoints``):

* a status is written only when it differs semantically from the object's;
* checkpoints go least recently written VPA first; before each VPA, once the context's deadline
  has passed and ``minCheckpoints <= 0`` the writer stops, ``minCheckpoints`` going down by one
  per container checkpoint tried (written or failed);
* every ``--checkpoints-gc-interval`` (``time.Since(last) > interval``) a checkpoint whose
  ``spec.vpaObjectName`` names no VPA is deleted.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.base.clock import VirtualClock
from kubescale.controllers.vpa.api.vpa_targets import TargetCheck
from kubescale.controllers.vpa.model.cluster_state import ClusterState, VpaRecommendation
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.recommender.cluster_feeder import ObservedVpa
from kubescale.controllers.vpa.recommender.recommender_config import RecommenderSettings
from kubescale.controllers.vpa.recommender.recommender_decision import (
    IterationResult,
    RecommenderMemory,
    RecommenderSnapshot,
    decide,
)
from kubescale.coordination.disruption_ledger import WriteOutcome, WriteResult
from kubescale.kube.errors import KubeApiError
from kubescale.objects.selectors import label_selector_from_set
from kubescale.objects.vpa import RecommendedContainerResources
from kubescale.objects.vpa_checkpoint import VerticalPodAutoscalerCheckpoint
from kubescale.plans.executor import Applied, Decision, collect_plan
from kubescale.plans.intents import Intent, describe
from tests import builders
from tests.controllers.vpa.checkpoint.test_checkpoint_store import upstream_checkpoint

NS = "ns"
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
EARLIER = "2026-01-01T00:00:00Z"
GC_INTERVAL = 600.0  # --checkpoints-gc-interval 10m (upstream's default)

VPA = functools.partial(builders.vpas.typed_vpa, namespace=NS, api_version=None)


def entry(cpu: str) -> RecommendedContainerResources:
    """One container's recommendation (target = uncapped target, fixed bounds)."""
    return {
        "containerName": "app",
        "target": {"cpu": cpu, "memory": "256Mi"},
        "lowerBound": {"cpu": "100m", "memory": "128Mi"},
        "upperBound": {"cpu": "1", "memory": "1Gi"},
        "uncappedTarget": {"cpu": cpu, "memory": "256Mi"},
    }


def provided_since_earlier() -> dict[str, Any]:
    return {"type": "RecommendationProvided", "status": "True", "lastTransitionTime": EARLIER}


def web_status(cpu: str) -> dict[str, Any]:
    """The status a previous iteration wrote: RecommendationProvided since EARLIER, target
    ``cpu``."""
    return {
        "conditions": [provided_since_earlier()],
        "recommendation": {"containerRecommendations": [entry(cpu)]},
    }


def observed(name: str, status: dict[str, Any]) -> ObservedVpa:
    return ObservedVpa(
        VPA(name=name, status=status), TargetCheck(label_selector_from_set({"app": name}))
    )


def model(checkpointed: Sequence[tuple[str, int]] = ()) -> ClusterState:
    """VPAs, each over one running pod with one container ``app`` and one CPU and one memory
    sample, last checkpointed ``minutes`` before NOW: (name, minutes)."""
    state = ClusterState(config=RecommenderConfig())
    for name, minutes in checkpointed:
        labels = {"app": name}
        state.add_or_update_vpa(VPA(name=name), selector=label_selector_from_set(labels))
        pod = f"{name}-1"
        state.add_or_update_pod(
            namespace=NS,
            name=pod,
            labels=labels,
            phase="Running",
            containers={"app": {"cpu": 100, "memory": 10**8}},
            now=NOW,
        )
        for resource, usage in (("cpu", 200), ("memory", 3 * 10**8)):
            state.add_sample(
                namespace=NS,
                pod=pod,
                container="app",
                resource=resource,
                usage=usage,
                request=0,
                measure_start=NOW - timedelta(minutes=1),
            )
        state.mark_checkpoint_written(namespace=NS, name=name, now=NOW - timedelta(minutes=minutes))
    return state


@dataclass(frozen=True, kw_only=True)
class Row:
    vpas: Sequence[ObservedVpa] = ()
    recommendations: dict[tuple[str, str], VpaRecommendation] = field(default_factory=dict)
    checkpointed: Sequence[tuple[str, int]] = ()
    min_checkpoints: int = 10
    deadline_passed: bool = False
    cached: Sequence[VerticalPodAutoscalerCheckpoint] = ()
    existing: frozenset[tuple[str, str]] = frozenset()
    last_gc_minutes: float | None = 1.0
    """Minutes since the last checkpoint GC (None: never since start, so it is due)."""


Outcome = tuple[list[str], IterationResult, RecommenderMemory]


def run(row: Row, answer: Iterable[Applied] | None = None) -> Outcome:
    """The row's decision: its intents' lines, its result and the memory after it; each intent
    answered done (as a dry run), or by ``answer`` in turn."""
    clock = VirtualClock(NOW)
    # The deadline is --checkpoints-timeout after the iteration's start; "passed" means
    # UpdateVPAs already used it all (the clock reads at the deadline when writing starts).
    deadline = clock.monotonic() + (0.0 if row.deadline_passed else 60.0)
    memory = RecommenderMemory(
        model=model(row.checkpointed),
        last_checkpoint_gc=(
            None if row.last_gc_minutes is None else NOW - timedelta(minutes=row.last_gc_minutes)
        ),
    )
    decision = decide(
        RecommenderSnapshot(
            vpas=row.vpas,
            recommendations=row.recommendations,
            checkpoints=row.cached,
            existing_vpas=row.existing,
        ),
        memory,
        NOW,
        settings=RecommenderSettings(
            min_checkpoints=row.min_checkpoints, checkpoints_gc_interval=GC_INTERVAL
        ),
        clock=clock,
        deadline=deadline,
    )
    if answer is None:
        plan, result = collect_plan(decision)
        return [shown(intent) for intent in plan], result, memory
    lines, result = drive(decision, answer)
    return lines, result, memory


def drive(
    decision: Decision[IterationResult], answers: Iterable[Applied]
) -> tuple[list[str], IterationResult]:
    replies = iter(answers)
    plan, result = collect_plan(decision, lambda _intent: next(replies))
    return [shown(intent) for intent in plan], result


def shown(intent: Intent) -> str:
    """``describe(intent)``; a checkpoint write's line without its payload (the histograms,
    the model's arithmetic, tested in tests/controllers/vpa/model)."""
    line = describe(intent)
    head, found, _ = line.partition(" json [")
    return f"{head} json [...]" if found and "patch-or-create" in head else line


DONE = Applied(WriteResult(WriteOutcome.DONE))
FAILED = Applied(
    WriteResult(
        WriteOutcome.REFUSED,
        KubeApiError(code=422, reason="Invalid", message="checkpoint is invalid"),
    )
)

STATUS_300M = (
    "vpa-recommender: patch verticalpodautoscalers ns/web/status json "
    '[{"op":"add","path":"/status","value":{"conditions":[{"lastTransitionTime":"'
    + EARLIER
    + '","status":"True","type":"RecommendationProvided"}],"recommendation":'
    '{"containerRecommendations":[{"containerName":"app","lowerBound":{"cpu":"100m",'
    '"memory":"128Mi"},"target":{"cpu":"300m","memory":"256Mi"},"uncappedTarget":'
    '{"cpu":"300m","memory":"256Mi"},"upperBound":{"cpu":"1","memory":"1Gi"}}]}}}]'
)


def cached_checkpoint(vpa: str) -> VerticalPodAutoscalerCheckpoint:
    """The cached checkpoint of ``vpa``'s container ``app`` (as upstream writes it)."""
    return cast(VerticalPodAutoscalerCheckpoint, upstream_checkpoint(vpa, "app", namespace=NS))


def checkpoint(name: str) -> str:
    return (
        f"vpa-recommender: patch-or-create verticalpodautoscalercheckpoints {NS}/{name}-app "
        "json [...]"
    )


WEB = (NS, "web")

ROWS = {
    # The object says target 250m since EARLIER; the pass now says 300m. Conditions: not
    # unsupported (ConfigUnsupported deleted, absent), a pod matches (NoPodsMatched deleted),
    # a recommendation (RecommendationProvided True, as it was: its EARLIER transition time is
    # kept); no metadata.generation, so no observedGeneration. The recommendation differs: one
    # `add /status` on the status subresource, the whole new status.
    "changed recommendation: one status write": (
        Row(
            vpas=[observed("web", web_status("250m"))],
            recommendations={WEB: VpaRecommendation([entry("300m")], pod_count=1)},
        ),
        [STATUS_300M],
    ),
    # The same status worked out again (conditions and recommendation equal, the transition
    # time kept): Semantic.DeepEqual, no write.
    "unchanged recommendation: no write": (
        Row(
            vpas=[observed("web", web_status("250m"))],
            recommendations={WEB: VpaRecommendation([entry("250m")], pod_count=1)},
        ),
        [],
    ),
    # Quantities compare by value: 0.25 cores is 250m, so nothing changed either.
    "same quantity spelled otherwise: no write": (
        Row(
            vpas=[observed("web", web_status("250m"))],
            recommendations={WEB: VpaRecommendation([entry("0.25")], pod_count=1)},
        ),
        [],
    ),
    # Oldest first: c (written 3 min ago), a (2), b (1). The deadline has passed before the
    # first VPA; minCheckpoints 2: before c 2 > 0 -> write (1 container: 1 left), before a
    # 1 > 0 -> write (0 left), before b deadline passed and 0 <= 0 -> stop. Exactly 2.
    "deadline passed, --min-checkpoints 2: the two oldest": (
        Row(
            checkpointed=[("a", 2), ("b", 1), ("c", 3)],
            min_checkpoints=2,
            deadline_passed=True,
        ),
        [checkpoint("c"), checkpoint("a")],
    ),
    # Deadline not passed (60 s left, the clock does not move): every VPA, oldest first.
    "deadline ahead: every VPA oldest first": (
        Row(checkpointed=[("a", 2), ("b", 1), ("c", 3)], min_checkpoints=0),
        [checkpoint("c"), checkpoint("a"), checkpoint("b")],
    ),
    # Deadline passed and --min-checkpoints 0 (upstream >= 1.4): nothing is written.
    "deadline passed, --min-checkpoints 0: none": (
        Row(checkpointed=[("a", 2)], min_checkpoints=0, deadline_passed=True),
        [],
    ),
    # Last GC 11 min ago > 10 min: checkpoints naming no existing VPA are deleted (gone-app);
    # web-app's VPA exists.
    "orphan checkpoint: a delete": (
        Row(
            cached=[
                cached_checkpoint("gone"),
                cached_checkpoint("web"),
            ],
            existing=frozenset({WEB}),
            last_gc_minutes=11,
        ),
        [f"vpa-recommender: delete verticalpodautoscalercheckpoints {NS}/gone-app"],
    ),
    # Last GC exactly 10 min ago: not more than the interval, no collection yet.
    "orphan checkpoint before the GC interval: none": (
        Row(
            cached=[cached_checkpoint("gone")],
            existing=frozenset({WEB}),
            last_gc_minutes=10,
        ),
        [],
    ),
    # RunOnce's order: UpdateVPAs' status writes, then StoreCheckpoints, then the GC's
    # deletions (the first GC after start-up: never collected).
    "everything: statuses, checkpoints, deletions": (
        Row(
            vpas=[observed("web", web_status("250m"))],
            recommendations={WEB: VpaRecommendation([entry("300m")], pod_count=1)},
            checkpointed=[("a", 2), ("c", 3)],
            min_checkpoints=0,
            cached=[cached_checkpoint("gone")],
            existing=frozenset({WEB, (NS, "a"), (NS, "c")}),
            last_gc_minutes=None,
        ),
        [
            STATUS_300M,
            checkpoint("c"),
            checkpoint("a"),
            f"vpa-recommender: delete verticalpodautoscalercheckpoints {NS}/gone-app",
        ],
    ),
}


@pytest.mark.parametrize(("row", "lines"), ROWS.values(), ids=list(ROWS))
def test_the_iteration_decides_these_writes(row: Row, lines: list[str]) -> None:
    assert run(row)[0] == lines


def test_a_failed_checkpoint_write_counts_towards_the_minimum() -> None:
    # As the table's "two oldest" row, the first write (c) failing: upstream decrements
    # minCheckpoints for a failed write too, so a is still the last one tried (2 tries), and
    # c, not written, keeps its old "checkpoint written" time.
    row = Row(checkpointed=[("a", 2), ("b", 1), ("c", 3)], min_checkpoints=2, deadline_passed=True)
    lines, result, memory = run(row, answer=[FAILED, DONE])
    assert lines == [checkpoint("c"), checkpoint("a")]
    assert result.checkpoints is not None
    assert (result.checkpoints.written, result.checkpoints.failed) == (1, 1)
    # The next pass: c (3 min ago, its write failed), b (1 min ago), a (now).
    assert memory.model.vpa_keys_for_checkpoints() == [(NS, "c"), (NS, "b"), (NS, "a")]


def test_a_status_write_that_failed_is_not_counted_written() -> None:
    row = Row(
        vpas=[observed("web", web_status("250m"))],
        recommendations={WEB: VpaRecommendation([entry("300m")], pod_count=1)},
    )
    lines, result, memory = run(row, answer=[FAILED])
    assert lines == [STATUS_300M]
    assert (result.statuses, memory.status_writes, memory.written) == (0, 0, [])
    _, done, memory = run(row)
    assert (done.statuses, memory.status_writes, [key for key, _ in memory.written]) == (
        1,
        1,
        [WEB],
    )


@settings(max_examples=60, deadline=None)
@given(
    ages=st.lists(st.integers(min_value=1, max_value=30), min_size=0, max_size=6),
    minimum=st.integers(min_value=0, max_value=8),
    passed=st.booleans(),
)
def test_checkpoints_are_the_oldest_prefix_bounded_by_the_minimum(
    ages: list[int], minimum: int, passed: bool
) -> None:
    # One container per VPA, so one checkpoint per VPA. With the deadline ahead every VPA is
    # written; once it has passed, exactly min(VPAs, --min-checkpoints) -- always the least
    # recently written ones (ties by name), in that order.
    checkpointed = [(f"v{index}", age) for index, age in enumerate(ages)]
    lines, _, _ = run(
        Row(checkpointed=checkpointed, min_checkpoints=minimum, deadline_passed=passed)
    )
    oldest_first = [name for name, _ in sorted(checkpointed, key=lambda c: (-c[1], c[0]))]
    count = min(len(ages), minimum) if passed else len(ages)
    assert lines == [checkpoint(name) for name in oldest_first[:count]]
