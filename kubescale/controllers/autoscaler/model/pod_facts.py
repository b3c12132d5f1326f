"""What the cluster autoscaler reads off a pod: owner, priority, kind, age, scale-up delay.

Upstream's helpers (``pkg/utils/pod``, ``pkg/utils/drain``, ``pkg/core/utils``):

* a **DaemonSet pod** has a controller ownerReference of kind DaemonSet (or carries
  ``cluster-autoscaler.kubernetes.io/daemonset-pod: "true"``);
* a **mirror (static) pod** carries the ``kubernetes.io/config.mirror`` annotation;
* a pod's **priority** is ``spec.priority`` (the Priority admission plugin fills it); kubescale
  also resolves ``priorityClassName`` / the ``globalDefault`` PriorityClass for pods written
  without admission, as the simulated scheduler does; none → 0;
* **expendable**: priority below ``--expendable-pods-priority-cutoff`` (``IsExpendablePod``);
* the per-pod **scale-up delay** annotation ``cluster-autoscaler.kubernetes.io/pod-scale-up-delay``
  (a Go duration) can only lengthen ``--new-pod-scale-up-delay`` (``filterOutYoungPods``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from kubescale.base.go_time import parse_duration
from kubescale.base.times import parse_time
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.priority_class import PriorityClass
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "DAEMONSET_POD_ANNOTATION",
    "MIRROR_POD_ANNOTATION",
    "POD_SCALE_UP_DELAY_ANNOTATION",
    "SAFE_TO_EVICT_ANNOTATION",
    "SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION",
    "OwnerRef",
    "PriorityResolver",
    "controller_of",
    "creation_time",
    "is_daemonset_pod",
    "is_mirror_pod",
    "is_terminal",
    "parse_time",
    "pod_annotations",
    "pod_id",
    "pod_scale_up_delay",
]

MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"
DAEMONSET_POD_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/daemonset-pod"
POD_SCALE_UP_DELAY_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
SAFE_TO_EVICT_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: Final = (
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class OwnerRef:
    """A pod's controller ownerReference."""

    kind: str
    name: str
    uid: str
    api_version: str


def pod_id(pod: Pod) -> str:
    """``namespace/name``."""
    meta = Meta(pod).raw
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_annotations(pod: Pod) -> Mapping[str, str]:
    return Meta(pod).raw.get("annotations") or {}


def creation_time(obj: Pod | Node) -> datetime:
    """``metadata.creationTimestamp`` (the epoch when missing)."""
    return parse_time(Meta(obj).raw.get("creationTimestamp")) or _EPOCH


def controller_of(pod: Pod) -> OwnerRef | None:
    """The ownerReference with ``controller: true``."""
    for ref in Meta(pod).raw.get("ownerReferences") or ():
        if ref.get("controller") is True:
            return OwnerRef(
                kind=str(ref.get("kind", "")),
                name=str(ref.get("name", "")),
                uid=str(ref.get("uid", "")),
                api_version=str(ref.get("apiVersion", "")),
            )
    return None


def is_mirror_pod(pod: Pod) -> bool:
    return MIRROR_POD_ANNOTATION in pod_annotations(pod)


def is_daemonset_pod(pod: Pod) -> bool:
    """``pod_util.IsDaemonSetPod``: controlled by a DaemonSet, or annotated as one."""
    owner = controller_of(pod)
    if owner is not None and owner.kind == "DaemonSet":
        return True
    return pod_annotations(pod).get(DAEMONSET_POD_ANNOTATION) == "true"


def is_terminal(pod: Pod) -> bool:
    return status_of(pod).get("phase") in ("Succeeded", "Failed")


class PriorityResolver:
    """A pod's priority: ``spec.priority``, else its PriorityClass, else the global default."""

    def __init__(self, priority_classes: Sequence[PriorityClass] | None = None) -> None:
        self._classes: dict[str, int] = {}
        self._default = 0
        for pc in priority_classes or ():
            value = int(pc.get("value") or 0)
            self._classes[Meta(pc).name] = value
            if pc.get("globalDefault"):
                self._default = value

    def priority(self, pod: Pod) -> int:
        spec = spec_of(pod)
        value = spec.get("priority")
        if isinstance(value, int):
            return value
        name = spec.get("priorityClassName")
        if name and name in self._classes:
            return self._classes[str(name)]
        return self._default


def pod_scale_up_delay(pod: Pod, default: timedelta) -> timedelta:
    """The delay before ``pod`` may trigger a scale-up: the flag's, or the annotation's when
    longer (a shorter or unparsable annotation is ignored, as upstream logs and ignores it)."""
    raw = pod_annotations(pod).get(POD_SCALE_UP_DELAY_ANNOTATION)
    if raw is None:
        return default
    try:
        annotated = timedelta(seconds=parse_duration(raw))
    except argparse.ArgumentTypeError:  # unparsable: ignored
        return default
    return annotated if annotated > default else default
