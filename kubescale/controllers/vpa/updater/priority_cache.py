"""Each pod's update priority, kept across the updater's iterations (issue 29).

Upstream's ``RunOnce`` prices every pod of every VPA each loop
(``UpdatePriorityCalculator.AddPod``: the capped recommendation, ``GetUpdatePriority``, the
quick-OOM check, then the ``EvictionRequirements`` admission) and sorts those accepted
(``GetSortedPods``). :func:`~.update_priority.prioritized_pods` is that; on a steady cluster
nearly all of it is the same answer as a minute before.

:class:`PriorityCache` gives :func:`prioritized_pods`'s answer from per-pod answers kept while
what they were derived from holds: the pod (the same object, or the same uid and
resourceVersion), the VPA (the same object or resourceVersion: a new recommendation prices
its pods anew), the merged LimitRanges, the resources left to an HPA and the priority
settings (equal), and the time the answer may depend on:

* a pod priced before its lifetime threshold passed (``status.startTime`` +
  ``--in-recommendation-bounds-eviction-lifetime-threshold``) is priced again once it passed;
* a pod accepted while within its recommended range (for its age, or a quick OOM) is priced
  anew each iteration: its reason names how long it ran (and it is about to be updated);
* an answer is never used at a time before it was made (a clock set back).

Each pod's answer is :func:`prioritized_pods` of that pod alone: accepted and admitted, or
not. The pods accepted are sorted as ``GetSortedPods`` sorts them (ScaleUp first, then the
larger ResourceDiff; ties by namespace/name): sorting and then dropping the pods the
admission refuses keeps the others' order, so the answer is the same list.

Entries of pods not priced in an iteration are released when it ends (:meth:`release`);
:attr:`PriorityCache.priced` counts the pods the last iteration priced anew (0 when nothing
changed and no time threshold passed). The property in
``tests/controllers/vpa/updater/test_priority_cache.py`` compares both paths.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.limit_ranges import LimitRangeItem
from kubescale.controllers.vpa.updater.update_priority import (
    PodPriority,
    UpdateSettings,
    prioritized_pods,
)
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["PriorityCache"]


@dataclass(frozen=True, slots=True)
class _Context:
    """What a VPA's pods are priced with, besides each pod."""

    vpa: VerticalPodAutoscaler
    container_limit_range: LimitRangeItem | None
    pod_limit_range: LimitRangeItem | None
    skip_resources: frozenset[str]
    settings: UpdateSettings

    def holds(self, other: _Context) -> bool:
        if self.vpa is not other.vpa:
            version = Meta(self.vpa).resource_version
            if not version or Meta(other.vpa).resource_version != version:
                return False
            if Meta(self.vpa).uid != Meta(other.vpa).uid:
                return False
        return (
            self.container_limit_range == other.container_limit_range
            and self.pod_limit_range == other.pod_limit_range
            and self.skip_resources == other.skip_resources
            and self.settings == other.settings
        )


@dataclass(frozen=True, slots=True)
class _Priced:
    source: Pod
    uid: str
    resource_version: str
    context: _Context
    answer: PodPriority | None
    """Accepted and admitted (its recommendation, priority and reason), or ``None``."""
    made: datetime
    until: datetime | None
    """Priced again from then on (``None``: for as long as the inputs hold)."""


def _order_key(entry: PodPriority) -> tuple[bool, float, str, str]:
    # GetSortedPods (update_priority._order_key): ScaleUp first, then the larger
    # ResourceDiff; ties by namespace/name.
    view = Meta(entry.pod)
    return (not entry.priority.scale_up, -entry.priority.resource_diff, view.namespace, view.name)


class PriorityCache:
    """:func:`prioritized_pods` from per-pod answers kept across iterations (module docstring);
    on the decision's thread."""

    def __init__(self) -> None:
        self._entries: dict[str, _Priced] = {}
        self._seen: set[str] = set()
        self.priced = 0
        """Pods the current (or last) iteration priced anew."""
        self.released = 0
        """Entries the last :meth:`release` dropped (pods not priced in that iteration)."""

    def __len__(self) -> int:
        return len(self._entries)

    def prioritized(
        self,
        *,
        vpa: VerticalPodAutoscaler,
        pods: Iterable[Pod],
        now: datetime,
        settings: UpdateSettings,
        container_limit_range: LimitRangeItem | None = None,
        pod_limit_range: LimitRangeItem | None = None,
        skip_resources: frozenset[str] = frozenset(),
    ) -> list[PodPriority]:
        """:func:`prioritized_pods` of the same arguments."""
        context = _Context(
            vpa=vpa,
            container_limit_range=container_limit_range,
            pod_limit_range=pod_limit_range,
            skip_resources=skip_resources,
            settings=settings,
        )
        accepted: list[PodPriority] = []
        for pod in pods:
            uid = Meta(pod).identity
            entry = self._entries.get(uid)
            if entry is None or not self._holds(entry, pod, context, now):
                entry = self._price(pod, uid, context, now)
                self._entries[uid] = entry
                self.priced += 1
            elif entry.source is not pod:
                # a new object of the same resourceVersion (a re-list): the answer names it
                answer = replace(entry.answer, pod=pod) if entry.answer is not None else None
                entry = replace(entry, source=pod, answer=answer)
                self._entries[uid] = entry
            self._seen.add(uid)
            if entry.answer is not None:
                accepted.append(entry.answer)
        accepted.sort(key=_order_key)
        return accepted

    def release(self) -> None:
        """The iteration ended: drop the entries of pods it did not price (a decision left
        unfinished releases nothing; the next finished one does)."""
        before = len(self._entries)
        self._entries = {uid: e for uid, e in self._entries.items() if uid in self._seen}
        self.released = before - len(self._entries)
        self._seen = set()

    def start(self) -> None:
        """An iteration begins: :attr:`priced` counts from 0."""
        self.priced = 0
        self._seen = set()

    @staticmethod
    def _holds(entry: _Priced, pod: Pod, context: _Context, now: datetime) -> bool:
        if entry.source is not pod:
            version = Meta(pod).resource_version
            if not version or entry.resource_version != version:
                return False
        if now < entry.made or (entry.until is not None and now >= entry.until):
            return False
        return entry.context is context or entry.context.holds(context)

    @staticmethod
    def _price(pod: Pod, uid: str, context: _Context, now: datetime) -> _Priced:
        found = prioritized_pods(
            vpa=context.vpa,
            pods=[pod],
            now=now,
            settings=context.settings,
            container_limit_range=context.container_limit_range,
            pod_limit_range=context.pod_limit_range,
            skip_resources=context.skip_resources,
        )
        answer = found[0] if found else None
        return _Priced(
            source=pod,
            uid=uid,
            resource_version=Meta(pod).resource_version,
            context=context,
            answer=answer,
            made=now,
            until=_until(pod, answer, context.settings, now),
        )


def _until(
    pod: Pod, answer: PodPriority | None, settings: UpdateSettings, now: datetime
) -> datetime | None:
    """When an answer made at ``now`` may stop holding (module docstring)."""
    if answer is not None and not answer.priority.outside_recommended_range:
        return now  # accepted for its age or a quick OOM: priced anew each iteration
    if not spec_of(pod).get("nodeName"):
        return None  # a pod on no node is priced without its age (pod_priority)
    started = parse_time(status_of(pod).get("startTime"))
    if started is None:
        return None
    threshold = started + settings.lifetime_threshold
    return threshold if now < threshold else None
