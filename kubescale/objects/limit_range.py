"""``core/v1.LimitRange``: the VPA caps recommendations by it."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta, ResourceList

__all__ = ["LimitRange", "LimitRangeItem", "LimitRangeSpec"]


class LimitRangeItem(TypedDict, total=False):
    """``core/v1.LimitRangeItem``: ``type`` is ``Container``, ``Pod`` or
    ``PersistentVolumeClaim``."""

    type: str
    max: ResourceList
    min: ResourceList
    default: ResourceList
    defaultRequest: ResourceList
    maxLimitRequestRatio: ResourceList


class LimitRangeSpec(TypedDict, total=False):
    """``core/v1.LimitRangeSpec``."""

    limits: list[LimitRangeItem]


class LimitRange(TypedDict, total=False):
    """``core/v1.LimitRange``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LimitRangeSpec
