"""Patch metadata of the built-in kinds, as a declarative table.

Strategic merge patch needs, for every list and map in a built-in object, the ``patchStrategy``
and ``patchMergeKey`` struct tags of the Go type in k8s.io/api. This module restates those tags
as data: a type name maps each JSON field to a :class:`FieldRule`, and a field's rule names the
type of its value (of each element, for a list) so the merge can walk down.

Only fields that carry a tag, or that lead to a type with tagged fields, are listed. Everything
else follows the untagged defaults of apimachinery's strategicpatch package: maps merge key by
key, lists are replaced wholesale. In particular these lists are atomic upstream and therefore
absent here: ``PodSpec.tolerations``, ``NodeSpec.taints`` (only ``Taint.key`` carries a tag,
which has no effect on a string), ``Container.args``/``command``/``envFrom``/``resizePolicy``,
``PodStatus.containerStatuses``, ``HorizontalPodAutoscalerSpec.metrics``,
``StatefulSetSpec.volumeClaimTemplates``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Strategy = Literal["", "merge", "replace"]


@dataclass(frozen=True, kw_only=True)
class FieldRule:
    """The patch tags of one field and the type of its value."""

    strategy: Strategy = ""
    """``merge``: a list merges element-wise (by ``merge_key``, or as a set of primitives);
    ``replace``: a map is replaced wholesale; ``""``: the default (maps merge, lists replace)."""
    merge_key: str = ""
    """``patchMergeKey``: the element field that identifies an element of a merging list."""
    retain_keys: bool = False
    """``patchStrategy`` includes ``retainKeys`` (the client sends a ``$retainKeys`` list; the
    server honours the directive wherever it appears, so this is informational)."""
    value_type: str | None = None
    """Schema type of the value (of each element for lists); ``None`` = no tagged fields below."""


def _nested(value_type: str) -> FieldRule:
    return FieldRule(value_type=value_type)


def _merge_by(key: str, value_type: str | None = None, *, retain_keys: bool = False) -> FieldRule:
    return FieldRule(
        strategy="merge", merge_key=key, value_type=value_type, retain_keys=retain_keys
    )


_MERGE_PRIMITIVES = FieldRule(strategy="merge")
_CONDITIONS = _merge_by("type")
_OBJECT_META = {"metadata": _nested("ObjectMeta")}

# Type name (the Go type in k8s.io/api, unqualified) → JSON field → rule.
SCHEMA: Mapping[str, Mapping[str, FieldRule]] = {
    # meta/v1 ObjectMeta: finalizers `patchStrategy:"merge"`; ownerReferences merge on uid.
    "ObjectMeta": {
        "finalizers": _MERGE_PRIMITIVES,
        "ownerReferences": _merge_by("uid"),
    },
    # core/v1
    "Pod": {**_OBJECT_META, "spec": _nested("PodSpec"), "status": _nested("PodStatus")},
    "PodTemplate": {**_OBJECT_META, "template": _nested("PodTemplateSpec")},
    "PodTemplateSpec": {**_OBJECT_META, "spec": _nested("PodSpec")},
    "PodSpec": {
        "volumes": _merge_by("name", retain_keys=True),
        "initContainers": _merge_by("name", "Container"),
        "containers": _merge_by("name", "Container"),
        "ephemeralContainers": _merge_by("name", "Container"),
        "imagePullSecrets": _merge_by("name"),
        "hostAliases": _merge_by("ip"),
        "topologySpreadConstraints": _merge_by("topologyKey"),
        "schedulingGates": _merge_by("name"),
        "resourceClaims": _merge_by("name", retain_keys=True),
    },
    # Container and EphemeralContainerCommon carry the same tags.
    "Container": {
        "ports": _merge_by("containerPort"),
        "env": _merge_by("name"),
        "volumeMounts": _merge_by("mountPath"),
        "volumeDevices": _merge_by("devicePath"),
    },
    "PodStatus": {
        "conditions": _CONDITIONS,
        "podIPs": _merge_by("ip"),
        "hostIPs": _merge_by("ip"),
        "resourceClaimStatuses": _merge_by("name", retain_keys=True),
    },
    "Node": {**_OBJECT_META, "spec": _nested("NodeSpec"), "status": _nested("NodeStatus")},
    "NodeSpec": {"podCIDRs": _MERGE_PRIMITIVES},
    "NodeStatus": {"conditions": _CONDITIONS, "addresses": _merge_by("type")},
    "Namespace": {**_OBJECT_META, "status": _nested("ConditionedStatus")},
    "PersistentVolumeClaim": {**_OBJECT_META, "status": _nested("ConditionedStatus")},
    "Service": {**_OBJECT_META, "spec": _nested("ServiceSpec")},
    "ServiceSpec": {"ports": _merge_by("port")},
    "ServiceAccount": {**_OBJECT_META, "secrets": _merge_by("name")},
    "ReplicationController": {
        **_OBJECT_META,
        "spec": _nested("PodTemplateOwnerSpec"),
        "status": _nested("ConditionedStatus"),
    },
    # Any `status` whose only tagged field is `conditions` merged on `type`: NamespaceStatus,
    # PersistentVolumeClaimStatus, ReplicationControllerStatus, Deployment/ReplicaSet/
    # StatefulSet/DaemonSet/Job status, PodDisruptionBudgetStatus, HorizontalPodAutoscalerStatus.
    "ConditionedStatus": {"conditions": _CONDITIONS},
    # Any spec whose tagged content is all under `template` (a PodTemplateSpec): ReplicaSetSpec,
    # StatefulSetSpec, DaemonSetSpec, JobSpec, ReplicationControllerSpec.
    "PodTemplateOwnerSpec": {"template": _nested("PodTemplateSpec")},
    # apps/v1
    "Deployment": {
        **_OBJECT_META,
        "spec": _nested("DeploymentSpec"),
        "status": _nested("ConditionedStatus"),
    },
    "DeploymentSpec": {
        "template": _nested("PodTemplateSpec"),
        "strategy": FieldRule(retain_keys=True),
    },
    "PodTemplateOwner": {
        **_OBJECT_META,
        "spec": _nested("PodTemplateOwnerSpec"),
        "status": _nested("ConditionedStatus"),
    },
    # batch/v1
    "CronJob": {**_OBJECT_META, "spec": _nested("CronJobSpec")},
    "CronJobSpec": {"jobTemplate": _nested("JobTemplateSpec")},
    "JobTemplateSpec": {**_OBJECT_META, "spec": _nested("PodTemplateOwnerSpec")},
    # policy/v1, autoscaling/v2
    "StatusConditionsOwner": {**_OBJECT_META, "status": _nested("ConditionedStatus")},
    # admissionregistration.k8s.io/v1: webhooks merge on name.
    "WebhookConfiguration": {**_OBJECT_META, "webhooks": _merge_by("name")},
    # Every other built-in kind: only ObjectMeta's tags apply.
    "MetaOnly": _OBJECT_META,
}

# (API group, kind) → schema type of the whole object.
ROOT_TYPES: Mapping[tuple[str, str], str] = {
    ("", "Pod"): "Pod",
    ("", "PodTemplate"): "PodTemplate",
    ("", "Node"): "Node",
    ("", "Namespace"): "Namespace",
    ("", "PersistentVolumeClaim"): "PersistentVolumeClaim",
    ("", "Service"): "Service",
    ("", "ServiceAccount"): "ServiceAccount",
    ("", "ReplicationController"): "ReplicationController",
    ("apps", "Deployment"): "Deployment",
    ("apps", "ReplicaSet"): "PodTemplateOwner",
    ("apps", "StatefulSet"): "PodTemplateOwner",
    ("apps", "DaemonSet"): "PodTemplateOwner",
    ("batch", "Job"): "PodTemplateOwner",
    ("batch", "CronJob"): "CronJob",
    ("policy", "PodDisruptionBudget"): "StatusConditionsOwner",
    ("autoscaling", "HorizontalPodAutoscaler"): "StatusConditionsOwner",
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): "WebhookConfiguration",
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): "WebhookConfiguration",
}

# API groups whose types are compiled into kube-apiserver (and apiextensions-apiserver). Only
# these accept application/strategic-merge-patch+json; custom resources answer 415.
BUILTIN_GROUPS: frozenset[str] = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)

DEFAULT_RULE = FieldRule()


def group_of(api_version: str) -> str:
    """``apps/v1`` → ``apps``; ``v1`` → ``""`` (the core group)."""
    group, slash, _version = api_version.rpartition("/")
    return group if slash else ""


def root_type(api_version: str, kind: str) -> str | None:
    """The schema type of an object, ``None`` for kinds outside the built-in groups."""
    group = group_of(api_version)
    if group not in BUILTIN_GROUPS:
        return None
    return ROOT_TYPES.get((group, kind), "MetaOnly")


def field_rule(type_name: str | None, field: str) -> FieldRule:
    """The rule of ``field`` in ``type_name``; the untagged default when either is unknown."""
    if type_name is None:
        return DEFAULT_RULE
    return SCHEMA.get(type_name, {}).get(field, DEFAULT_RULE)
