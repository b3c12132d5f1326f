"""``core/v1.ConfigMap``: the cluster autoscaler's priority expander configuration and its
status ConfigMap."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["ConfigMap"]


class ConfigMap(TypedDict, total=False):
    """``core/v1.ConfigMap``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    data: dict[str, str]
    binaryData: dict[str, str]
