"""``autoscaling/v1`` ``Scale`` (a ``/scale`` subresource) and the controllers a replica count
is read from (upstream VPA updater's ``getReplicaCount``: RC, ReplicaSet, StatefulSet
``spec.replicas``, DaemonSet ``status.numberReady``; any other kind through its ``/scale``)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.daemon_set import DaemonSet
from kubescale.objects.meta import ObjectMeta
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.replication_controller import ReplicationController
from kubescale.objects.stateful_set import StatefulSet

__all__ = ["ReplicaCountedController", "Scale", "ScaleSpec", "ScaleStatus"]


class ScaleSpec(TypedDict, total=False):
    """``autoscaling/v1.ScaleSpec``."""

    replicas: int


class ScaleStatus(TypedDict, total=False):
    """``autoscaling/v1.ScaleStatus`` (``selector`` is the label selector as text)."""

    replicas: int
    selector: str


class Scale(TypedDict, total=False):
    """``autoscaling/v1.Scale``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ScaleSpec
    status: ScaleStatus


ReplicaCountedController = ReplicaSet | ReplicationController | StatefulSet | DaemonSet | Scale
"""A pod group's controller as its configured size is read: one of the replicated kinds, or
the ``Scale`` of any other kind."""
