"""Pods of one ReplicaSet are identical at admission: decide each shape once, then look it up.

:func:`~kubescale.controllers.vpa.api.pod_admission.admit_pod` is pure — same inputs, same
answer — and it is most of a request's time (capping, limits, the LimitRange fit and the patch
are per container). A scale-out of a thousand pods of one ReplicaSet asks it the same question a
thousand times. :class:`DecisionCache` remembers the answer under a key made of everything the
answer depends on (:func:`decision_key`):

- the pod, as :func:`decision_pod` projects it: the parts ``admit_pod`` reads — containers and
  init containers (names, resources, order, an init container's ``restartPolicy``), the
  ``containerStatuses``' resources, ``spec.overhead``, whether the pod has an annotations map,
  its namespace. Not its name, labels or the rest of the spec: a StatefulSet's or indexed Job's
  per-pod labels would otherwise make every pod a miss. The decision is computed *from the
  projection* on a miss, so a hit and a miss can never differ; that the projection loses
  nothing ``admit_pod`` reads is a property test (``tests/webhook/test_decision_cache.py``
  compares against ``admit_pod`` on the full pod);
- the matched VPA's uid and resourceVersion (its spec, status and name are all it contributes;
  any change is a new resourceVersion). Matching itself — the top-most controller and which
  VPA wins — is *not* cached: it is redone per request from the informers, so a VPA created
  for the same target, a VPA deleted, or a new ReplicaSet is seen at once;
- the namespace's LimitRanges (name, uid, resourceVersion each, in the order ``admit_pod``
  gets them), so adding, changing or deleting one changes the key;
- with ``--avoid-hpa-conflict``, the HPAs scaling the VPA's target (uid, resourceVersion);
- with ``--cap-to-largest-node``, the largest Ready node's allocatable (exact values and
  formats);
- the two flags.

Because the key carries the versions the informers hold at the moment of the request, the very
next request after an informer applies a change computes a new answer; no window exists in
which a stale answer can be served, whatever the order of events. On top of that the informers'
event handlers drop what a change made unreachable (:meth:`DecisionCache.forget_vpa`,
:meth:`DecisionCache.forget_namespace`, :meth:`DecisionCache.clear`), so dead entries do not
wait for the LRU. Bounded by size (least recently used first) and by age (an entry older than
``max_age`` is computed again), as every cache here.

What is cached is the decision only (the patch, already encoded as it goes into the review,
and what the events are made of); the route still counts, logs and records events per request
exactly as for an answer it computed, so a cached answer's metrics and events are an uncached
one's.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson

from kubescale.controllers.vpa.admission.bounded_lru import BoundedLru
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.pod_admission import admit_pod
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.quantities import Quantity

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "CachedAdmission",
    "DecisionCache",
    "InvalidatedLru",
    "admit_cached",
    "decision_cost",
    "decision_key",
    "decision_pod",
    "encode_patch",
    "object_version",
]

DEFAULT_MAX_ENTRIES: Final = 4096
"""Pod shapes remembered: one per ReplicaSet (or StatefulSet, Job ...) and VPA version."""
DEFAULT_MAX_AGE: Final = 3600.0
"""Seconds after which an entry is computed again even though nothing it depends on changed."""
DEFAULT_MAX_BYTES: Final = 8 * 1024 * 1024
"""The decisions' summed cost (:func:`decision_cost`): issue 27, item 14 measured 4,096
decisions of fuzzed pods at 14 MiB of Python objects, and nothing bounded one pod's size."""
ENTRY_OVERHEAD: Final = 1024
"""Bytes counted per entry for its fixed objects (key tuple, versions, the decision, indexes)."""

_CONTAINER_FIELDS: Final = ("name", "resources")
_INIT_CONTAINER_FIELDS: Final = ("name", "resources", "restartPolicy")
_STATUS_FIELDS: Final = ("name", "resources")


def _project_list(value: object, fields: Sequence[str]) -> object:
    """A list of objects reduced to ``fields``; anything else (a wrong type) kept as it is."""
    if not isinstance(value, list):
        return value
    return [
        {name: item[name] for name in fields if name in item} if isinstance(item, dict) else item
        for item in value
    ]


def decision_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of ``pod`` :func:`admit_pod` reads, as a pod (see the module docstring).

    Present keys stay present and absent ones absent (``null`` and absent read alike today, but
    the projection does not rely on it); a field of the wrong type is kept as it is, so the
    decision sees the same malformation. Annotations are reduced to "there is a map" because
    only that is read (whether the patch must create ``/metadata/annotations``).
    """
    projected: dict[str, Any] = {}
    metadata = pod.get("metadata")
    if isinstance(metadata, dict):
        meta: dict[str, Any] = {}
        if "namespace" in metadata:
            meta["namespace"] = metadata["namespace"]
        if "annotations" in metadata:
            annotations = metadata["annotations"]
            meta["annotations"] = {} if isinstance(annotations, dict) else annotations
        projected["metadata"] = meta
    elif "metadata" in pod:
        projected["metadata"] = metadata
    spec = pod.get("spec")
    if isinstance(spec, dict):
        spec_out: dict[str, Any] = {}
        if "containers" in spec:
            spec_out["containers"] = _project_list(spec["containers"], _CONTAINER_FIELDS)
        if "initContainers" in spec:
            spec_out["initContainers"] = _project_list(
                spec["initContainers"], _INIT_CONTAINER_FIELDS
            )
        if "overhead" in spec:
            spec_out["overhead"] = spec["overhead"]
        projected["spec"] = spec_out
    elif "spec" in pod:
        projected["spec"] = spec
    status = pod.get("status")
    if isinstance(status, dict):
        status_out: dict[str, Any] = {}
        for name in ("containerStatuses", "initContainerStatuses"):
            if name in status:
                status_out[name] = _project_list(status[name], _STATUS_FIELDS)
        projected["status"] = status_out
    elif "status" in pod:
        projected["status"] = status
    return projected


def _pod_text(projected: Mapping[str, Any]) -> bytes | str:
    """The projection as JSON text: an exact, hashable key (key order included, so two pods
    that differ only in key order are two entries, never one wrong one)."""
    try:
        return orjson.dumps(projected)
    except TypeError:  # an integer beyond 64 bits: the standard library writes any int
        return repr(projected)


def object_version(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(name, uid, resourceVersion)`` of an informer object; ``None`` without a
    resourceVersion (such an object cannot be keyed: its decision is not cached)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    version = metadata.get("resourceVersion")
    if not isinstance(version, str) or not version:
        return None
    return (str(metadata.get("name") or ""), str(metadata.get("uid") or ""), version)


def _versions(objects: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str, str], ...] | None:
    versions = []
    for obj in objects:
        version = object_version(obj)
        if version is None:
            return None
        versions.append(version)
    return tuple(versions)


def _allocatable_key(
    allocatable: Mapping[str, Quantity] | None,
) -> tuple[tuple[str, int, str], ...] | None:
    if allocatable is None:
        return None
    return tuple(sorted((name, q.nanos, q.format) for name, q in allocatable.items()))


def decision_key(
    *,
    pod: Mapping[str, Any],
    namespace: str,
    vpa: Mapping[str, Any],
    limit_ranges: Sequence[Mapping[str, Any]],
    hpas: Sequence[HorizontalPodAutoscaler],
    avoid_hpa_conflict: bool,
    largest_node_allocatable: Mapping[str, Quantity] | None,
    cap_to_largest_node: bool,
    startup_boost: StartupBoostSettings | None = None,
) -> Hashable | None:
    """Everything ``admit_pod``'s answer depends on (module docstring); ``None`` when an input
    carries no resourceVersion (then the decision is computed every time).

    ``pod`` is the projection (:func:`decision_pod`); ``namespace`` the one whose LimitRanges
    were read.
    """
    vpa_version = object_version(vpa)
    limit_range_versions = _versions(limit_ranges)
    hpa_versions = _versions(hpas)
    if vpa_version is None or limit_range_versions is None or hpa_versions is None:
        return None
    return (
        _pod_text(pod),
        namespace,
        vpa_version,
        limit_range_versions,
        hpa_versions,
        _allocatable_key(largest_node_allocatable),
        avoid_hpa_conflict,
        cap_to_largest_node,
        startup_boost,
    )


V = TypeVar("V")


@dataclass(frozen=True, kw_only=True)
class CachedAdmission:
    """What a decision is made of, for one pod shape (shared by every request that hits it)."""

    patches: tuple[dict[str, Any], ...]
    """The JSON patch operations (callers must not modify them)."""
    encoded_patch: str
    """The patch as the review carries it (base64 of the compact JSON); ``""`` without one."""
    skipped_resources: frozenset[str]
    limit_range_conflicts: tuple[LimitRangeConflict, ...]


class InvalidatedLru(BoundedLru[V]):
    """Least-recently-used values, bounded by size and age, each indexed by the VPA (uid) and
    the namespace it was made with, so that the informers' event handlers can drop what a
    change made stale (an :class:`~.admission_caches.InputListener`)."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_age: float = DEFAULT_MAX_AGE,
        max_bytes: int = DEFAULT_MAX_BYTES,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(max_entries=max_entries, max_age=max_age, max_bytes=max_bytes, now=now)
        self._made_with: dict[Hashable, tuple[str, str]] = {}
        """``(vpa_uid, namespace)`` of each entry."""
        self._by_vpa: dict[str, set[Hashable]] = {}
        self._by_namespace: dict[str, set[Hashable]] = {}
        self.dropped = 0
        """Entries dropped because an input changed (not counting the LRU or age)."""

    def get(self, key: Hashable) -> V | None:
        return self._get(key)

    def put(self, key: Hashable, value: V, *, vpa_uid: str, namespace: str, cost: int) -> None:
        """Keep ``value`` (about ``cost`` bytes) made with the VPA ``vpa_uid`` in
        ``namespace``."""
        if not self._store(key, value, cost):
            return
        self._made_with[key] = (vpa_uid, namespace)
        self._by_vpa.setdefault(vpa_uid, set()).add(key)
        self._by_namespace.setdefault(namespace, set()).add(key)

    def namespaces(self) -> set[str]:
        """The namespaces values here were made with."""
        return set(self._by_namespace)

    # -- invalidation, from the informers' event handlers ----------------------------------------

    def forget_vpa(self, uid: str) -> None:
        """A VPA changed or went away: drop every value made with it."""
        for key in list(self._by_vpa.get(uid, ())):
            self._remove(key)
            self.dropped += 1

    def forget_namespace(self, namespace: str) -> None:
        """A LimitRange (or HPA) of ``namespace`` was added, changed or deleted."""
        for key in list(self._by_namespace.get(namespace, ())):
            self._remove(key)
            self.dropped += 1

    def clear(self) -> None:
        """Something every value may depend on changed (the largest node)."""
        self.dropped += len(self)
        super().clear()
        self._made_with.clear()
        self._by_vpa.clear()
        self._by_namespace.clear()

    def _remove(self, key: Hashable) -> None:
        super()._remove(key)
        made_with = self._made_with.pop(key, None)
        if made_with is None:
            return
        for index, name in zip((self._by_vpa, self._by_namespace), made_with, strict=True):
            keys = index.get(name)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[name]


class DecisionCache(InvalidatedLru[CachedAdmission]):
    """Least-recently-used decisions by :func:`decision_key`, dropped by the informers' event
    handlers when what they were made of changes (module docstring)."""


def encode_patch(patches: Sequence[Mapping[str, Any]]) -> str:
    """The review's ``patch``: base64 of the compact JSON (``""`` for no patch)."""
    if not patches:
        return ""
    encoded = json.dumps(list(patches), separators=(",", ":")).encode()
    return base64.b64encode(encoded).decode("ascii")


def decision_cost(key: Hashable, admission: CachedAdmission) -> int:
    """About the bytes a decision holds: the pod's text in its key, the patch twice (encoded,
    and as the objects it was encoded from) and :data:`ENTRY_OVERHEAD`."""
    text = key[0] if isinstance(key, tuple) and key else b""
    size = len(text) if isinstance(text, bytes | str) else 0
    return ENTRY_OVERHEAD + size + 2 * len(admission.encoded_patch)


def admit_cached(
    decisions: DecisionCache,
    *,
    pod: Mapping[str, Any],
    namespace: str,
    vpa: dict[str, Any],
    limit_ranges: Sequence[dict[str, Any]],
    hpas: Sequence[HorizontalPodAutoscaler],
    avoid_hpa_conflict: bool,
    largest_node_allocatable: Mapping[str, Quantity] | None,
    cap_to_largest_node: bool,
    startup_boost: StartupBoostSettings | None = None,
) -> CachedAdmission:
    """``admit_pod``'s answer for ``pod`` (its namespace set) from ``decisions``, computed and
    remembered on a miss; raises ``PodAdmissionError`` as ``admit_pod`` does (an invalid pod
    is never remembered: computing it again is what the uncached path does).

    ``largest_node_allocatable`` is read only with ``cap_to_largest_node`` and ``hpas`` only
    with ``avoid_hpa_conflict``, as ``admit_pod`` does.
    """
    projected = decision_pod(pod)
    largest = largest_node_allocatable if cap_to_largest_node else None
    key = decision_key(
        pod=projected,
        namespace=namespace,
        vpa=vpa,
        limit_ranges=limit_ranges,
        hpas=hpas if avoid_hpa_conflict else (),
        avoid_hpa_conflict=avoid_hpa_conflict,
        largest_node_allocatable=largest,
        cap_to_largest_node=cap_to_largest_node,
        startup_boost=startup_boost,
    )
    if key is not None:
        known = decisions.get(key)
        if known is not None:
            return known
    result = admit_pod(
        pod=projected,
        vpa=vpa,
        limit_ranges=limit_ranges,
        hpas=hpas,
        avoid_hpa_conflict=avoid_hpa_conflict,
        largest_node_allocatable=largest,
        startup_boost=startup_boost,
    )
    patches = tuple(result.patches)
    admission = CachedAdmission(
        patches=patches,
        encoded_patch=encode_patch(patches),
        skipped_resources=result.skipped_resources,
        limit_range_conflicts=result.limit_range_conflicts,
    )
    if key is not None:
        metadata = vpa.get("metadata")
        uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
        decisions.put(
            key,
            admission,
            vpa_uid=str(uid or ""),
            namespace=namespace,
            cost=decision_cost(key, admission),
        )
    return admission
