"""``coordination.k8s.io/v1`` ``Lease``: leader election and the webhook's status lease."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ObjectMeta

__all__ = ["Lease", "LeaseSpec"]


class LeaseSpec(TypedDict, total=False):
    """``LeaseSpec`` (times are ``metav1.MicroTime``)."""

    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class Lease(TypedDict, total=False):
    """``Lease``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LeaseSpec
