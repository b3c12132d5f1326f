"""``batch/v1.Job``: a pod controller (and the VPA target a CronJob's pods resolve through)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta
from kubescale.objects.pod import PodTemplateSpec

__all__ = ["Job", "JobSpec", "JobStatus"]


class JobSpec(TypedDict, total=False):
    """``batch/v1.JobSpec``."""

    parallelism: int
    completions: int
    selector: LabelSelectorObject
    template: PodTemplateSpec


class JobStatus(TypedDict, total=False):
    """``batch/v1.JobStatus``."""

    active: int
    succeeded: int
    failed: int
    startTime: str
    completionTime: str


class Job(TypedDict, total=False):
    """``batch/v1.Job``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSpec
    status: JobStatus
