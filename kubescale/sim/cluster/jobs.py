"""The Job controller (``pkg/controller/job/job_controller.go``), one sync per call.

How long a Job pod runs is the workload's business, not the controller's: the pod carries
:data:`~.usage_models.RUN_SECONDS_ANNOTATION` (from the pod template, or copied from the Job's
own annotations) and the kubelet actor turns it Succeeded after that many seconds of running.

Counting (upstream's finalizer-based tracking, kept in memory here): a pod counts once as
succeeded when it reaches Succeeded, once as failed when it reaches Failed or is deleted before
succeeding (``isPodFailed``: an evicted pod is a failure). Wanted active pods
(``wantActive``): with ``completions``, ``min(parallelism, completions - succeeded)``; without
(a work queue), ``parallelism`` until the first success, then none. Extra active pods are deleted
(:func:`~.workload_pods.deletion_order`); missing ones created — after a failure not before the
pod-failure backoff (10 s doubling per failure, at most 6 min) has passed since the last failed
pod finished (its containers' ``terminated.finishedAt``, else when the failure was seen).
``Indexed`` mode gives each pod a completion index (annotation and label
``batch.kubernetes.io/job-completion-index``, hostname ``<job>-<index>``, used as the pod index)
and runs every index until it succeeds once; ``status.completedIndexes`` lists them.

Finishing (1.31+ conditions): ``succeeded >= completions`` (or, without completions, a success
and nothing active) → SuccessCriteriaMet then Complete, reason ``CompletionsReached``,
completionTime set; more failures than ``backoffLimit`` (6) → FailureTarget then Failed, reason
``BackoffLimitExceeded``; running past ``activeDeadlineSeconds`` → reason ``DeadlineExceeded``.
Active pods of a finished Job are deleted. ``suspend`` deletes the active pods and sets
Suspended. Status: active, ready, succeeded, failed, startTime, completionTime, conditions.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from kubescale.kube.resources import JOBS

from .controller_context import ControllerContext
from .usage_models import RUN_SECONDS_ANNOTATION
from .workload_pods import (
    deletion_order,
    is_active,
    is_ready,
    is_terminating,
    parse_timestamp,
    pod_from_template,
    workload_of,
)

__all__ = ["JobTracker", "sync_job"]

COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
DEFAULT_BACKOFF_LIMIT: Final = 6
BACKOFF_BASE: Final = 10.0
BACKOFF_MAX: Final = 360.0


class JobTracker:
    """What upstream keeps in finalizers and ``uncountedTerminatedPods``: which pods of each
    Job were already counted, and when the last failure was seen."""

    def __init__(self) -> None:
        self.succeeded: dict[str, set[str]] = {}
        self.failed: dict[str, set[str]] = {}
        self.completed_indexes: dict[str, set[int]] = {}
        self.last_failure: dict[str, float] = {}

    def forget(self, job_uid: str) -> None:
        for table in (self.succeeded, self.failed, self.completed_indexes, self.last_failure):
            table.pop(job_uid, None)


def _index_of(pod: dict[str, Any]) -> int | None:
    text = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _format_indexes(indexes: set[int]) -> str:
    """``status.completedIndexes``: ``"0-2,5"``."""
    parts: list[str] = []
    ordered = sorted(indexes)
    position = 0
    while position < len(ordered):
        end = position
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        first, last = ordered[position], ordered[end]
        parts.append(str(first) if first == last else f"{first}-{last}")
        position = end + 1
    return ",".join(parts)


def _condition(kind: str, *, reason: str, message: str, stamp: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def _finished(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def sync_job(ctx: ControllerContext, job: dict[str, Any], *, tracker: JobTracker) -> None:
    meta = job["metadata"]
    uid = str(meta["uid"])
    spec = job.get("spec") or {}
    key = (JOBS.plural, meta["namespace"], meta["name"])
    status = dict(job.get("status") or {})
    pods = ctx.index.children(uid, "pods")
    now_seconds = ctx.now.timestamp()
    succeeded = tracker.succeeded.setdefault(uid, set())
    failed = tracker.failed.setdefault(uid, set())
    done_indexes = tracker.completed_indexes.setdefault(uid, set())
    for pod in pods:
        pod_uid = str(pod["metadata"]["uid"])
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Succeeded" and pod_uid not in succeeded and pod_uid not in failed:
            succeeded.add(pod_uid)
            completion_index = _index_of(pod)
            if completion_index is not None:
                done_indexes.add(completion_index)
        elif (phase == "Failed" or (is_terminating(pod) and phase != "Succeeded")) and (
            pod_uid not in failed and pod_uid not in succeeded
        ):
            failed.add(pod_uid)
            finished_at = _finished_at(pod, now_seconds)
            tracker.last_failure[uid] = max(tracker.last_failure.get(uid, 0.0), finished_at)
    active = [p for p in pods if is_active(p)]
    indexed = spec.get("completionMode") == "Indexed"
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None and indexed:
        completions = parallelism
    finished = _finished(status)
    stamp = ctx.timestamp
    if not finished and not meta.get("deletionTimestamp") and not spec.get("suspend"):
        status.setdefault("startTime", stamp)
        ending = _ending(
            ctx,
            spec=spec,
            status=status,
            completions=completions,
            succeeded=len(succeeded),
            failed=len(failed),
            active=active,
        )
        deadline = spec.get("activeDeadlineSeconds")
        if ending is None and deadline is not None:
            ctx.wake_after(key, float(deadline) - (now_seconds - _started(status, now_seconds)))
        if ending is not None:
            reason, message, complete = ending
            first, last = "FailureTarget", "Failed"
            if complete:
                first, last = "SuccessCriteriaMet", "Complete"
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Suspended"]
            conditions += [
                _condition(first, reason=reason, message=message, stamp=stamp),
                _condition(last, reason=reason, message=message, stamp=stamp),
            ]
            status["conditions"] = conditions
            if complete:
                status["completionTime"] = stamp
            finished = True
    if finished or spec.get("suspend"):
        for pod in active:
            ctx.delete_pod(pod)
        active = []
    elif not meta.get("deletionTimestamp"):
        if completions is None:
            want = 0 if succeeded else parallelism
        else:
            want = max(0, min(parallelism, int(completions) - len(succeeded)))
        if len(active) > want:
            for extra in deletion_order(active)[: len(active) - want]:
                ctx.delete_pod(extra)
        elif len(active) < want:
            backoff = _backoff_until(tracker, uid, failures=len(failed))
            if backoff is not None and backoff > now_seconds:
                ctx.wake_after(key, backoff - now_seconds)
            else:
                await _create_pods(
                    ctx,
                    job=job,
                    active=active,
                    count=want - len(active),
                    indexed=indexed,
                    done_indexes=done_indexes,
                    completions=completions,
                )
    _write_status(ctx, key=key, status=status, tracker=tracker, uid=uid, indexed=indexed)


def _ending(
    ctx: ControllerContext,
    *,
    spec: dict[str, Any],
    status: dict[str, Any],
    completions: object,
    succeeded: int,
    failed: int,
    active: list[dict[str, Any]],
) -> tuple[str, str, bool] | None:
    if completions is not None and succeeded >= int(str(completions)):
        return "CompletionsReached", "Reached expected number of succeeded pods", True
    if completions is None and succeeded > 0 and not active:
        return "CompletionsReached", "Reached expected number of succeeded pods", True
    if failed > int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT)):
        return "BackoffLimitExceeded", "Job has reached the specified backoff limit", False
    deadline = spec.get("activeDeadlineSeconds")
    started = parse_timestamp(status.get("startTime"))
    if deadline is not None and started is not None:
        ends = started + timedelta(seconds=int(deadline))
        if ends <= ctx.now:
            return "DeadlineExceeded", "Job was active longer than specified deadline", False
    return None


def _finished_at(pod: dict[str, Any], default: float) -> float:
    """``getFinishedTime``: the last container's ``terminated.finishedAt``, else ``default``."""
    moments = [
        parse_timestamp(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for s in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    found = [m.timestamp() for m in moments if m is not None]
    return max(found) if found else default


def _started(status: dict[str, Any], default: float) -> float:
    started = parse_timestamp(status.get("startTime"))
    return started.timestamp() if started is not None else default


def _backoff_until(tracker: JobTracker, uid: str, *, failures: int) -> float | None:
    last = tracker.last_failure.get(uid)
    if last is None or failures == 0:
        return None
    return last + min(BACKOFF_MAX, BACKOFF_BASE * 2.0 ** (failures - 1))


async def _create_pods(
    ctx: ControllerContext,
    *,
    job: dict[str, Any],
    active: list[dict[str, Any]],
    count: int,
    indexed: bool,
    done_indexes: set[int],
    completions: object,
) -> None:
    meta = job["metadata"]
    template = (job.get("spec") or {}).get("template") or {}
    workload = workload_of(template, str(meta["name"]))
    labels = {JOB_NAME_LABEL: str(meta["name"]), CONTROLLER_UID_LABEL: str(meta["uid"])}
    annotations: dict[str, str] = {}
    template_annotations = (template.get("metadata") or {}).get("annotations") or {}
    run_seconds = (meta.get("annotations") or {}).get(RUN_SECONDS_ANNOTATION)
    if RUN_SECONDS_ANNOTATION not in template_annotations and run_seconds is not None:
        annotations[RUN_SECONDS_ANNOTATION] = str(run_seconds)
    if indexed:
        busy = {_index_of(p) for p in active}
        total = int(str(completions))
        free = [i for i in range(total) if i not in done_indexes and i not in busy][:count]
        for completion_index in free:
            pod = pod_from_template(
                template=template,
                owner=job,
                workload=workload,
                index=completion_index,
                generate_name=f"{meta['name']}-{completion_index}-",
                labels={**labels, COMPLETION_INDEX: str(completion_index)},
                annotations={**annotations, COMPLETION_INDEX: str(completion_index)},
            )
            pod["spec"]["hostname"] = f"{meta['name']}-{completion_index}"
            await ctx.create(pod)
        return
    for _ in range(count):
        pod = pod_from_template(
            template=template,
            owner=job,
            workload=workload,
            index=ctx.index.free_index(meta["namespace"], workload),
            labels=labels,
            annotations=annotations,
        )
        await ctx.create(pod)


def _write_status(
    ctx: ControllerContext,
    *,
    key: tuple[str, str, str],
    status: dict[str, Any],
    tracker: JobTracker,
    uid: str,
    indexed: bool,
) -> None:
    current = ctx.index.get(*key)
    if current is None:
        return
    active = [p for p in ctx.index.children(uid, "pods") if is_active(p)]
    status["active"] = len(active)
    status["ready"] = sum(1 for p in active if is_ready(p))
    status["succeeded"] = len(tracker.succeeded.get(uid, ()))
    status["failed"] = len(tracker.failed.get(uid, ()))
    if indexed:
        status["completedIndexes"] = _format_indexes(tracker.completed_indexes.get(uid, set()))
    suspended = bool((current.get("spec") or {}).get("suspend")) and not _finished(status)
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Suspended"]
    if suspended:
        conditions.append(
            _condition(
                "Suspended", reason="JobSuspended", message="Job suspended", stamp=ctx.timestamp
            )
        )
        previous = (current.get("status") or {}).get("conditions") or []
        old = next((c for c in previous if c.get("type") == "Suspended"), None)
        if old is not None:
            conditions[-1] = old  # unchanged: keep its times
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    ctx.update_status(current, status)
