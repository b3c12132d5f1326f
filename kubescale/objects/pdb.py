"""``policy/v1.PodDisruptionBudget``: evictions and scale-down respect it."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import Condition, LabelSelectorObject, ObjectMeta

__all__ = ["PodDisruptionBudget", "PodDisruptionBudgetSpec", "PodDisruptionBudgetStatus"]


class PodDisruptionBudgetSpec(TypedDict, total=False):
    """``policy/v1.PodDisruptionBudgetSpec`` (``minAvailable``/``maxUnavailable`` are
    ``IntOrString``)."""

    selector: LabelSelectorObject
    minAvailable: int | str
    maxUnavailable: int | str
    unhealthyPodEvictionPolicy: str


class PodDisruptionBudgetStatus(TypedDict, total=False):
    """``policy/v1.PodDisruptionBudgetStatus``."""

    observedGeneration: int
    disruptionsAllowed: int
    currentHealthy: int
    desiredHealthy: int
    expectedPods: int
    conditions: list[Condition]


class PodDisruptionBudget(TypedDict, total=False):
    """``policy/v1.PodDisruptionBudget``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec
    status: PodDisruptionBudgetStatus
