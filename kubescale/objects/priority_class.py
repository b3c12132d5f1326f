"""``scheduling/v1.PriorityClass``: a pod's priority by name, and the cluster's default."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["PriorityClass"]


class PriorityClass(TypedDict, total=False):
    """``scheduling/v1.PriorityClass``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    value: int
    globalDefault: bool
