"""``core/v1.PersistentVolumeClaim``: the descheduler's evictor reads a claim's storage class
(``DefaultEvictor``'s ``ignorePodsWithoutPVC``/storage-class checks)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["PersistentVolumeClaim", "PersistentVolumeClaimSpec"]


class PersistentVolumeClaimSpec(TypedDict, total=False):
    """``core/v1.PersistentVolumeClaimSpec``."""

    storageClassName: str
    volumeName: str


class PersistentVolumeClaim(TypedDict, total=False):
    """``core/v1.PersistentVolumeClaim``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec
