"""``LoadPods`` in proportion to change (issue 29): which pods an iteration feeds the model.

Upstream's ``clusterStateFeeder.LoadPods`` (``pkg/recommender/input/cluster_feeder.go``) lists
every pod of the lister each loop and, for each, ``AddOrUpdatePod`` with its labels and phase and
``AddOrUpdateContainer`` with each container's requests; pods of the model missing from the list
are deleted (``DeleteRemovedPods``, after the metrics). What one pod does to the model depends
only on what the pod is — its labels, phase and containers' requests — and, in memory-saver
mode, on whether a VPA matches it; feeding a pod again that has not changed changes nothing
(``ClusterState.add_or_update_pod`` is idempotent). So an iteration need feed only:

* the pods the informer added, updated or deleted since the last feed — its handlers run exactly
  once per change it sees, re-lists included (:mod:`kubescale.kube.informer`: a re-list is
  diffed by uid and resourceVersion), so :meth:`PodFeed.changed` hears of every one;
* with ``--memory-saver``, every pod of a namespace where a VPA was added, deleted or given
  another selector (the pods it tracks may change there, and only there: a VPA matches pods of
  its own namespace).

Every pod is fed (the from-scratch path, :meth:`PodFeed.feed_all`) at start-up, after
:meth:`PodFeed.reset`, and after a feed that did not finish. The model ends the same as after
the from-scratch path (``tests/controllers/vpa/recommender/test_pod_feed.py`` compares them
after random changes). What is kept between iterations is a set of pod keys changed since the
last take (at most one per pod, emptied by each take) and each handled VPA's selector (released
when the VPA goes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from kubescale.controllers.vpa.api.current_resources import (
    CPU,
    MEMORY,
    container_requests_and_limits,
)
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta, optional_spec_of, status_of

__all__ = ["PENDING", "PodChanges", "PodFeed", "PodKey", "PodSource", "container_requests"]

PENDING: Final = "Pending"

PodKey = tuple[str, str]
"""A pod's ``(namespace, name)``."""
VpaKey = tuple[str, str]


class PodSource(Protocol):
    """The pods' lister (:class:`kubescale.kube.listers.Lister`)."""

    def get(self, name: str, namespace: str | None = None) -> Pod | None: ...

    def list(self, *, namespace: str | None = None) -> Sequence[Pod]: ...


@dataclass(frozen=True, slots=True)
class PodChanges:
    """What one ``LoadPods`` feeds (:meth:`PodFeed.take`)."""

    pods: Sequence[Pod]
    """The cached pods to feed: every pod when :attr:`whole`, else those that changed."""
    gone: Sequence[PodKey]
    """Pods deleted from the cache since the last take."""
    whole: bool
    """:attr:`pods` is every cached pod (the from-scratch path)."""


def pod_key(pod: Pod) -> PodKey:
    metadata = Meta(pod).raw
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def phase(pod: Pod) -> str:
    return str(status_of(pod).get("phase") or "")


def _amount(quantity: Quantity | None, *, milli: bool) -> int:
    if quantity is None:
        return 0
    return quantity.milli_value() if milli else quantity.value()


def container_requests(pod: Pod) -> dict[str, dict[str, int]]:
    """Each app container's current requests in ResourceAmounts (calculateRequestedResources)."""
    spec = optional_spec_of(pod)
    containers = spec.get("containers") if spec is not None else None
    result: dict[str, dict[str, int]] = {}
    for container in containers if isinstance(containers, list) else ():
        entry: object = container  # a cached object is not validated: any JSON may be here
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or name in result:
            continue
        try:
            requests, _ = container_requests_and_limits(pod, name)
        except QuantityError:
            requests = None
        requests = requests or {}
        result[name] = {
            CPU: _amount(requests.get(CPU), milli=True),
            MEMORY: _amount(requests.get(MEMORY), milli=False),
        }
    return result


class PodFeed:
    """The pods ``LoadPods`` feeds and the pods ``DeleteRemovedPods`` deletes (module
    docstring). :meth:`take` runs where the informer's handlers run (the event loop);
    :meth:`feed` and :meth:`delete_removed` touch only the model and what :meth:`take` left,
    so they may run on the loop's worker thread."""

    def __init__(self, *, memory_saver: bool) -> None:
        self.memory_saver = memory_saver
        self.fed = 0
        """Pods the last feed gave the model (``add_or_update_pod`` calls)."""
        self._changed: set[PodKey] = set()
        self._whole = True
        self._feeding = False
        self._selectors: dict[VpaKey, LabelSelector | None] = {}
        self._rematch: set[str] = set()
        self._to_delete: set[PodKey] = set()

    def reset(self) -> None:
        """A fresh model: the next take is every pod."""
        self._whole = True
        self._selectors = {}
        self._rematch = set()
        self._to_delete = set()

    def changed(self, pod: Pod) -> None:
        """An informer handler (add, update or delete): the pod's feeding may differ."""
        self._changed.add(pod_key(pod))

    def vpas_loaded(self, selectors: Iterable[tuple[VpaKey, LabelSelector | None]]) -> None:
        """``LoadVPAs`` gave the model these VPAs with these selectors (the others left it):
        in memory-saver mode the namespaces where one was added, deleted or changed selector
        are fed again whole at the next take."""
        known = self._selectors
        seen: set[VpaKey] = set()
        for key, selector in selectors:
            seen.add(key)
            if key not in known or known[key] != selector:
                known[key] = selector
                self._rematch.add(key[0])
        for key in [key for key in known if key not in seen]:
            del known[key]
            self._rematch.add(key[0])

    def take(self, pods: PodSource) -> PodChanges:
        """The pods to feed now (module docstring), read from the lister."""
        whole = self._whole or self._feeding
        changed, self._changed = self._changed, set()
        rematch, self._rematch = self._rematch, set()
        self._whole = False
        self._feeding = True
        if whole:
            return PodChanges(pods=pods.list(), gone=(), whole=True)
        taken: list[Pod] = []
        if self.memory_saver:
            for namespace in sorted(rematch):
                for pod in pods.list(namespace=namespace):
                    changed.discard(pod_key(pod))
                    taken.append(pod)
        gone: list[PodKey] = []
        for namespace, name in changed:
            current = pods.get(name, namespace) if namespace else None
            if current is None:
                gone.append((namespace, name))
            else:
                taken.append(current)
        return PodChanges(pods=taken, gone=gone, whole=False)

    def feed(self, state: ClusterState, changes: PodChanges, *, now: datetime) -> None:
        """Feed what :meth:`take` took: the model ends as :meth:`feed_all` over every cached
        pod would leave it."""
        if changes.whole:
            self.feed_all(state, changes.pods, now=now)
        else:
            to_delete = self._to_delete
            to_delete.update(changes.gone)
            listed: dict[PodKey, Pod] = {}
            for pod in changes.pods:
                key = pod_key(pod)
                if phase(pod) == PENDING:
                    to_delete.add(key)
                else:
                    to_delete.discard(key)
                    listed[key] = pod
            self._add_or_update(state, listed, now=now)
        self._feeding = False

    def feed_all(self, state: ClusterState, pods: Sequence[Pod], *, now: datetime) -> None:
        """Upstream's ``LoadPods`` over every pod in ``pods``, pending ones skipped (upstream's
        lister lists ``status.phase!=Pending``); the model's pods not among them are deleted
        by the next :meth:`delete_removed`."""
        listed: dict[PodKey, Pod] = {}
        for pod in pods:
            if phase(pod) == PENDING:
                continue
            listed[pod_key(pod)] = pod
        self._to_delete = {key for key in state.pod_keys() if key not in listed}
        self._add_or_update(state, listed, now=now)

    def _add_or_update(
        self, state: ClusterState, listed: Mapping[PodKey, Pod], *, now: datetime
    ) -> None:
        for key in sorted(listed):
            pod = listed[key]
            state.add_or_update_pod(
                namespace=key[0],
                name=key[1],
                labels=dict(Meta(pod).raw.get("labels") or {}),
                phase=phase(pod),
                containers=container_requests(pod),
                now=now,
            )
        self.fed = len(listed)

    def delete_removed(self, state: ClusterState) -> None:
        """``DeleteRemovedPods``: the pods gone since the last feed."""
        for namespace, name in sorted(self._to_delete):
            state.delete_pod(namespace=namespace, name=name)
        self._to_delete = set()
