"""The DefaultEvictor plugin: which pods may be evicted at all (upstream ``defaultevictor``).

``Filter(pod)``, in upstream's order (reference §2):

1. the annotation ``descheduler.alpha.kubernetes.io/evict`` → evictable, nothing else checked;
2. ``noEvictionPolicy: Mandatory`` and the annotation
   ``descheduler.alpha.kubernetes.io/prefer-no-eviction`` → not evictable;
3. mirror pods, static pods (``kubernetes.io/config.source`` other than ``api``) and pods being
   deleted → not evictable;
4. every constraint must pass:

   * ``SystemCriticalPods``: priority >= 2000000000 is protected, and a pod with a priority must
     be below the threshold (``priorityThreshold``: its value, or the value of the PriorityClass
     it names; 2000000000 without one); disabling the protection disables both checks;
   * ``FailedBarePods``: a pod without ownerReferences is protected; disabled, a bare pod may go
     only when it has ``Failed``;
   * ``PodsWithLocalStorage`` (hostPath, emptyDir), ``DaemonSetPods``, ``PodsWithPVC`` (every
     PVC, or with ``protectedStorageClasses`` the PVCs of those classes; a PVC that cannot be
     found or has no class then counts as protected), ``PodsWithoutPDB`` (no PDB of the
     namespace selects the pod), ``PodsWithResourceClaims`` (``spec.resourceClaims``);
   * ``labelSelector`` must match; with ``minReplicas`` > 1 a pod with exactly one
     ownerReference needs that many pods sharing the owner's uid; ``minPodAge`` needs
     ``status.startTime`` at least that long ago.

``PreEvictionFilter(pod)``: with ``nodeFit``, the pod must fit another ready node matching the
evictor's ``nodeSelector`` (:meth:`kubescale.scheduling.cycle_view.
CycleView.fits_any`); with ``namespaceLabelSelector``, its namespace's labels must match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Final, Protocol

from kubescale.base.times import parse_time
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.persistent_volume_claim import PersistentVolumeClaim
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.scheduling.cycle_view import node_labels
from kubescale.scheduling.filters import is_node_ready
from kubescale.scheduling.pods import (
    EVICT_ANNOTATION,
    PREFER_NO_EVICTION_ANNOTATION,
    SYSTEM_CRITICAL_PRIORITY,
    has_local_storage,
    has_pvc,
    is_daemonset_pod,
    is_mirror,
    is_static,
    is_terminating,
    owner_refs,
    pod_annotations,
    pod_priority,
    pvc_names,
)

from .policy.evictor_args import (
    DAEMON_SETS,
    FAILED_BARE,
    LOCAL_STORAGE,
    RESOURCE_CLAIMS,
    SYSTEM_CRITICAL,
    WITH_PVC,
    WITHOUT_PDB,
    DefaultEvictorArgs,
)

__all__ = ["DefaultEvictor", "EvictorError", "EvictorInputs", "resolve_priority_threshold"]


class EvictorInputs(Protocol):
    """What the evictor consults besides the pod (a cycle's
    :class:`~.cycle_view.CycleView`, or the scheduler extender's caches)."""

    @property
    def now(self) -> datetime: ...

    @property
    def all_nodes(self) -> Sequence[Node]: ...

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]: ...

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]: ...

    @property
    def pvcs(self) -> Mapping[tuple[str, str], PersistentVolumeClaim]: ...

    @property
    def priority_classes(self) -> Mapping[str, int]: ...

    def owner_count(self, uid: str) -> int: ...

    def fits_any(self, pod: Pod, candidates: Iterable[Node], *, other_nodes_only: bool) -> bool: ...


_STORAGE_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"


class EvictorError(Exception):
    """The evictor cannot be built for this cycle (a PriorityClass it names is missing)."""


def resolve_priority_threshold(args: DefaultEvictorArgs, classes: Mapping[str, int]) -> int:
    """``GetPriorityValueFromPriorityThreshold``: the value, the named class's value, or
    2000000000."""
    threshold = args.priority_threshold
    if threshold is None:
        return SYSTEM_CRITICAL_PRIORITY
    if threshold.value is not None:
        return threshold.value
    if threshold.name:
        if threshold.name not in classes:
            raise EvictorError(f"priorityClass {threshold.name!r} of priorityThreshold not found")
        return classes[threshold.name]
    return SYSTEM_CRITICAL_PRIORITY


class DefaultEvictor:
    """``Filter`` and ``PreEvictionFilter`` of one profile (module docstring)."""

    def __init__(
        self, args: DefaultEvictorArgs, view: EvictorInputs, *, ignore_age: bool = False
    ) -> None:
        """``ignore_age`` leaves ``minPodAge`` out: the scheduler extender asks about a pod
        that has not started yet but will be old enough by a later cycle."""
        self.args = args
        self.view = view
        self.ignore_age = ignore_age
        self.threshold = resolve_priority_threshold(args, view.priority_classes)
        self._fit_nodes: list[Node] | None = None
        self._filter_cache: dict[int, bool] = {}

    # ------------------------------------------------------------------------- Filter

    def filter(self, pod: Pod) -> bool:
        key = id(pod)
        cached = self._filter_cache.get(key)
        if cached is None:
            cached = self._filter_cache[key] = self._filter(pod)
        return cached

    def _filter(self, pod: Pod) -> bool:
        notes = pod_annotations(pod)
        if EVICT_ANNOTATION in notes:
            return True
        if self.args.no_eviction_policy == "Mandatory" and PREFER_NO_EVICTION_ANNOTATION in notes:
            return False
        if is_mirror(pod) or is_static(pod) or is_terminating(pod):
            return False
        return self._constraints_pass(pod)

    def _constraints_pass(self, pod: Pod) -> bool:
        args, enabled = self.args, self.args.protections
        if SYSTEM_CRITICAL in enabled:
            priority = pod_priority(pod)
            if priority is not None and (
                priority >= SYSTEM_CRITICAL_PRIORITY or priority >= self.threshold
            ):
                return False
        refs = owner_refs(pod)
        if FAILED_BARE in enabled:
            if not refs:
                return False
        elif not refs and status_of(pod).get("phase") != "Failed":
            return False
        if LOCAL_STORAGE in enabled and has_local_storage(pod):
            return False
        if DAEMON_SETS in enabled and is_daemonset_pod(pod):
            return False
        if WITH_PVC in enabled and self._pvc_protected(pod):
            return False
        if WITHOUT_PDB in enabled and not self._has_pdb(pod):
            return False
        if RESOURCE_CLAIMS in enabled and spec_of(pod).get("resourceClaims"):
            return False
        if args.label_selector is not None and not args.label_selector.matches(
            Meta(pod).raw.get("labels") or {}
        ):
            return False
        if args.min_replicas > 1 and len(refs) == 1:
            uid = str(refs[0].get("uid") or "")
            if self.view.owner_count(uid) < args.min_replicas:
                return False
        if args.min_pod_age is not None and not self.ignore_age:
            started = parse_time(status_of(pod).get("startTime"))
            if started is None:
                return False
            if (self.view.now - started).total_seconds() < args.min_pod_age:
                return False
        return True

    def _pvc_protected(self, pod: Pod) -> bool:
        if not has_pvc(pod):
            return False
        if not self.args.protected_storage_classes:
            return True
        namespace = str(Meta(pod).raw.get("namespace", ""))
        for claim in pvc_names(pod):
            pvc = self.view.pvcs.get((namespace, claim))
            if pvc is None:
                return True
            storage_class = spec_of(pvc).get("storageClassName") or Meta(pvc).annotations.get(
                _STORAGE_CLASS_ANNOTATION
            )
            if not storage_class or storage_class in self.args.protected_storage_classes:
                return True
        return False

    def _has_pdb(self, pod: Pod) -> bool:
        meta = Meta(pod).raw
        namespace, labels = meta.get("namespace"), meta.get("labels") or {}
        for pdb in self.view.pdbs:
            if Meta(pdb).raw.get("namespace") != namespace:
                continue
            raw = spec_of(pdb).get("selector")
            if raw is None:
                continue
            try:
                if label_selector_from_dict(raw).matches(labels):
                    return True
            except SelectorError:
                continue
        return False

    # --------------------------------------------------------------- PreEvictionFilter

    def fit_nodes(self) -> list[Node]:
        """Ready nodes matching the evictor's ``nodeSelector`` (``nodeFit``'s candidates)."""
        if self._fit_nodes is None:
            selector = self.args.node_selector_parsed
            self._fit_nodes = [
                n
                for n in self.view.all_nodes
                if is_node_ready(n) and (selector is None or selector.matches(node_labels(n)))
            ]
        return self._fit_nodes

    def pre_eviction_filter(self, pod: Pod) -> bool:
        args = self.args
        if args.node_fit and not self.view.fits_any(pod, self.fit_nodes(), other_nodes_only=True):
            return False
        if args.namespace_label_selector is not None:
            namespace = str(Meta(pod).raw.get("namespace", ""))
            labels = self.view.namespace_labels.get(namespace, {})
            if not args.namespace_label_selector.matches(labels):
                return False
        return True
