"""``scheduling.k8s.io/v1.PriorityClass``: the descheduler's evictor resolves
``priorityThreshold.name`` to its ``value``."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["PriorityClass"]


class PriorityClass(TypedDict, total=False):
    """``scheduling.k8s.io/v1.PriorityClass`` (``value`` is an ``int32`` at the top level, not
    in a spec)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    value: int
    globalDefault: bool
    preemptionPolicy: str
