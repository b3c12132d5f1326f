"""Jobs: completions and parallelism, a run time taken from the workload, backoffLimit with the
pod-failure backoff, Indexed completion, activeDeadlineSeconds, suspend."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from kubescale.kube.resources import JOBS
from kubescale.sim.cluster.usage_models import (
    POD_INDEX_ANNOTATION,
    RUN_SECONDS_ANNOTATION,
    WORKLOAD_LABEL,
)
from tests import builders
from tests.sim.cluster.test_workload_controllers import SimCluster, cluster, condition

__all__ = ["cluster"]


report_template = functools.partial(
    builders.workloads.pod_template,
    labels={"app": "report"},
    containers=[builders.pods.container("main", image="batch:1")],
    spec={"restartPolicy": "Never"},
)
"""The report's pod template: ``app: report``, ``restartPolicy: Never``, container ``main``
running ``batch:1``."""


def run_seconds(seconds: int) -> dict[str, str]:
    """The annotation that makes each simulated pod of the Job run ``seconds``."""
    return {RUN_SECONDS_ANNOTATION: str(seconds)}


job = functools.partial(
    builders.workloads.job, name="report", annotations=run_seconds(150), template=report_template()
)
"""Job ``report``: its pods run 150 s each."""


def phases(cluster: SimCluster) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in cluster.pods():
        phase = pod["status"]["phase"]
        counts[phase] = counts.get(phase, 0) + 1
    return counts


@pytest.mark.parametrize(
    ("completions", "parallelism", "waves"),
    [(4, 2, 2), (3, 2, 2), (2, 5, 1), (None, 3, 1), (1, 1, 1)],
)
async def test_a_job_completes_after_the_run_time_with_completions_and_parallelism(
    cluster: SimCluster, completions: int | None, parallelism: int, waves: int
) -> None:
    spec: dict[str, Any] = {"parallelism": parallelism}
    if completions is not None:
        spec["completions"] = completions
    created = cluster.create(job(spec=spec))
    most_active = 0
    steps = 0
    while steps < 20 and not cluster.get(JOBS, "report").get("status", {}).get("completionTime"):
        await cluster.step()
        steps += 1
        active = phases(cluster).get("Running", 0) + phases(cluster).get("Pending", 0)
        most_active = max(most_active, active)
    finished = cluster.get(JOBS, "report")
    expected = completions if completions is not None else parallelism
    assert most_active == min(parallelism, expected)
    # a wave: created and started in one step, Succeeded at the first kubelet step 150 s or more
    # after its start (3 steps later), counted by the controller the step after — which starts
    # the next wave; the last count completes the Job
    assert steps == waves * 4 + 1
    status = finished["status"]
    assert status["succeeded"] == expected
    assert status["failed"] == 0
    assert status["active"] == 0
    assert status["startTime"] == "2026-01-01T00:01:00Z"  # the first sync
    for kind in ("SuccessCriteriaMet", "Complete"):
        found = condition(finished, kind)
        assert (found["status"], found["reason"], found["message"]) == (
            "True",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        )
    pod = cluster.pods()[0]
    assert pod["metadata"]["annotations"][RUN_SECONDS_ANNOTATION] == "150"
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "report"
    assert (
        pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"]
        == created["metadata"]["uid"]
    )
    assert pod["metadata"]["labels"][WORKLOAD_LABEL] == "report"


async def test_failures_beyond_the_backoff_limit_fail_the_job(cluster: SimCluster) -> None:
    cluster.kubelet.failing.add("batch:broken")
    cluster.create(
        job(
            template=report_template(
                containers=[builders.pods.container("main", image="batch:broken")]
            ),
            spec={"backoffLimit": 2},
        )
    )
    created_at: list[float] = []
    seen: set[str] = set()
    for _ in range(12):
        await cluster.step()
        for pod in cluster.pods():
            if pod["metadata"]["name"] not in seen:
                seen.add(pod["metadata"]["name"])
                created_at.append(cluster.clock.elapsed)
    finished = cluster.get(JOBS, "report")
    failed = condition(finished, "Failed")
    assert (failed["reason"], failed["message"]) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    assert condition(finished, "FailureTarget")["reason"] == "BackoffLimitExceeded"
    assert finished["status"]["failed"] == 3  # backoffLimit + 1
    assert len(created_at) == 3
    # a replacement waits the pod-failure backoff (10 s, then 20 s) after the last failure
    # finished: both have passed by the next step
    assert created_at == [60.0, 120.0, 180.0]


async def test_indexed_jobs_run_every_index_once(cluster: SimCluster) -> None:
    cluster.create(job(spec={"completions": 4, "parallelism": 2, "completionMode": "Indexed"}))
    await cluster.controllers_only()
    first = sorted(
        p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        for p in cluster.pods()
    )
    assert first == ["0", "1"]
    for pod in cluster.pods():
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert pod["metadata"]["annotations"][POD_INDEX_ANNOTATION] == index
        assert pod["metadata"]["name"].startswith(f"report-{index}-")
        assert pod["spec"]["hostname"] == f"report-{index}"
    cluster.kubelet.step(cluster.clock.now())
    await cluster.step(8)
    finished = cluster.get(JOBS, "report")
    assert finished["status"]["completedIndexes"] == "0-3"
    assert finished["status"]["succeeded"] == 4
    assert condition(finished, "Complete")["status"] == "True"


async def test_the_active_deadline_ends_a_long_job(cluster: SimCluster) -> None:
    cluster.create(
        job(annotations=run_seconds(3600), spec={"activeDeadlineSeconds": 200, "parallelism": 2})
    )
    await cluster.step(4)  # started at 60 s: 180 s in
    assert cluster.get(JOBS, "report")["status"]["active"] == 2
    await cluster.step()
    finished = cluster.get(JOBS, "report")
    failed = condition(finished, "Failed")
    assert (failed["reason"], failed["message"]) == (
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    assert cluster.active_pods() == []


async def test_suspend_removes_the_active_pods_until_resumed(cluster: SimCluster) -> None:
    cluster.create(job(annotations=run_seconds(600), spec={"parallelism": 2, "completions": 2}))
    await cluster.step()
    suspended = cluster.get(JOBS, "report")
    suspended["spec"]["suspend"] = True
    cluster.api.store.update(suspended)
    await cluster.step()
    assert cluster.active_pods() == []
    assert condition(cluster.get(JOBS, "report"), "Suspended")["reason"] == "JobSuspended"
    resumed = cluster.get(JOBS, "report")
    resumed["spec"]["suspend"] = False
    cluster.api.store.update(resumed)
    await cluster.step()
    assert len(cluster.active_pods()) == 2
