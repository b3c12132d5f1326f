"""``VerticalPodAutoscalerCheckpoint`` v3 as upstream writes and reads it.

Status fields (``VerticalPodAutoscalerCheckpointStatus``): ``lastUpdateTime``, ``version``
(``"v3"``; any other version is a load error), ``cpuHistogram`` and ``memoryHistogram``
(``HistogramCheckpoint{referenceTimestamp, bucketWeights map[int]uint32, totalWeight}``),
``firstSampleStart``, ``lastSampleStart``, ``totalSamplesCount``.

JSON as Go's ``encoding/json`` produces it: ``metav1.Time`` is RFC 3339 in UTC with whole
seconds, and ``null`` for the zero time (``omitempty`` never drops a struct); an empty
``bucketWeights`` map, a zero ``totalWeight`` and a zero ``totalSamplesCount`` are omitted; map
keys are decimal strings. Reading accepts what ``metav1.Time`` accepts (RFC 3339, fractional
seconds and offsets included) and bucket keys as strings or integers.

Times are microseconds since Go's zero time
(:func:`kubescale.controllers.vpa.model.go_math.go_micros`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from kubescale.base.times import parse_time as parse_metav1_time
from kubescale.controllers.vpa.model.go_math import GO_ZERO_TIME, from_go_micros, go_micros
from kubescale.objects.vpa_checkpoint import (
    HistogramCheckpoint,
    VerticalPodAutoscalerCheckpoint,
    VerticalPodAutoscalerCheckpointStatus,
)

__all__ = [
    "CHECKPOINT_API_VERSION",
    "CHECKPOINT_KIND",
    "SUPPORTED_CHECKPOINT_VERSION",
    "CheckpointFormatError",
    "checkpoint_name",
    "checkpoint_object",
    "format_time",
    "parse_histogram",
    "parse_time",
]

SUPPORTED_CHECKPOINT_VERSION = "v3"
CHECKPOINT_API_VERSION = "autoscaling.k8s.io/v1"
CHECKPOINT_KIND = "VerticalPodAutoscalerCheckpoint"
_MICROS_PER_SECOND = 1_000_000


class CheckpointFormatError(ValueError):
    """A checkpoint (or part of one) that upstream would fail to decode or load."""


def format_time(micros: int) -> str | None:
    """metav1.Time JSON: ``null`` for the zero time, else RFC 3339 UTC in whole seconds."""
    if micros == 0:
        return None
    moment = from_go_micros(micros - micros % _MICROS_PER_SECOND)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> int:
    """metav1.Time from JSON (``None``/``""`` = zero time) as microseconds since Go's zero."""
    if value is None or value == "":
        return 0
    if isinstance(value, datetime):
        return go_micros(value)
    if not isinstance(value, str):
        raise CheckpointFormatError(f"time {value!r} is not a string")
    moment = parse_metav1_time(value)
    if moment is None:
        raise CheckpointFormatError(f"time {value!r} is not RFC 3339")
    return go_micros(moment) if moment != GO_ZERO_TIME else 0


def parse_histogram(checkpoint: HistogramCheckpoint) -> tuple[dict[int, int], float, int]:
    """A ``HistogramCheckpoint``: ``(bucketWeights, totalWeight, referenceTimestamp)``."""
    # Read as sent (a stored object, not validated): each field is checked here.
    raw_weights: object = checkpoint.get("bucketWeights") or {}
    if not isinstance(raw_weights, Mapping):
        raise CheckpointFormatError("bucketWeights is not a map")
    weights: dict[int, int] = {}
    for key, weight in raw_weights.items():
        try:
            bucket = int(key)
        except (TypeError, ValueError) as error:
            raise CheckpointFormatError(f"bucket key {key!r} is not an integer") from error
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight < 2**32:
            raise CheckpointFormatError(f"bucket weight {weight!r} is not a uint32")
        weights[bucket] = weight
    total: object = checkpoint.get("totalWeight", 0.0)
    if isinstance(total, bool) or not isinstance(total, int | float):
        raise CheckpointFormatError(f"totalWeight {total!r} is not a number")
    return weights, float(total), parse_time(checkpoint.get("referenceTimestamp"))


def histogram_json(
    bucket_weights: Mapping[int, int], total_weight: float, reference_us: int
) -> HistogramCheckpoint:
    """A ``HistogramCheckpoint`` as encoding/json writes it (``omitempty`` fields dropped)."""
    result: HistogramCheckpoint = {"referenceTimestamp": format_time(reference_us)}
    if bucket_weights:
        result["bucketWeights"] = {
            str(bucket): weight for bucket, weight in sorted(bucket_weights.items())
        }
    if total_weight != 0:
        result["totalWeight"] = total_weight
    return result


def checkpoint_name(vpa_name: str, container_name: str) -> str:
    """``fmt.Sprintf("%s-%s", vpaName, containerName)``."""
    return f"{vpa_name}-{container_name}"


def checkpoint_object(
    *,
    namespace: str,
    vpa_name: str,
    container_name: str,
    status: VerticalPodAutoscalerCheckpointStatus,
) -> VerticalPodAutoscalerCheckpoint:
    """The ``VerticalPodAutoscalerCheckpoint`` object the checkpoint writer creates."""
    return {
        "apiVersion": CHECKPOINT_API_VERSION,
        "kind": CHECKPOINT_KIND,
        "metadata": {"name": checkpoint_name(vpa_name, container_name), "namespace": namespace},
        "spec": {"vpaObjectName": vpa_name, "containerName": container_name},
        "status": status,
    }
