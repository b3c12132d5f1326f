"""Which resources an HPA scales a workload on -- the resources a VPA must leave alone.

Beyond upstream (off by default, flag-gated by the caller): a VPA and an HPA both reacting to
the same resource fight each other -- the VPA raises the request, utilisation (usage/request)
drops, the HPA scales in, usage per pod rises, and round again (kubernetes/autoscaler #6060,
#6247; the documented workaround is VPA ``controlledResources: [memory]`` with an HPA on CPU).
With the check on, the webhook leaves the request (and the limit derived from it) of every such
resource untouched for pods of that workload.

An HPA targets the workload when it is in the same namespace and its ``scaleTargetRef`` names
the same kind and name (the VPA index compares the same three; the API version is not compared,
so ``apps/v1`` and ``extensions/v1beta1`` Deployments are the same target). It scales on a
resource when a metric of type ``Resource`` or ``ContainerResource`` names ``cpu`` or
``memory``. An ``autoscaling/v2`` HPA without metrics defaults to 80% average CPU utilisation
(``SetDefaults_HorizontalPodAutoscaler``), and an ``autoscaling/v1`` HPA only ever scales on
CPU (``targetCPUUtilizationPercentage``), so both count as CPU.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.views import Meta, mapping, spec_of
from kubescale.objects.views import ObjectRef as ControllerRef

__all__ = [
    "CONFLICT_RESOURCES",
    "hpa_conflict_message",
    "hpa_scaled_resources",
    "hpas_scaled_resources",
]

CONFLICT_RESOURCES = frozenset({"cpu", "memory"})
_CPU = frozenset({"cpu"})


def _targets(hpa: HorizontalPodAutoscaler, controller: ControllerRef) -> bool:
    namespace = Meta(hpa).raw.get("namespace")
    target = mapping(spec_of(hpa).get("scaleTargetRef"))
    return (
        namespace == controller.namespace
        and target.get("kind") == controller.kind
        and target.get("name") == controller.name
    )


def _metric_resource(metric: Mapping[str, Any]) -> str | None:
    kind = metric.get("type")
    if kind == "Resource":
        source = mapping(metric.get("resource"))
    elif kind == "ContainerResource":
        source = mapping(metric.get("containerResource"))
    else:
        return None
    name = source.get("name")
    return name if isinstance(name, str) else None


def hpa_scaled_resources(
    hpa: HorizontalPodAutoscaler, controller: ControllerRef | None
) -> frozenset[str]:
    """The resources (``cpu``/``memory``) ``hpa`` scales ``controller`` on; empty if unrelated."""
    if controller is None or not _targets(hpa, controller):
        return frozenset()
    spec = spec_of(hpa)
    api_version = hpa.get("apiVersion")
    if api_version == "autoscaling/v1" or "targetCPUUtilizationPercentage" in spec:
        return _CPU
    metrics = spec.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        return _CPU  # autoscaling/v2 defaulting: 80% average CPU utilisation
    entries: list[object] = list(metrics)  # a malformed entry is skipped
    names = {_metric_resource(m) for m in entries if isinstance(m, Mapping)}
    return frozenset(name for name in names if name in CONFLICT_RESOURCES)


def hpas_scaled_resources(
    hpas: Iterable[HorizontalPodAutoscaler], controller: ControllerRef | None
) -> frozenset[str]:
    """The union of :func:`hpa_scaled_resources` over several HPAs."""
    scaled: frozenset[str] = frozenset()
    for hpa in hpas:
        scaled |= hpa_scaled_resources(hpa, controller)
    return scaled


def hpa_conflict_message(
    *, target: ControllerRef, hpa_names: Sequence[str], resources: frozenset[str]
) -> str:
    """The ``HPAConflict`` event's message (the webhook's and the updater's): stable across
    pods and loops, so repeats are aggregated."""
    names = ", ".join(hpa_names) if hpa_names else "an HPA"
    scaled = ", ".join(sorted(resources))
    return (
        f"HorizontalPodAutoscaler {names} scales {target.kind}/{target.name} on {scaled}: "
        f"the {scaled} requests and limits of its pods are left as they are"
    )
