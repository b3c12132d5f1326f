"""From merged aggregates to a VPA's ``status.recommendation`` (``routines/recommender.go
UpdateVPAs``, ``routines/vpa.go``, ``logic/recommender.go``, the post-processors).

Order, as upstream:

1. the VPA's aggregates are merged per container name together with checkpointed initial state
   (done by :class:`kubescale.controllers.vpa.model.cluster_state.ClusterState`); containers whose
   policy has
   ``mode: Off`` are dropped, the rest take their policy's controlled resources
   (``GetContainerNameToAggregateStateMap``);
2. each container is estimated (:func:`kubescale.controllers.vpa.model.estimators.estimate`) with
   the pod minimums split over the number of containers left, then filtered to its controlled
   resources;
3. ``MapToListOfRecommendedContainerResources``: sorted by container name; CPU as
   ``NewScaledQuantity(millicores, -3)``, memory as ``NewQuantity(bytes, BinarySI)``, each
   rounded up to ``--round-cpu-millicores`` / ``--round-memory-bytes`` when those are not 1
   (``int64(ceil(v / scale)) * scale``); ``uncappedTarget`` = target;
4. post-processors: integer CPU when ``--cpu-integer-post-processor-enabled`` (annotation
   ``vpa-post-processor.kubernetes.io/<container>_integerCPU: "true"`` -> CPU of all four lists
   rounded up to whole cores), then capping (``ApplyVPAPolicy``): per container policy
   ``minAllowed`` then ``maxAllowed`` — merged with the global
   ``--container-recommendation-max-allowed-*`` caps, the VPA's value winning per resource — on
   target, lowerBound and upperBound (never uncappedTarget); zero bounds mean none.

Entries are API JSON (``target`` always present, the other lists omitted when empty).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

from kubescale.controllers.vpa.api.vpa_policy import (
    allowed_bounds,
    cap_to_max,
    cap_to_min,
    container_policy,
)
from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState
from kubescale.controllers.vpa.model.estimators import ContainerEstimate, estimate
from kubescale.controllers.vpa.model.model_config import CPU, MEMORY, RecommenderConfig
from kubescale.objects.quantities import BINARY_SI, DECIMAL_SI, Quantity, parse_quantity
from kubescale.objects.vpa import PodResourcePolicy, RecommendedContainerResources

__all__ = [
    "INTEGER_CPU_ANNOTATION_PREFIX",
    "INTEGER_CPU_ANNOTATION_SUFFIX",
    "apply_integer_cpu",
    "apply_policy_caps",
    "build_recommendation",
    "cpu_quantity",
    "format_container_recommendation",
    "memory_quantity",
    "recommend_for_vpa",
]

INTEGER_CPU_ANNOTATION_PREFIX = "vpa-post-processor.kubernetes.io/"
INTEGER_CPU_ANNOTATION_SUFFIX = "_integerCPU"
_BOUNDS = ("target", "lowerBound", "upperBound", "uncappedTarget")
_CAPPED_BOUNDS = ("target", "lowerBound", "upperBound")
_KIB = 1024


def _round_up(value: int, scale: int) -> int:
    """RoundUpToScale."""
    return math.ceil(float(value) / float(scale)) * scale


@lru_cache(maxsize=65536)
def _cpu_text(millicores: int) -> str:
    return str(Quantity.from_milli(millicores, DECIMAL_SI))


@lru_cache(maxsize=65536)
def _memory_text(value: int) -> str:
    return str(Quantity.from_int(value, BINARY_SI))


def cpu_quantity(millicores: int, config: RecommenderConfig) -> str:
    """QuantityFromCPUAmount (+ ``--round-cpu-millicores``)."""
    if config.round_cpu_millicores != 1 and millicores != 0 and config.round_cpu_millicores > 0:
        millicores = _round_up(millicores, config.round_cpu_millicores)
    return _cpu_text(millicores)


def _humanized(value: int) -> str:
    """HumanizeMemoryQuantity."""
    for power, suffix in ((4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki")):
        unit = _KIB**power
        if value >= unit:
            return f"{value / unit:.2f}{suffix}"
    return str(value)


def memory_quantity(value: int, config: RecommenderConfig) -> str:
    """QuantityFromMemoryAmount (+ ``--round-memory-bytes``, deprecated humanize)."""
    if config.round_memory_bytes != 1 and value != 0 and config.round_memory_bytes > 0:
        value = _round_up(value, config.round_memory_bytes)
    if config.humanize_memory and value != 0:
        return str(parse_quantity(_humanized(Quantity.from_int(value).value())))
    return _memory_text(value)


def format_container_recommendation(
    name: str,
    estimate_: ContainerEstimate,
    controlled: Sequence[str],
    config: RecommenderConfig,
) -> dict[str, Any]:
    """One ``containerRecommendations`` entry, filtered to the controlled resources."""
    target: dict[str, str] = {}
    lower: dict[str, str] = {}
    upper: dict[str, str] = {}
    for resource in controlled:
        if resource == CPU:
            target[CPU] = cpu_quantity(estimate_.target_cpu, config)
            lower[CPU] = cpu_quantity(estimate_.lower_cpu, config)
            upper[CPU] = cpu_quantity(estimate_.upper_cpu, config)
        elif resource == MEMORY:
            target[MEMORY] = memory_quantity(estimate_.target_memory, config)
            lower[MEMORY] = memory_quantity(estimate_.lower_memory, config)
            upper[MEMORY] = memory_quantity(estimate_.upper_memory, config)
    entry: dict[str, Any] = {"containerName": name, "target": _ordered(target)}
    for key, resources in (
        ("lowerBound", lower),
        ("upperBound", upper),
        ("uncappedTarget", target),
    ):
        if resources:
            entry[key] = _ordered(resources)
    return entry


def _ordered(resources: Mapping[str, str]) -> dict[str, str]:
    return {name: resources[name] for name in sorted(resources)}


def apply_integer_cpu(
    entries: list[dict[str, Any]], annotations: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """IntegerCPUPostProcessor: CPU of annotated containers rounded up to whole cores."""
    wanted: set[str] = set()
    for key, value in (annotations or {}).items():
        if (
            key.startswith(INTEGER_CPU_ANNOTATION_PREFIX)
            and key.endswith(INTEGER_CPU_ANNOTATION_SUFFIX)
            and value == "true"
        ):
            name = key[
                len(INTEGER_CPU_ANNOTATION_PREFIX) : len(key) - len(INTEGER_CPU_ANNOTATION_SUFFIX)
            ]
            if name:
                wanted.add(name)
    result = []
    for entry in entries:
        copied = {k: (dict(v) if isinstance(v, dict) else v) for k, v in entry.items()}
        if entry.get("containerName") in wanted:
            for bound in _BOUNDS:
                resources = copied.get(bound)
                if isinstance(resources, dict) and CPU in resources:
                    quantity = Quantity.from_json(resources[CPU])
                    cores = math.ceil(float(quantity.milli_value()) / 1000)
                    resources[CPU] = str(Quantity.from_int(int(cores), quantity.format))
        result.append(copied)
    return result


def apply_policy_caps(
    entries: list[dict[str, Any]],
    resource_policy: PodResourcePolicy | None,
    global_max_allowed: Mapping[str, Quantity] | None,
) -> list[dict[str, Any]]:
    """ApplyVPAPolicy (recommender capping post-processor)."""
    if resource_policy is None and not global_max_allowed:
        return entries
    result = []
    for entry in entries:
        name = str(entry.get("containerName", ""))
        policy = container_policy(name, resource_policy)
        if policy is None and not global_max_allowed:
            result.append(entry)
            continue
        minimum, maximum = allowed_bounds(policy)
        if global_max_allowed:
            if policy is None or policy.get("maxAllowed") is None:
                maximum = dict(global_max_allowed)
            else:
                for resource, quantity in global_max_allowed.items():
                    maximum.setdefault(resource, quantity)
        copied = dict(entry)
        for bound in _CAPPED_BOUNDS:
            resources = entry.get(bound)
            if not isinstance(resources, Mapping):
                continue
            capped: dict[str, str] = {}
            for resource, text in resources.items():
                original = Quantity.from_json(text)
                value, _ = cap_to_min(original, resource, minimum)
                value, _ = cap_to_max(value, resource, maximum)
                capped[resource] = str(value) if value != original else text
            copied[bound] = capped
        result.append(copied)
    return result


def build_recommendation(
    estimates: Mapping[str, ContainerEstimate],
    controlled: Mapping[str, Sequence[str]],
    *,
    config: RecommenderConfig,
    resource_policy: PodResourcePolicy | None,
    annotations: Mapping[str, str] | None,
) -> list[RecommendedContainerResources]:
    """Steps 3 and 4: the sorted API entries, then the post-processors."""
    entries = [
        format_container_recommendation(name, estimates[name], controlled[name], config)
        for name in sorted(estimates)
    ]
    if config.cpu_integer_post_processor_enabled:
        entries = apply_integer_cpu(entries, annotations)
    capped = apply_policy_caps(entries, resource_policy, config.global_max_allowed)
    # The entries format_container_recommendation built: containerName and ResourceLists.
    return cast(list[RecommendedContainerResources], capped)


def recommend_for_vpa(
    states: Mapping[str, AggregateContainerState],
    *,
    config: RecommenderConfig,
    resource_policy: PodResourcePolicy | None,
    annotations: Mapping[str, str] | None,
) -> list[RecommendedContainerResources]:
    """The VPA's ``containerRecommendations`` from its merged aggregates per container name
    (``mode: Off`` containers already removed and policies applied, see module docstring)."""
    count = len(states)
    return build_recommendation(
        {name: estimate(state, config, containers=count) for name, state in states.items()},
        {name: state.get_controlled_resources() for name, state in states.items()},
        config=config,
        resource_policy=resource_policy,
        annotations=annotations,
    )
