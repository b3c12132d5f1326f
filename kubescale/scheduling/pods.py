"""Facts about pods the descheduler's plugins share (upstream ``pkg/descheduler/pod``,
``pkg/utils``).

* ``ListPodsOnANode`` leaves out ``Succeeded``/``Failed`` pods, ``ListAllPodsOnANode`` keeps
  them (:func:`is_terminal`);
* ``SortPodsBasedOnPriorityLowToHigh`` (:func:`sort_low_to_high`): pods without a priority
  first, then ascending priority; equal priorities by QoS class BestEffort < Burstable <
  Guaranteed; within one class, pods *without* the ``prefer-no-eviction`` annotation first.
  The sort is stable, so the caller's order breaks the remaining ties (upstream's sort is not
  stable: its ties fall in no particular order);
* ``PodToleratesTaints`` (:func:`tolerates_taints_of_any`): the pod tolerates every taint (of
  every effect) of at least one of the nodes, and — upstream's quirk — has at least as many
  tolerations as that node has taints;
* a pod's requests are ``PodRequests`` on the spec (``PodRequestsAndLimits`` passes empty
  options: no resize status), in the units of :mod:`kubescale.scheduling.pod_resources`;
* the QoS class is ``status.qosClass`` when set, else computed from the spec as the kubelet
  does (``qos.GetPodQOS``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Final

from kubescale.base.times import parse_time
from kubescale.objects.meta import OwnerReference
from kubescale.objects.node import Taint
from kubescale.objects.pod import Pod, Toleration, Volume
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.scheduling.filters import tolerates
from kubescale.scheduling.pod_resources import Amounts, amounts_of, pod_requests

__all__ = [
    "EVICT_ANNOTATION",
    "MIRROR_ANNOTATION",
    "PREFER_NO_EVICTION_ANNOTATION",
    "SOURCE_ANNOTATION",
    "SYSTEM_CRITICAL_PRIORITY",
    "creation_time",
    "has_local_storage",
    "has_pvc",
    "is_daemonset_pod",
    "is_mirror",
    "is_static",
    "is_terminal",
    "is_terminating",
    "owner_refs",
    "pod_id",
    "pod_priority",
    "qos_class",
    "requests_of",
    "restart_count",
    "sort_low_to_high",
    "tolerates_taints_of_any",
]

EVICT_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/evict"
PREFER_NO_EVICTION_ANNOTATION: Final = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION: Final = "kubernetes.io/config.source"
SYSTEM_CRITICAL_PRIORITY: Final = 2_000_000_000
"""``scheduling.SystemCriticalPriority``: system-cluster-critical and above."""
_TERMINAL: Final = frozenset({"Succeeded", "Failed"})
_QOS_RANK: Final = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
_QOS_RESOURCES: Final = ("cpu", "memory")


def pod_id(pod: Pod) -> str:
    """``namespace/name``."""
    meta = Meta(pod).raw
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_annotations(pod: Pod) -> Mapping[str, str]:
    return Meta(pod).raw.get("annotations") or {}


def owner_refs(pod: Pod) -> list[OwnerReference]:
    return list(Meta(pod).raw.get("ownerReferences") or ())


def is_terminal(pod: Pod) -> bool:
    """``Succeeded`` or ``Failed``: left out by ``ListPodsOnANode``."""
    return status_of(pod).get("phase") in _TERMINAL


def is_terminating(pod: Pod) -> bool:
    """``IsPodTerminating``: a deletionTimestamp is set."""
    return bool(Meta(pod).raw.get("deletionTimestamp"))


def is_mirror(pod: Pod) -> bool:
    return MIRROR_ANNOTATION in pod_annotations(pod)


def is_static(pod: Pod) -> bool:
    """``IsStaticPod``: a ``kubernetes.io/config.source`` other than ``api``."""
    source = pod_annotations(pod).get(SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_daemonset_pod(pod: Pod) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in owner_refs(pod))


def _volumes(pod: Pod) -> list[Volume]:
    return list(spec_of(pod).get("volumes") or ())


def has_local_storage(pod: Pod) -> bool:
    """Any ``hostPath`` or ``emptyDir`` volume."""
    return any("hostPath" in v or "emptyDir" in v for v in _volumes(pod))


def has_pvc(pod: Pod) -> bool:
    return any("persistentVolumeClaim" in v for v in _volumes(pod))


def pvc_names(pod: Pod) -> list[str]:
    return [
        str((v.get("persistentVolumeClaim") or {}).get("claimName") or "")
        for v in _volumes(pod)
        if "persistentVolumeClaim" in v
    ]


def pod_priority(pod: Pod) -> int | None:
    """``spec.priority`` (admission stamps it from the PriorityClass); ``None`` when unset."""
    value = spec_of(pod).get("priority")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def creation_time(pod: Pod) -> datetime | None:
    return parse_time(Meta(pod).raw.get("creationTimestamp"))


def requests_of(pod: Pod) -> Amounts:
    """``PodRequestsAndLimits`` requests: ``PodRequests`` of the spec (module docstring)."""
    return pod_requests(pod, use_status=False)


def restart_count(pod: Pod, *, including_init: bool) -> int:
    """Σ ``containerStatuses[].restartCount`` (+ init containers' when asked)."""
    status = status_of(pod)
    statuses = [*(status.get("containerStatuses") or ())]
    if including_init:
        statuses += status.get("initContainerStatuses") or ()
    return sum(int(cs.get("restartCount") or 0) for cs in statuses)


def _qos_from_spec(pod: Pod) -> str:
    """``qos.ComputePodQOS`` on cpu and memory; a container's missing request counts as its
    limit (the API server's defaulting)."""
    spec = spec_of(pod)
    requests: Amounts = {}
    limits: Amounts = {}
    guaranteed = True
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = container.get("resources") or {}
        c_limits = {
            k: v
            for k, v in amounts_of(resources.get("limits")).items()
            if k in _QOS_RESOURCES and v != 0
        }
        c_requests = {
            k: v
            for k, v in {**c_limits, **amounts_of(resources.get("requests"))}.items()
            if k in _QOS_RESOURCES and v != 0
        }
        for name, value in c_requests.items():
            requests[name] = requests.get(name, 0) + value
        for name, value in c_limits.items():
            limits[name] = limits.get(name, 0) + value
        if set(c_limits) != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if (
        guaranteed
        and all(limits.get(name) == value for name, value in requests.items())
        and len(requests) == len(limits)
    ):
        return "Guaranteed"
    return "Burstable"


def qos_class(pod: Pod) -> str:
    """``status.qosClass``, else computed from the spec (module docstring)."""
    reported = status_of(pod).get("qosClass")
    if reported in _QOS_RANK:
        return str(reported)
    return _qos_from_spec(pod)


def _priority_key(pod: Pod) -> tuple[int, int, int, int]:
    priority = pod_priority(pod)
    return (
        0 if priority is None else 1,
        priority or 0,
        _QOS_RANK[qos_class(pod)],
        1 if PREFER_NO_EVICTION_ANNOTATION in pod_annotations(pod) else 0,
    )


def sort_low_to_high(pods: Iterable[Pod]) -> list[Pod]:
    """``SortPodsBasedOnPriorityLowToHigh`` (module docstring), stable."""
    return sorted(pods, key=_priority_key)


def tolerates_all(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> bool:
    """``TolerationsTolerateTaintsWithFilter`` with no filter: every taint is tolerated."""
    return all(any(tolerates(t, taint) for t in tolerations) for taint in taints)


def tolerates_taints_of_any(pod: Pod, taints_by_node: Mapping[str, Sequence[Taint]]) -> bool:
    """``PodToleratesTaints`` (module docstring)."""
    tolerations = list(spec_of(pod).get("tolerations") or ())
    for taints in taints_by_node.values():
        if len(tolerations) >= len(taints) and tolerates_all(tolerations, taints):
            return True
    return False
