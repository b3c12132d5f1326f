"""``metav1`` pieces every kind shares: ``ObjectMeta``, ``OwnerReference``, ``LabelSelector``,
``Condition`` and the reference types.

Field names are the Kubernetes API's (``k8s.io/apimachinery/pkg/apis/meta/v1/types.go``); every
TypedDict is ``total=False``: a field the server left out is absent, and readers keep their
defaults for it.
"""

from __future__ import annotations

from typing import TypedDict

__all__ = [
    "Condition",
    "CrossVersionObjectReference",
    "LabelSelectorObject",
    "LabelSelectorRequirement",
    "ListMeta",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "ResourceList",
]

ResourceList = dict[str, str]
"""``core/v1.ResourceList``: resource name → ``resource.Quantity`` text (``"250m"``, ``"1Gi"``)."""


class OwnerReference(TypedDict, total=False):
    """``metav1.OwnerReference``: one entry of ``metadata.ownerReferences``."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    """``metav1.ObjectMeta``: the fields kubescale reads."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]


# ``metav1.ListMeta``: a list's ``resourceVersion`` and ``continue`` token ("continue" is a
# Python keyword, hence the functional form).
ListMeta = TypedDict(
    "ListMeta", {"resourceVersion": str, "continue": str, "remainingItemCount": int}, total=False
)


class LabelSelectorRequirement(TypedDict, total=False):
    """``metav1.LabelSelectorRequirement``."""

    key: str
    operator: str
    values: list[str]


class LabelSelectorObject(TypedDict, total=False):
    """``metav1.LabelSelector`` as JSON (the parsed form is
    :class:`kubescale.objects.selectors.LabelSelector`)."""

    matchLabels: dict[str, str]
    matchExpressions: list[LabelSelectorRequirement]


class Condition(TypedDict, total=False):
    """A status condition (``metav1.Condition`` and the per-kind ``…Condition`` types share
    these fields)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    lastProbeTime: str
    lastHeartbeatTime: str
    observedGeneration: int


class ObjectReference(TypedDict, total=False):
    """``core/v1.ObjectReference`` (an event's ``involvedObject``, a Machine's ``nodeRef``)."""

    apiVersion: str
    kind: str
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    fieldPath: str


class CrossVersionObjectReference(TypedDict, total=False):
    """``autoscaling.CrossVersionObjectReference`` (a VPA's ``targetRef``, an HPA's
    ``scaleTargetRef``)."""

    apiVersion: str
    kind: str
    name: str
