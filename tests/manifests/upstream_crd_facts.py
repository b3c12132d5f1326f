"""Upstream's VPA CRDs as facts (kubernetes/autoscaler vertical-pod-autoscaler/deploy/
vpa-v1-crd-gen.yaml).

Read off upstream's generated CRD (controller-gen from pkg/apis/autoscaling.k8s.io/v1/types.go,
the version with per-VPA target percentiles): names, versions, printer columns, the CEL rules,
the Quantity pattern, and every field of every version's schema as ``path: descriptor`` where
the descriptor is ``type [format] [min=N] [nullable] [enum=a|b] [required=x,y] [atomic]
[preserve-unknown] [cel=N]``, ``quantity`` for an int-or-string Quantity and ``resources`` for a
ResourceList (an object of Quantities). ``[]`` stands for array items. Descriptions are not
facts of the schema and are not compared.
"""

from __future__ import annotations

from typing import Any, Final

GROUP: Final = "autoscaling.k8s.io"
APPROVAL_ANNOTATION: Final = (
    "api-approved.kubernetes.io",
    "https://github.com/kubernetes/kubernetes/pull/63797",
)

QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

VPA_NAMES: Final = {
    "kind": "VerticalPodAutoscaler",
    "listKind": "VerticalPodAutoscalerList",
    "plural": "verticalpodautoscalers",
    "singular": "verticalpodautoscaler",
    "shortNames": ["vpa"],
}
CHECKPOINT_NAMES: Final = {
    "kind": "VerticalPodAutoscalerCheckpoint",
    "listKind": "VerticalPodAutoscalerCheckpointList",
    "plural": "verticalpodautoscalercheckpoints",
    "singular": "verticalpodautoscalercheckpoint",
    "shortNames": ["vpacheckpoint"],
}

# Each version without its schema and printer columns.
VPA_VERSIONS: Final[list[dict[str, Any]]] = [
    {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}},
    {
        "name": "v1beta2",
        "served": False,
        "storage": False,
        "deprecated": True,
        "deprecationWarning": "autoscaling.k8s.io/v1beta2 API is deprecated",
        "subresources": {"status": {}},
    },
]
CHECKPOINT_VERSIONS: Final[list[dict[str, Any]]] = [
    {"name": "v1", "served": True, "storage": True},
    {"name": "v1beta2", "served": False, "storage": False},
]

VPA_PRINTER_COLUMNS: Final = [
    {"name": "Mode", "type": "string", "jsonPath": ".spec.updatePolicy.updateMode"},
    {
        "name": "CPU",
        "type": "string",
        "jsonPath": ".status.recommendation.containerRecommendations[0].target.cpu",
    },
    {
        "name": "Mem",
        "type": "string",
        "jsonPath": ".status.recommendation.containerRecommendations[0].target.memory",
    },
    {
        "name": "Provided",
        "type": "string",
        "jsonPath": ".status.conditions[?(@.type=='RecommendationProvided')].status",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "MinReplicas",
        "type": "integer",
        "priority": 1,
        "jsonPath": ".spec.updatePolicy.minReplicas",
    },
    {
        "name": "OOMSeconds",
        "type": "integer",
        "priority": 1,
        "jsonPath": ".spec.updatePolicy.evictAfterOOMSeconds",
    },
]

STARTUP_BOOST_RULES: Final = [
    {
        "rule": "(self.type == 'Factor') == has(self.factor)",
        "message": "factor is required when type is Factor and forbidden otherwise",
    },
    {
        "rule": "(self.type == 'Quantity') == has(self.quantity)",
        "message": "quantity is required when type is Quantity and forbidden otherwise",
    },
]

VPA_V1_FIELDS: Final[dict[str, str]] = {
    ".": "object required=spec",
    "apiVersion": "string",
    "kind": "string",
    "metadata": "object",
    "spec": "object required=targetRef",
    "spec.recommenders": "array",
    "spec.recommenders[]": "object required=name",
    "spec.recommenders[].name": "string",
    "spec.resourcePolicy": "object",
    "spec.resourcePolicy.containerPolicies": "array",
    "spec.resourcePolicy.containerPolicies[]": "object",
    "spec.resourcePolicy.containerPolicies[].containerName": "string",
    "spec.resourcePolicy.containerPolicies[].controlledResources": "array",
    "spec.resourcePolicy.containerPolicies[].controlledResources[]": "string",
    "spec.resourcePolicy.containerPolicies[].controlledValues": (
        "string enum=RequestsAndLimits|RequestsOnly"
    ),
    "spec.resourcePolicy.containerPolicies[].maxAllowed": "resources",
    "spec.resourcePolicy.containerPolicies[].memoryAggregationIntervalCount": "integer int64 min=1",
    "spec.resourcePolicy.containerPolicies[].memoryAggregationIntervalSeconds": (
        "integer int32 min=1"
    ),
    "spec.resourcePolicy.containerPolicies[].minAllowed": "resources",
    "spec.resourcePolicy.containerPolicies[].mode": "string enum=Auto|Off",
    "spec.resourcePolicy.containerPolicies[].oomBumpUpRatio": "quantity",
    "spec.resourcePolicy.containerPolicies[].oomMinBumpUp": "quantity",
    "spec.resourcePolicy.containerPolicies[].startupBoost": "object",
    "spec.resourcePolicy.containerPolicies[].startupBoost.cpu": "object required=type cel=2",
    "spec.resourcePolicy.containerPolicies[].startupBoost.cpu.durationSeconds": "integer int32",
    "spec.resourcePolicy.containerPolicies[].startupBoost.cpu.factor": "integer int32",
    "spec.resourcePolicy.containerPolicies[].startupBoost.cpu.quantity": "quantity",
    "spec.resourcePolicy.containerPolicies[].startupBoost.cpu.type": "string enum=Factor|Quantity",
    "spec.resourcePolicy.containerPolicies[].targetCPUPercentile": "quantity",
    "spec.resourcePolicy.containerPolicies[].targetMemoryPercentile": "quantity",
    "spec.startupBoost": "object",
    "spec.startupBoost.cpu": "object required=type cel=2",
    "spec.startupBoost.cpu.durationSeconds": "integer int32",
    "spec.startupBoost.cpu.factor": "integer int32",
    "spec.startupBoost.cpu.quantity": "quantity",
    "spec.startupBoost.cpu.type": "string enum=Factor|Quantity",
    "spec.targetRef": "object required=kind,name atomic",
    "spec.targetRef.apiVersion": "string",
    "spec.targetRef.kind": "string",
    "spec.targetRef.name": "string",
    "spec.updatePolicy": "object",
    "spec.updatePolicy.evictAfterOOMSeconds": "integer int32 min=1",
    "spec.updatePolicy.evictionRequirements": "array",
    "spec.updatePolicy.evictionRequirements[]": "object required=changeRequirement,resources",
    "spec.updatePolicy.evictionRequirements[].changeRequirement": (
        "string enum=TargetHigherThanRequests|TargetLowerThanRequests"
    ),
    "spec.updatePolicy.evictionRequirements[].resources": "array",
    "spec.updatePolicy.evictionRequirements[].resources[]": "string",
    "spec.updatePolicy.minReplicas": "integer int32",
    "spec.updatePolicy.updateMode": (
        "string enum=Off|Initial|Recreate|InPlaceOrRecreate|InPlace|Auto"
    ),
    "status": "object",
    "status.conditions": "array",
    "status.conditions[]": "object required=status,type",
    "status.conditions[].lastTransitionTime": "string date-time",
    "status.conditions[].message": "string",
    "status.conditions[].reason": "string",
    "status.conditions[].status": "string",
    "status.conditions[].type": "string",
    "status.conditions[].observedGeneration": "integer int64 min=0",
    "status.observedGeneration": "integer int64 min=0",
    "status.recommendation": "object",
    "status.recommendation.containerRecommendations": "array",
    "status.recommendation.containerRecommendations[]": "object required=target",
    "status.recommendation.containerRecommendations[].containerName": "string",
    "status.recommendation.containerRecommendations[].lowerBound": "resources",
    "status.recommendation.containerRecommendations[].target": "resources",
    "status.recommendation.containerRecommendations[].uncappedTarget": "resources",
    "status.recommendation.containerRecommendations[].upperBound": "resources",
}

VPA_V1BETA2_FIELDS: Final[dict[str, str]] = {
    ".": "object required=spec",
    "apiVersion": "string",
    "kind": "string",
    "metadata": "object",
    "spec": "object required=targetRef",
    "spec.resourcePolicy": "object",
    "spec.resourcePolicy.containerPolicies": "array",
    "spec.resourcePolicy.containerPolicies[]": "object",
    "spec.resourcePolicy.containerPolicies[].containerName": "string",
    "spec.resourcePolicy.containerPolicies[].maxAllowed": "resources",
    "spec.resourcePolicy.containerPolicies[].minAllowed": "resources",
    "spec.resourcePolicy.containerPolicies[].mode": "string enum=Auto|Off",
    "spec.targetRef": "object required=kind,name atomic",
    "spec.targetRef.apiVersion": "string",
    "spec.targetRef.kind": "string",
    "spec.targetRef.name": "string",
    "spec.updatePolicy": "object",
    "spec.updatePolicy.updateMode": "string enum=Off|Initial|Recreate|Auto",
    "status": "object",
    "status.conditions": "array",
    "status.conditions[]": "object required=status,type",
    "status.conditions[].lastTransitionTime": "string date-time",
    "status.conditions[].message": "string",
    "status.conditions[].reason": "string",
    "status.conditions[].status": "string",
    "status.conditions[].type": "string",
    "status.recommendation": "object",
    "status.recommendation.containerRecommendations": "array",
    "status.recommendation.containerRecommendations[]": "object required=target",
    "status.recommendation.containerRecommendations[].containerName": "string",
    "status.recommendation.containerRecommendations[].lowerBound": "resources",
    "status.recommendation.containerRecommendations[].target": "resources",
    "status.recommendation.containerRecommendations[].uncappedTarget": "resources",
    "status.recommendation.containerRecommendations[].upperBound": "resources",
}

CHECKPOINT_FIELDS: Final[dict[str, str]] = {
    ".": "object",
    "apiVersion": "string",
    "kind": "string",
    "metadata": "object",
    "spec": "object",
    "spec.containerName": "string",
    "spec.vpaObjectName": "string",
    "status": "object",
    "status.cpuHistogram": "object",
    "status.cpuHistogram.bucketWeights": "object preserve-unknown",
    "status.cpuHistogram.referenceTimestamp": "string date-time nullable",
    "status.cpuHistogram.totalWeight": "number",
    "status.firstSampleStart": "string date-time nullable",
    "status.lastSampleStart": "string date-time nullable",
    "status.lastUpdateTime": "string date-time nullable",
    "status.memoryHistogram": "object",
    "status.memoryHistogram.bucketWeights": "object preserve-unknown",
    "status.memoryHistogram.referenceTimestamp": "string date-time nullable",
    "status.memoryHistogram.totalWeight": "number",
    "status.totalSamplesCount": "integer",
    "status.version": "string",
}
