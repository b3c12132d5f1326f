"""VPA objects as upstream VPA's documentation writes them, to apply against kubescale's CRDs.

Each object is the YAML a user of upstream VPA already has (quoting and all: ``updateMode:
"Off"``, ``cpu: 1`` as a YAML integer): upstream's docs/quickstart.md and examples/hamster.yaml
(resource policy, explicit Recreate), examples/redis.yaml (no updatePolicy, here at v1),
docs/examples.md (evictionRequirements), docs/features.md (InPlaceOrRecreate), and objects
using the remaining fields of the v1 types (reference §4: Off/Initial/Auto modes, RequestsOnly,
minReplicas, container mode Off, recommenders, the gated per-VPA fields and startup boost); the
status is what upstream's recommender writes, the checkpoint its v3 format (reference §2.6).
Names are unique so that all of them can be applied into one namespace at once.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

VPA_EXAMPLES_YAML: Final = """\
# docs/quickstart.md and examples/hamster.yaml: a resource policy for every container.
apiVersion: "autoscaling.k8s.io/v1"
kind: VerticalPodAutoscaler
metadata:
  name: hamster-vpa
spec:
  targetRef:
    apiVersion: "apps/v1"
    kind: Deployment
    name: hamster
  resourcePolicy:
    containerPolicies:
      - containerName: '*'
        minAllowed:
          cpu: 100m
          memory: 50Mi
        maxAllowed:
          cpu: 1
          memory: 500Mi
        controlledResources: ["cpu", "memory"]
---
# docs/quickstart.md "Example VPA configuration": an explicit Recreate.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: my-app-vpa
spec:
  targetRef:
    apiVersion: "apps/v1"
    kind:       Deployment
    name:       my-app
  updatePolicy:
    updateMode: "Recreate"
---
# Recommendation only.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: hamster-vpa-off
spec:
  targetRef:
    apiVersion: "apps/v1"
    kind: Deployment
    name: hamster
  updatePolicy:
    updateMode: "Off"
  resourcePolicy:
    containerPolicies:
      - containerName: '*'
        controlledResources: ["cpu", "memory"]
---
# Requests set at pod creation only, on a StatefulSet.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: cache-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: StatefulSet
    name: cache-statefulset
  updatePolicy:
    updateMode: "Initial"
---
# docs/features.md "In-Place Updates".
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: my-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: my-app
  updatePolicy:
    updateMode: "InPlaceOrRecreate"
---
# Limits left alone (reference §1.5, RequestsOnly): requests only, memory only.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: requests-only-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
  resourcePolicy:
    containerPolicies:
      - containerName: '*'
        controlledValues: RequestsOnly
        controlledResources: ["memory"]
---
# Per-VPA minReplicas: evict even a single-replica workload.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: single-replica-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: singleton
  updatePolicy:
    updateMode: Recreate
    minReplicas: 1
---
# docs/examples.md "Controlling eviction behavior based on scaling direction and resource".
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: scale-up-only-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
  updatePolicy:
    evictionRequirements:
      - resources: ["cpu", "memory"]
        changeRequirement: TargetHigherThanRequests
---
# A sidecar excluded, an alternative recommender, a DaemonSet target.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: agent-vpa
spec:
  recommenders:
    - name: performance
  targetRef:
    apiVersion: apps/v1
    kind: DaemonSet
    name: node-agent
  updatePolicy:
    updateMode: Recreate
  resourcePolicy:
    containerPolicies:
      - containerName: istio-proxy
        mode: "Off"
      - containerName: agent
        mode: Auto
        minAllowed:
          cpu: 50m
        maxAllowed:
          cpu: "2"
          memory: 4Gi
---
# examples/redis.yaml: no updatePolicy at all (the webhook defaults it to Recreate).
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: redis-vpa
spec:
  targetRef:
    apiVersion: "apps/v1"
    kind: Deployment
    name: redis-master
---
# The deprecated Auto mode still parses (the webhook warns).
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: legacy-auto-vpa
spec:
  targetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: legacy
  updatePolicy:
    updateMode: Auto
---
# Every gated field of the v1 API (startup boost, per-VPA OOM and memory aggregation settings,
# per-VPA target percentiles): the schema keeps all of them; the webhook decides on the gates.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata:
  name: every-field-vpa
spec:
  targetRef:
    apiVersion: batch/v1
    kind: CronJob
    name: nightly
  updatePolicy:
    updateMode: InPlace
    minReplicas: 2
    evictAfterOOMSeconds: 600
    evictionRequirements:
      - resources: ["memory"]
        changeRequirement: TargetLowerThanRequests
  startupBoost:
    cpu:
      type: Factor
      factor: 3
      durationSeconds: 10
  resourcePolicy:
    containerPolicies:
      - containerName: app
        mode: Auto
        controlledValues: RequestsAndLimits
        controlledResources: ["cpu", "memory"]
        minAllowed:
          cpu: 10m
          memory: 64Mi
        maxAllowed:
          cpu: 4
          memory: 8Gi
        oomBumpUpRatio: "1.5"
        oomMinBumpUp: 200Mi
        memoryAggregationIntervalSeconds: 3600
        memoryAggregationIntervalCount: 24
        targetCPUPercentile: "0.95"
        targetMemoryPercentile: 950m
        startupBoost:
          cpu:
            type: Quantity
            quantity: 500m
"""

VPA_STATUS_YAML: Final = """\
# What upstream's recommender writes into status (the status subresource).
status:
  observedGeneration: 1
  conditions:
    - type: RecommendationProvided
      status: "True"
      lastTransitionTime: "2025-01-01T00:00:00Z"
      observedGeneration: 1
  recommendation:
    containerRecommendations:
      - containerName: hamster
        target:
          cpu: 587m
          memory: "262144k"
        lowerBound:
          cpu: 25m
          memory: "262144k"
        upperBound:
          cpu: "1"
          memory: 500Mi
        uncappedTarget:
          cpu: 587m
          memory: "262144k"
"""

CHECKPOINT_YAML: Final = """\
# Reference §2.6: the recommender's v3 checkpoint, bucket index → weight scaled to 10000.
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscalerCheckpoint
metadata:
  name: hamster-vpa-hamster
spec:
  vpaObjectName: hamster-vpa
  containerName: hamster
status:
  version: v3
  lastUpdateTime: "2025-01-02T03:04:05Z"
  firstSampleStart: "2025-01-01T00:00:00Z"
  lastSampleStart: "2025-01-02T03:04:00Z"
  totalSamplesCount: 1523
  cpuHistogram:
    referenceTimestamp: "2025-01-02T00:00:00Z"
    bucketWeights:
      "0": 10000
      "12": 4311
      "37": 17
    totalWeight: 87.39281
  memoryHistogram:
    referenceTimestamp: "2025-01-01T00:00:00Z"
    bucketWeights:
      "81": 10000
    totalWeight: 2.5
"""


def vpa_examples() -> list[dict[str, Any]]:
    """The example VerticalPodAutoscalers, parsed."""
    return [doc for doc in yaml.safe_load_all(VPA_EXAMPLES_YAML) if doc]


def vpa_status() -> dict[str, Any]:
    status: dict[str, Any] = yaml.safe_load(VPA_STATUS_YAML)["status"]
    return status


def checkpoint_example() -> dict[str, Any]:
    checkpoint: dict[str, Any] = yaml.safe_load(CHECKPOINT_YAML)
    return checkpoint
