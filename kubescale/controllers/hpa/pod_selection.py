"""Which pods an HPA reads: label-indexed selection, and ``selectionStrategy``.

``selectionStrategy: OwnerReferences`` (upstream ``pod_filters.go``, reference §2.9).

With the default ``LabelSelector`` strategy every pod the scale's selector matches counts.
With ``OwnerReferences`` only the pods the target owns: a pod's controller owner references
are walked breadth-first, up to 10 levels (pod → ReplicaSet → Deployment), and the pod is kept
when the target's uid is reached. Owners are read through ``lookup`` (the informers' caches);
an owner that cannot be found ends that branch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar, cast

from kubescale.objects.meta import OwnerReference
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import (
    DOUBLE_EQUALS,
    EQUALS,
    IN,
    LabelSelector,
    SelectorError,
    parse_label_selector,
)
from kubescale.objects.views import Meta

__all__ = [
    "MAX_OWNER_DEPTH",
    "LabelIndex",
    "LivePodIndex",
    "SelectionPass",
    "SelectorOutcome",
    "owned_pods",
    "select_pods",
]

MAX_OWNER_DEPTH: Final = 10

OwnerLookup = Callable[[str, str, str], Mapping[str, object] | None]
"""(namespace, kind, name) → the owner object (any controller kind: only its metadata is
read), or None."""

T = TypeVar("T", bound=Mapping[str, object])
"""What a :class:`LabelIndex` holds: pods, or the metrics API's PodMetrics items."""


def _owners(obj: Mapping[str, object]) -> list[OwnerReference]:
    refs: Iterable[object] = Meta(obj).raw.get("ownerReferences") or ()
    # API JSON: an entry that is not an object is skipped, as before.
    return [cast(OwnerReference, r) for r in refs if isinstance(r, Mapping)]


def _owned_by(pod: Pod, target_uid: str, lookup: OwnerLookup) -> bool:
    namespace = str(Meta(pod).raw.get("namespace") or "")
    frontier = _owners(pod)
    seen: set[str] = set()
    for _ in range(MAX_OWNER_DEPTH):
        following: list[OwnerReference] = []
        for ref in frontier:
            uid = str(ref.get("uid") or "")
            if uid == target_uid:
                return True
            if uid in seen:
                continue
            seen.add(uid)
            owner = lookup(namespace, str(ref.get("kind") or ""), str(ref.get("name") or ""))
            if owner is not None:
                following.extend(_owners(owner))
        if not following:
            return False
        frontier = following
    return False


def owned_pods(pods: Sequence[Pod], target_uid: str, lookup: OwnerLookup) -> list[Pod]:
    """The pods whose owner chain reaches ``target_uid`` (module docstring)."""
    if not target_uid:
        return []
    return [pod for pod in pods if _owned_by(pod, target_uid, lookup)]


class LabelIndex(Generic[T]):
    """Objects of one namespace indexed by their ``key=value`` label pairs, for one pass.

    A selector with an equality (or one-value ``in``) requirement is answered from the
    smallest matching bucket, then checked in full; any other selector scans. 1,000 HPAs over
    10,000 pods cost a few bucket look-ups each instead of 10,000 label matches each.
    """

    def __init__(
        self,
        objects: Sequence[T],
        labels: Callable[[Mapping[str, object]], Mapping[str, str]] = lambda o: (
            Meta(o).raw.get("labels") or {}
        ),
    ) -> None:
        self.objects = list(objects)
        self._labels = labels
        self._buckets: dict[tuple[str, str], list[T]] = {}
        for obj in self.objects:
            for pair in labels(obj).items():
                self._buckets.setdefault(pair, []).append(obj)

    def select(self, selector: LabelSelector) -> list[T]:
        candidates: list[T] | None = None
        for requirement in selector.requirements:
            if requirement.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(requirement.values) == 1:
                bucket = self._buckets.get((requirement.key, requirement.values[0]), [])
                if candidates is None or len(bucket) < len(candidates):
                    candidates = bucket
        pool = self.objects if candidates is None else candidates
        return [obj for obj in pool if selector.matches(self._labels(obj))]


def _pod_labels(pod: Mapping[str, object]) -> Mapping[str, str]:
    labels: Mapping[str, str] = Meta(pod).raw.get("labels") or {}
    return labels


def _namespaced_key(pod: Mapping[str, object]) -> tuple[str, str]:
    raw = Meta(pod).raw
    return (str(raw.get("namespace") or ""), str(raw.get("name") or ""))


class LivePodIndex:
    """The pod informer's pods by namespace and ``key=value`` label pair, kept current by the
    informer's events (:meth:`add`, :meth:`update`, :meth:`delete`), so that a pass of 1,000
    HPAs does not label-index every pod of their namespaces again each sync period (issue 29):
    a steady pass indexes nothing (:attr:`indexed` counts the pods indexed).

    Each bucket keeps its pods in the informer's order for the namespace (the cache's
    namespace index: an object stored again goes last), so a selection answers the pods
    :class:`LabelIndex` over ``lister.list(namespace=...)`` answers, in the same order. A pod
    deleted is released at once; the index holds one entry per cached pod and label."""

    def __init__(self) -> None:
        self._buckets: dict[str, dict[tuple[str, str], dict[str, Pod]]] = {}
        self._pods: dict[tuple[str, str], Pod] = {}
        """What each pod was indexed as (its labels are read again to unindex it: the
        informer's objects are never changed, only replaced)."""
        self.indexed = 0
        """Pods (re-)indexed since creation: constant while no pod changes."""

    def __len__(self) -> int:
        return len(self._pods)

    def add(self, pod: Pod) -> None:
        key = _namespaced_key(pod)
        self._unindex(key)
        namespace, name = key
        buckets = self._buckets.setdefault(namespace, {})
        for pair in _pod_labels(pod).items():
            buckets.setdefault(pair, {})[name] = pod
        self._pods[key] = pod
        self.indexed += 1

    def update(self, _old: Pod, new: Pod) -> None:
        self.add(new)

    def delete(self, pod: Pod) -> None:
        self._unindex(_namespaced_key(pod))

    def _unindex(self, key: tuple[str, str]) -> None:
        old = self._pods.pop(key, None)
        if old is None:
            return
        namespace, name = key
        buckets = self._buckets.get(namespace)
        if buckets is None:  # a namespace whose pods have no labels left
            return
        for pair in _pod_labels(old).items():
            bucket = buckets.get(pair)
            if bucket is not None:
                bucket.pop(name, None)
                if not bucket:
                    del buckets[pair]
        if not buckets:
            del self._buckets[namespace]

    def bucket(self, namespace: str, pair: tuple[str, str]) -> list[Pod]:
        """The namespace's pods labelled ``pair``, in the informer's order."""
        return list(self._buckets.get(namespace, {}).get(pair, {}).values())


class SelectionPass:
    """One pass's view of the pods HPAs select: the pods label-indexed per namespace, and
    upstream's ``hpaSelectors`` reverse look-up (pod → the HPAs whose last known selector
    selects it) for the AmbiguousSelector check.

    With a :class:`LivePodIndex` (the loop's, fed by the pod informer) the pods are read from
    it as they are now, as upstream's ``podLister.Pods(namespace).List(selector)`` reads its
    informer at each reconcile; without one, each namespace is label-indexed once per pass."""

    def __init__(
        self, list_pods: Callable[..., list[Pod]], index: LivePodIndex | None = None
    ) -> None:
        self._list_pods = list_pods
        self._live = index
        self._index: dict[str, LabelIndex[Pod]] = {}
        self._owners: dict[tuple[str, str], set[str]] = {}

    def select(self, namespace: str, selector: LabelSelector) -> list[Pod]:
        """The namespace's pods the selector matches."""
        live = self._live
        if live is None:
            index = self._index.get(namespace)
            if index is None:
                index = self._index[namespace] = LabelIndex(self._list_pods(namespace=namespace))
            return index.select(selector)
        # LabelIndex.select's rule: the smallest bucket of an equality requirement, checked in
        # full; no such requirement: every pod of the namespace
        candidates: list[Pod] | None = None
        for requirement in selector.requirements:
            if requirement.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(requirement.values) == 1:
                bucket = live.bucket(namespace, (requirement.key, requirement.values[0]))
                if candidates is None or len(bucket) < len(candidates):
                    candidates = bucket
        pool = self._list_pods(namespace=namespace) if candidates is None else candidates
        return [pod for pod in pool if selector.matches(_pod_labels(pod))]

    def own(self, namespace: str, hpa: str, pods: Sequence[Pod]) -> None:
        """Record that HPA ``hpa``'s selector selects ``pods``."""
        for pod in pods:
            name = str(Meta(pod).raw.get("name") or "")
            self._owners.setdefault((namespace, name), set()).add(f"{namespace}/{hpa}")

    def selecting_hpas(self, namespace: str, pods: Sequence[Pod]) -> list[str]:
        """``hpasControllingPodsUnderSelector``: the HPAs (``ns/name``) selecting any of these
        pods, sorted."""
        found: set[str] = set()
        for pod in pods:
            name = str(Meta(pod).raw.get("name") or "")
            found |= self._owners.get((namespace, name), set())
        return sorted(found)


@dataclass(frozen=True, kw_only=True)
class SelectorOutcome:
    """``validateAndParseSelector`` and the pods: ``pods`` is None when the reconcile stops
    (``event_reason`` is the Warning event's reason, ``message`` its text; the condition is
    ``ScalingActive=False/InvalidSelector`` or ``AmbiguousSelector``, ``condition_message``)."""

    pods: list[Pod] | None
    selector: LabelSelector | None = None
    event_reason: str = ""
    condition_reason: str = ""
    condition_message: str = ""
    message: str = ""


def select_pods(
    selection: SelectionPass,
    *,
    namespace: str,
    hpa: str,
    selector_text: str,
    owner_uid: str | None,
    lookup: OwnerLookup,
) -> SelectorOutcome:
    """The scale's selector parsed, the pods it selects claimed for ``hpa`` in this pass, and
    refused when another HPA's selector picks the same pods (upstream's texts); with
    ``owner_uid`` (``selectionStrategy: OwnerReferences``) only the pods owned by the target."""
    if not selector_text:
        return SelectorOutcome(
            pods=None,
            event_reason="SelectorRequired",
            condition_reason="InvalidSelector",
            condition_message="the HPA target's scale is missing a selector",
            message="selector is required",
        )
    try:
        selector = parse_label_selector(selector_text)
    except SelectorError as err:
        message = f"couldn't convert selector into a corresponding internal selector object: {err}"
        return SelectorOutcome(
            pods=None,
            event_reason="InvalidSelector",
            condition_reason="InvalidSelector",
            condition_message=message,
            message=message,
        )
    pods = selection.select(namespace, selector)
    selection.own(namespace, hpa, pods)
    owners = selection.selecting_hpas(namespace, pods)
    if len(owners) > 1:
        message = (
            f"pods by selector {selector_text} are controlled by multiple HPAs: "
            f"[{' '.join(owners)}]"
        )
        return SelectorOutcome(
            pods=None,
            selector=selector,
            event_reason="AmbiguousSelector",
            condition_reason="AmbiguousSelector",
            condition_message=message,
            message=message,
        )
    if owner_uid is not None:
        pods = owned_pods(pods, owner_uid, lookup)
    return SelectorOutcome(pods=pods, selector=selector)
