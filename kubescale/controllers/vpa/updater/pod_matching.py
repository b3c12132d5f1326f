"""Which pods each VPA controls, kept across the updater's iterations (issue 29).

Upstream's ``RunOnce`` (``pkg/updater/logic/updater.go``) lists every pod each loop and, per
pod, asks the VPA matcher (``GetControllingVPAForPod``: the pod's top-most well-known or
scalable controller, ``controllerfetcher.FindTopMostWellKnownOrScalable``; the VPAs indexed
under that controller, ``TargetRefIndexFunc``; their target selectors; the strongest match,
``api.go Stronger``). :func:`match_from_scratch` is that, on the loop's caches. Asked anew for
every pod every minute, it made the updater's CPU grow with the pods that exist, not with the
ones that changed.

:class:`PodMatcher` gives the same answer from facts kept across iterations, revisited only when
what they were derived from changed:

* per pod (by uid): whether it is updatable (:func:`pod_is_updatable`) or being deleted, its
  controller (:func:`controller_of`, which the snapshot reads too: :meth:`PodMatcher.
  controller_key`), its direct controller reference, and the VPA it was matched to. The entry
  holds while the informer's object is the same (the same object, or the same uid and
  resourceVersion: the informer replaces an object when it changes, never edits it), its walk
  still holds and its controller's candidates are the same;
* per direct controller reference, the walk to the top-most controller, with every lookup it
  made (owner objects, whether a kind serves ``/scale``): it holds while each lookup answers the
  same (the same object or resourceVersion, the same yes/no). A ReplicaSet moved to another
  Deployment, or a Deployment deleted, makes its pods' walks (and their matches) anew;
* per controller, its candidate VPAs as :func:`choose_vpa` reads them (namespace, name,
  ``creationTimestamp``, ``targetRef``, whether mode ``Off`` without a startup boost skips it)
  and their target's selector. A recommendation rewritten by the recommender changes none of
  that; a VPA created, deleted, retargeted, switched off or on, or a target selector changed,
  makes the matches of that controller's pods anew.

Entries of pods no longer listed, walks no pod used and controllers without VPAs are released
each iteration (one entry per live pod at most). :attr:`PodMatcher.matched` counts the pods
whose VPA the last iteration chose anew (0 when nothing changed), :attr:`PodMatcher.walked`
the controller walks it made anew. The property in
``tests/controllers/vpa/updater/test_pod_matching.py`` compares both paths over random changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from kubescale.controllers.vpa.api.controller_refs import (
    ControllerRef,
    OwnerLookup,
    controller_owner_ref,
    topmost_controller,
)
from kubescale.controllers.vpa.api.vpa_matching import (
    choose_vpa,
    has_startup_boost,
    target_ref_of,
)
from kubescale.controllers.vpa.api.vpa_policy import UPDATE_MODE_OFF, update_mode
from kubescale.controllers.vpa.updater.eviction_restriction import (
    ControllerKey,
    controller_of,
    pod_id,
)
from kubescale.controllers.vpa.updater.update_priority import is_terminating, pod_is_updatable
from kubescale.controllers.vpa.updater.updater_decision import vpa_key
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["Matches", "PodMatcher", "match_from_scratch"]

TargetKey = tuple[str, str, str]
"""``(namespace, kind, name)`` of a VPA's target (upstream's ``TargetRefIndexKey``)."""

Matches = tuple[dict[tuple[str, str], list[Pod]], Counter[ControllerKey]]
"""Each VPA's (``vpa_key``) updatable pods by ``namespace/name``; per controller, its pods
being deleted."""


def _key(ref: ControllerRef) -> TargetKey:
    return (ref.namespace, ref.kind, ref.name)


def _by_target(
    vpas: Iterable[VerticalPodAutoscaler],
) -> dict[TargetKey, list[VerticalPodAutoscaler]]:
    # Upstream's VPA lister is indexed by target (TargetRefIndexFunc: namespace, kind and
    # name of spec.targetRef); a pod's candidates are the VPAs indexed under its controller.
    by_target: dict[TargetKey, list[VerticalPodAutoscaler]] = {}
    for candidate in vpas:
        ref = target_ref_of(candidate)
        if ref is not None:
            by_target.setdefault(_key(ref), []).append(candidate)
    return by_target


def match_from_scratch(
    pods: Iterable[Pod],
    vpas: Sequence[VerticalPodAutoscaler],
    selectors: Mapping[TargetKey, LabelSelector],
    *,
    lookup: OwnerLookup,
    scalable_kinds: Callable[[str, str], bool],
    unschedulable_too: bool,
) -> Matches:
    """Upstream's per-loop matching of every pod (module docstring)."""

    def selector_of(ref: ControllerRef) -> LabelSelector | None:
        return selectors.get(_key(ref))

    matched: dict[tuple[str, str], list[Pod]] = {}
    terminating: Counter[ControllerKey] = Counter()
    if not vpas:
        return matched, terminating
    by_target = _by_target(vpas)
    for pod in sorted(pods, key=pod_id):
        if not pod_is_updatable(pod, unschedulable_too=unschedulable_too):
            owner = controller_of(pod)
            if owner is not None and is_terminating(pod):
                terminating[owner] += 1
            continue
        controller = topmost_controller(pod, lookup=lookup, scalable_kinds=scalable_kinds)
        candidates = by_target.get(_key(controller), []) if controller is not None else []
        vpa = choose_vpa(
            pod, controller=controller, candidate_vpas=candidates, selector_of=selector_of
        )
        if vpa is not None:
            matched.setdefault(vpa_key(vpa), []).append(pod)
    return matched, terminating


OwnerCall = tuple[str, str, str, str]
ScalableCall = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Walk:
    """The top-most controller of one direct controller reference, and what the walk read."""

    controller: ControllerRef | None
    owners: tuple[tuple[OwnerCall, Mapping[str, object] | None], ...]
    """What each :data:`OwnerLookup` call answered: a controller of any kind."""
    scalable: tuple[tuple[ScalableCall, bool], ...]


@dataclass(frozen=True, slots=True)
class _Candidates:
    """A controller's candidate VPAs as :func:`choose_vpa` reads them, and their selector."""

    facts: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class _PodEntry:
    source: Pod
    uid: str
    resource_version: str
    pod_id: str
    updatable: bool
    owner: ControllerKey | None
    """:func:`controller_of` the pod."""
    terminating: bool
    """Not updatable and being deleted: counted in its owner's terminating pods."""
    start: ControllerRef | None
    """The pod's direct controller reference (``None``: no controller, no VPA)."""
    walk: _Walk | None = None
    candidates: _Candidates | None = None
    vpa: tuple[str, str] | None = None


def _same(a: Mapping[str, object] | None, b: Mapping[str, object] | None) -> bool:
    """The same object as far as the walk is concerned: the very object, or the same
    resourceVersion (an object without one is taken as changed)."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    version = Meta(a).resource_version
    return bool(version) and Meta(b).resource_version == version


def _vpa_facts(vpa: VerticalPodAutoscaler) -> tuple[object, ...]:
    """What :func:`choose_vpa` reads of a candidate VPA (its selector aside)."""
    metadata = Meta(vpa).raw
    return (
        metadata.get("namespace"),
        metadata.get("name"),
        metadata.get("creationTimestamp"),
        target_ref_of(vpa),
        update_mode(vpa) == UPDATE_MODE_OFF and not has_startup_boost(vpa),
    )


class PodMatcher:
    """:func:`match_from_scratch`'s answer from facts kept across iterations (module
    docstring); on the loop's thread (the lookups read the shared caches)."""

    def __init__(self, *, unschedulable_too: bool) -> None:
        self.unschedulable_too = unschedulable_too
        self._entries: dict[str, _PodEntry] = {}
        self._by_object: dict[int, _PodEntry] = {}
        """The same entries by ``id()`` of their source object (each entry keeps its source
        alive: an id found here whose entry's source is the very object is that pod's)."""
        self._walks: dict[ControllerRef, _Walk] = {}
        self._candidates: dict[TargetKey, _Candidates] = {}
        self.matched = 0
        """Pods whose VPA the last iteration chose anew (0 when nothing changed)."""
        self.walked = 0
        """Controller walks the last iteration made anew."""
        self.released = 0
        """Pod entries the last iteration released (pods no longer listed)."""

    def __len__(self) -> int:
        return len(self._entries)

    def match(
        self,
        pods: Iterable[Pod],
        vpas: Sequence[VerticalPodAutoscaler],
        selectors: Mapping[TargetKey, LabelSelector],
        *,
        lookup: OwnerLookup,
        scalable_kinds: Callable[[str, str], bool],
    ) -> Matches:
        """:func:`match_from_scratch` of the same arguments."""
        self.matched = self.walked = 0
        if not vpas:
            # match_from_scratch answers nothing, not even the terminating pods; nothing kept.
            self.released = len(self._entries)
            self._entries, self._by_object, self._walks, self._candidates = {}, {}, {}, {}
            return {}, Counter()
        by_target = _by_target(vpas)
        candidates = self._refresh_candidates(by_target, selectors)
        walks: dict[ControllerRef, _Walk] = {}

        def walk_of(start: ControllerRef, pod: Pod) -> _Walk:
            walk = walks.get(start)
            if walk is None:
                walk = self._walks.get(start)
                if walk is None or not self._holds(walk, lookup, scalable_kinds):
                    walk = self._walk(pod, lookup, scalable_kinds)
                    self.walked += 1
                walks[start] = walk
            return walk

        def selector_of(ref: ControllerRef) -> LabelSelector | None:
            return selectors.get(_key(ref))

        previous, by_object = self._entries, self._by_object
        entries: dict[str, _PodEntry] = {}
        objects: dict[int, _PodEntry] = {}
        groups: dict[tuple[str, str], list[tuple[str, Pod]]] = {}
        terminating: Counter[ControllerKey] = Counter()
        for pod in pods:
            entry = by_object.get(id(pod))
            if entry is None or entry.source is not pod:
                entry = previous.get(Meta(pod).identity)
                version = Meta(pod).resource_version
                if entry is not None and not (version and entry.resource_version == version):
                    entry = None
                if entry is not None:
                    entry = _rebase(entry, pod)
            if entry is None:
                entry = self._facts(pod)
            if entry.updatable and entry.start is not None:
                walk = walk_of(entry.start, pod)
                controller = walk.controller
                mine = candidates.get(_key(controller)) if controller is not None else None
                if entry.walk is not walk or entry.candidates is not mine:
                    vpa = choose_vpa(
                        pod,
                        controller=controller,
                        candidate_vpas=by_target.get(_key(controller), [])
                        if controller is not None
                        else [],
                        selector_of=selector_of,
                    )
                    # updatable, so not terminating (_facts): the rest of its facts stand
                    entry = replace(
                        entry,
                        source=pod,
                        walk=walk,
                        candidates=mine,
                        vpa=vpa_key(vpa) if vpa is not None else None,
                    )
                    self.matched += 1
                if entry.vpa is not None:
                    groups.setdefault(entry.vpa, []).append((entry.pod_id, pod))
            elif entry.terminating and entry.owner is not None:
                terminating[entry.owner] += 1
            entries[entry.uid] = entry
            objects[id(pod)] = entry
        self.released = sum(1 for uid in previous if uid not in entries)
        self._entries, self._by_object, self._walks = entries, objects, walks
        matched = {
            key: [pod for _, pod in sorted(members, key=_first)] for key, members in groups.items()
        }
        return matched, terminating

    def controller_key(self, pod: Pod) -> ControllerKey | None:
        """:func:`controller_of` ``pod``, from its entry when the last :meth:`match` listed
        this very object."""
        entry = self._by_object.get(id(pod))
        if entry is not None and entry.source is pod:
            return entry.owner
        return controller_of(pod)

    def _refresh_candidates(
        self,
        by_target: Mapping[TargetKey, Sequence[VerticalPodAutoscaler]],
        selectors: Mapping[TargetKey, LabelSelector],
    ) -> dict[TargetKey, _Candidates]:
        """This iteration's candidates per controller, the previous object kept where nothing
        :func:`choose_vpa` reads changed (so that a pod's entry compares by identity)."""
        fresh: dict[TargetKey, _Candidates] = {}
        for key, members in by_target.items():
            facts = (tuple(_vpa_facts(vpa) for vpa in members), selectors.get(key))
            old = self._candidates.get(key)
            fresh[key] = old if old is not None and old.facts == facts else _Candidates(facts)
        self._candidates = fresh
        return fresh

    def _facts(self, pod: Pod) -> _PodEntry:
        updatable = pod_is_updatable(pod, unschedulable_too=self.unschedulable_too)
        return _PodEntry(
            source=pod,
            uid=Meta(pod).identity,
            resource_version=Meta(pod).resource_version,
            pod_id=pod_id(pod),
            updatable=updatable,
            owner=controller_of(pod),
            terminating=not updatable and is_terminating(pod),
            start=controller_owner_ref(pod) if updatable else None,
        )

    @staticmethod
    def _walk(pod: Pod, lookup: OwnerLookup, scalable_kinds: Callable[[str, str], bool]) -> _Walk:
        """:func:`topmost_controller` of ``pod`` (it reads only the pod's direct controller
        reference), with every lookup it made."""
        owners: list[tuple[OwnerCall, Mapping[str, object] | None]] = []
        scalable: list[tuple[ScalableCall, bool]] = []

        def recording_lookup(
            api_version: str, kind: str, namespace: str, name: str
        ) -> Mapping[str, object] | None:
            found = lookup(api_version, kind, namespace, name)
            owners.append(((api_version, kind, namespace, name), found))
            return found

        def recording_scalable(api_version: str, kind: str) -> bool:
            answer = scalable_kinds(api_version, kind)
            scalable.append(((api_version, kind), answer))
            return answer

        controller = topmost_controller(
            pod, lookup=recording_lookup, scalable_kinds=recording_scalable
        )
        return _Walk(controller=controller, owners=tuple(owners), scalable=tuple(scalable))

    @staticmethod
    def _holds(
        walk: _Walk, lookup: OwnerLookup, scalable_kinds: Callable[[str, str], bool]
    ) -> bool:
        """Every lookup of ``walk`` answers as it did: the walk would go the same way."""
        return all(_same(lookup(*call), found) for call, found in walk.owners) and all(
            scalable_kinds(*call) == answer for call, answer in walk.scalable
        )


def _first(member: tuple[str, Pod]) -> str:
    return member[0]


def _rebase(entry: _PodEntry, pod: Pod) -> _PodEntry:
    """``entry`` for a new object of the same uid and resourceVersion (a re-list)."""
    return replace(entry, source=pod)
