"""``autoscaling/v1`` ``Scale`` (``k8s.io/api/autoscaling/v1/types.go``): a scalable resource's
``/scale`` subresource, which the HPA reads (and patches) for its target."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["Scale", "ScaleSpec", "ScaleStatus"]


class ScaleSpec(TypedDict, total=False):
    """``ScaleSpec``."""

    replicas: int


class ScaleStatus(TypedDict, total=False):
    """``ScaleStatus``: ``selector`` is the label selector in its string form."""

    replicas: int
    selector: str


class Scale(TypedDict, total=False):
    """``Scale``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ScaleSpec
    status: ScaleStatus
