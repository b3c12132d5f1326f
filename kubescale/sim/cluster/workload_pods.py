"""The pod rules every simulated workload controller shares (``pkg/controller/controller_utils.go``
and ``pkg/api/v1/pod``), on raw pod dicts.

* states: *active* (``IsPodActive``: not Succeeded/Failed, no deletionTimestamp), *terminal*,
  *ready* (condition Ready=True), *available* (ready for ``minReadySeconds``, measured from the
  Ready condition's lastTransitionTime);
* pods from a template (``GetPodFromTemplate``): the template's labels, annotations, finalizers
  and spec, an ownerReference with ``controller: true`` and ``blockOwnerDeletion: true``, plus
  the simulator's :data:`~.usage_models.WORKLOAD_LABEL` and
  :data:`~.usage_models.POD_INDEX_ANNOTATION`;
* template hashes (``controller.ComputeHash``): FNV-1a 32 of the template, the collision count
  appended little-endian when set, printed as decimal and mapped through ``rand.SafeEncodeString``.
  Upstream hashes the template as ``spew`` prints it; here its canonical JSON (sorted keys) is
  hashed, so names differ from a real cluster's but are just as stable;
* which pods to delete first when scaling down (``ActivePodsWithRanks.Less``, without the
  logarithmic bucketing of ready and creation times).
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from .usage_models import POD_INDEX_ANNOTATION, WORKLOAD_LABEL

__all__ = [
    "POD_DELETION_COST",
    "available_since",
    "controller_ref",
    "deletion_order",
    "equal_ignoring_label",
    "is_active",
    "is_available",
    "is_ready",
    "is_terminal",
    "is_terminating",
    "owner_reference",
    "parse_timestamp",
    "pod_from_template",
    "pod_index",
    "scaled_value",
    "template_hash",
    "workload_of",
]

POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
_SAFE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
"""``rand.SafeEncodeString``'s alphabet: no vowels, no confusable characters."""
_PHASE_ORDER: Final = {"Pending": 0, "Unknown": 1, "Running": 2}
_EPOCH: Final = datetime.fromisoformat("1970-01-01T00:00:00+00:00")

PodT = TypeVar("PodT", bound=Mapping[str, Any])


def parse_timestamp(text: object) -> datetime | None:
    """A metav1.Time string (``2026-01-01T00:00:00Z``, fractions allowed), or ``None``."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if isinstance(status, Mapping) else {}


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return _status(pod).get("phase") in ("Succeeded", "Failed")


def is_terminating(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def is_active(pod: Mapping[str, Any]) -> bool:
    """``controller.IsPodActive``."""
    return not is_terminal(pod) and not is_terminating(pod)


def _ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in _status(pod).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition
    return None


def is_ready(pod: Mapping[str, Any]) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True."""
    condition = _ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def available_since(pod: Mapping[str, Any], min_ready_seconds: int) -> datetime | None:
    """When a ready pod is (or will be) available: Ready's lastTransitionTime + minReadySeconds.

    ``None`` for a pod that is not ready. A ready pod without a transition time counts as
    available at once (as ``IsPodAvailable`` does for ``minReadySeconds == 0``).
    """
    condition = _ready_condition(pod)
    if condition is None or condition.get("status") != "True":
        return None
    since = parse_timestamp(condition.get("lastTransitionTime"))
    if since is None:
        return _EPOCH
    return since + timedelta(seconds=min_ready_seconds)


def is_available(pod: Mapping[str, Any], *, min_ready_seconds: int, now: datetime) -> bool:
    """``podutil.IsPodAvailable``."""
    since = available_since(pod, min_ready_seconds)
    return since is not None and (min_ready_seconds == 0 or since <= now)


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``metav1.GetControllerOf``: the ownerReference with ``controller: true``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """``metav1.NewControllerRef``."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_index(pod: Mapping[str, Any]) -> int | None:
    """The pod's :data:`POD_INDEX_ANNOTATION` as an integer, if it has a valid one."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_INDEX_ANNOTATION)
    try:
        value = int(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


def workload_of(template: Mapping[str, Any], default: str) -> str:
    """The workload name for a template's pods: its own :data:`WORKLOAD_LABEL` if it sets one
    (a scenario may group several objects as one workload), else ``default``."""
    labels = (template.get("metadata") or {}).get("labels") or {}
    value = labels.get(WORKLOAD_LABEL)
    return value if isinstance(value, str) and value else default


def pod_from_template(
    *,
    template: Mapping[str, Any],
    owner: Mapping[str, Any],
    workload: str,
    index: int,
    name: str | None = None,
    generate_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``controller.GetPodFromTemplate`` plus the simulator's workload label and pod index."""
    template_meta = template.get("metadata") or {}
    pod_labels = {**(template_meta.get("labels") or {}), **(labels or {})}
    pod_labels.setdefault(WORKLOAD_LABEL, workload)
    pod_annotations = {
        **(template_meta.get("annotations") or {}),
        **(annotations or {}),
        POD_INDEX_ANNOTATION: str(index),
    }
    meta: dict[str, Any] = {
        "namespace": owner["metadata"]["namespace"],
        "labels": pod_labels,
        "annotations": pod_annotations,
        "ownerReferences": [owner_reference(owner)],
    }
    if name is not None:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name or f"{owner['metadata']['name']}-"
    if template_meta.get("finalizers"):
        meta["finalizers"] = list(template_meta["finalizers"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def _fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def template_hash(template: Mapping[str, Any], collision_count: int | None = None) -> str:
    """``controller.ComputeHash`` over the template's canonical JSON (see the module docs)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little")
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(_fnv32a(data)))


def equal_ignoring_label(a: Mapping[str, Any], b: Mapping[str, Any], *, label: str) -> bool:
    """``EqualIgnoreHash``: two pod templates equal once ``label`` is dropped from both."""

    def without(template: Mapping[str, Any]) -> Mapping[str, Any]:
        meta = template.get("metadata") or {}
        labels = meta.get("labels") or {}
        if label not in labels:
            return template
        rest = {k: v for k, v in labels.items() if k != label}
        return {**template, "metadata": {**meta, "labels": rest}}

    return without(a) == without(b)


def scaled_value(value: object, total: int, *, round_up: bool, default: str = "25%") -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int, or ``"N%"`` of ``total``."""
    if value is None:
        value = default
    if isinstance(value, bool):
        raise ValueError(f"invalid int-or-percent {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    share = int(text[:-1]) * total
    return math.ceil(share / 100) if round_up else share // 100


def _restarts(pod: Mapping[str, Any]) -> int:
    statuses = _status(pod).get("containerStatuses") or []
    return max((int(s.get("restartCount") or 0) for s in statuses), default=0)


def _deletion_cost(pod: Mapping[str, Any]) -> int:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD_DELETION_COST)
    try:
        return int(text) if isinstance(text, str) else 0
    except ValueError:
        return 0


def _seconds(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


def deletion_order(pods: Iterable[PodT]) -> list[PodT]:
    """Pods sorted the way ``ActivePodsWithRanks`` deletes them, first to go first: unscheduled,
    then Pending < Unknown < Running, not ready, lower deletion cost, more pods of the same
    owner on the node, ready for less time, more restarts, newer; ties by name."""
    ordered = list(pods)
    per_node = Counter(str((p.get("spec") or {}).get("nodeName") or "") for p in ordered)

    def key(pod: PodT) -> tuple[Any, ...]:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        ready = is_ready(pod)
        condition = _ready_condition(pod)
        ready_at = parse_timestamp(condition.get("lastTransitionTime")) if condition else None
        created = parse_timestamp((pod.get("metadata") or {}).get("creationTimestamp"))
        return (
            1 if node else 0,
            _PHASE_ORDER.get(str(_status(pod).get("phase")), 3),
            1 if ready else 0,
            _deletion_cost(pod),
            -per_node[node] if node else 0,
            -_seconds(ready_at) if ready else 0.0,
            -_restarts(pod),
            -_seconds(created),
            str((pod.get("metadata") or {}).get("name")),
        )

    return sorted(ordered, key=key)
