"""What the controller lookups read of a workload controller (issue 29).

:class:`~kubescale.kube.controller_lookups.ControllerLookups` answers "which controller owns
this, and which pods does it select?" from the informers of the well-known controller kinds
(upstream VPA's ``controllerfetcher`` informs on the same seven). That answer reads, of each
controller, its metadata (name, namespace, uid, resourceVersion, ``ownerReferences`` — the
chain up to the top-most controller) and its selector: ``spec.selector`` (a LabelSelector; a
ReplicationController's label map) or a CronJob's ``spec.jobTemplate.spec.template``'s labels.

A process whose only reader of these kinds is that answer (the admission webhook alone:
upstream's admission controller reads nothing else of them either) caches this projection of
them instead of the kinds' own (which keep the pod template for the recommender, the updater
and the HPA): a Deployment's or a ReplicaSet's pod template is most of what it holds.
"""

from __future__ import annotations

from typing import Any, TypedDict

from kubescale.objects.meta import ObjectMeta, OwnerReference

__all__ = ["ControllerMeta", "ControllerSelectorSpec", "WorkloadController"]


class ControllerMeta(TypedDict, total=False):
    """A controller's identity and owners (its labels and annotations are not read: the
    informer diffs by uid and resourceVersion, the lookups key by namespace and name)."""

    name: str
    namespace: str
    uid: str
    resourceVersion: str
    deletionTimestamp: str
    ownerReferences: list[OwnerReference]


class _TemplateMetadata(TypedDict, total=False):
    metadata: ObjectMeta


class _JobTemplateSpec(TypedDict, total=False):
    template: _TemplateMetadata


class _JobTemplate(TypedDict, total=False):
    spec: _JobTemplateSpec


class ControllerSelectorSpec(TypedDict, total=False):
    """A controller's selector: a LabelSelector, or a ReplicationController's label map (kept
    as sent); a CronJob's job template's pod labels."""

    selector: Any
    jobTemplate: _JobTemplate


class WorkloadController(TypedDict, total=False):
    """A well-known controller as the controller lookups read it (module docstring)."""

    apiVersion: str
    kind: str
    metadata: ControllerMeta
    spec: ControllerSelectorSpec
