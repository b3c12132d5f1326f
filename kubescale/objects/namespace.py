"""``core/v1.Namespace``: kubescale reads its metadata (labels, for namespace selectors) and
phase."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["Namespace", "NamespaceStatus"]


class NamespaceStatus(TypedDict, total=False):
    """``core/v1.NamespaceStatus``."""

    phase: str


class Namespace(TypedDict, total=False):
    """``core/v1.Namespace``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    status: NamespaceStatus
