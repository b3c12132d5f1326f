"""``ClusterState``: everything the recommender knows, as upstream's ``model.clusterState``.

This is the boundary the recommender loop (pods, VPAs, PodMetrics, OOMs, checkpoints) and the
Prometheus history provider feed, and the only place aggregates are keyed and linked:

* pods by ``(namespace, name)`` with their label set and phase, each container a
  :class:`~kubescale.controllers.vpa.model.aggregate_state.ContainerState`;
* aggregates by ``(namespace, container name, label set)`` (upstream's AggregateStateKey; the
  label set is ``labels.Set.String()``), created when a container first appears and re-linked
  when a pod's labels change; a VPA uses every aggregate in its namespace whose labels its
  selector matches (``UseAggregationIfMatching``) and counts the pods it matches;
* per VPA the checkpointed initial state per container (``ContainersInitialAggregateState``),
  merged in at recommendation and checkpoint time;
* memory-saver mode (``--memory-saver``): pods no VPA matches are not tracked.

Samples go through the container's rules (ordering, peaks, OOM bump-up) into its aggregate; an
aggregate garbage-collected while its container lives is recreated by the next sample, as
upstream's ``ContainerStateAggregatorProxy`` does.

Recommendations follow ``config.recommendation_policy``: upstream's estimator chain, or the
``adaptive`` policy (:mod:`kubescale.controllers.vpa.model.policy`), which also reads each
aggregate's OOM log and ``now``.

Times are aware datetimes at the API; resource amounts are ResourceAmounts (CPU millicores,
memory bytes; a float is truncated like Go's ``int64(f)``). Pure: no I/O, no clock reads.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from kubescale.base.logs import component_logger
from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.vpa_policy import container_policy
from kubescale.controllers.vpa.model.aggregate_state import (
    SCALING_MODE_OFF,
    AggregateContainerState,
    ContainerState,
    HistogramStores,
    controlled_resources,
)
from kubescale.controllers.vpa.model.batch_model import CpuSampleBatch, estimate_states
from kubescale.controllers.vpa.model.checkpoint_format import (
    CheckpointFormatError,
    checkpoint_object,
    format_time,
)
from kubescale.controllers.vpa.model.estimators import ContainerEstimate, estimate
from kubescale.controllers.vpa.model.go_math import GO_ZERO_TIME, go_float_to_int64, go_micros
from kubescale.controllers.vpa.model.histogram import HistogramCheckpointError
from kubescale.controllers.vpa.model.model_config import CPU, MEMORY, RecommenderConfig
from kubescale.controllers.vpa.model.policy.adaptive_config import ADAPTIVE_POLICY
from kubescale.controllers.vpa.model.policy.adaptive_estimator import (
    estimate_adaptive,
    estimate_adaptive_states,
)
from kubescale.controllers.vpa.model.recommendation import build_recommendation
from kubescale.objects.meta import CrossVersionObjectReference
from kubescale.objects.selectors import DOUBLE_EQUALS, EQUALS, IN, NOTHING, LabelSelector
from kubescale.objects.views import Meta, meta, spec_of, status_of
from kubescale.objects.vpa import (
    PodResourcePolicy,
    RecommendedContainerResources,
    RecommendedPodResources,
    VerticalPodAutoscaler,
)
from kubescale.objects.vpa_checkpoint import (
    VerticalPodAutoscalerCheckpoint,
    VerticalPodAutoscalerCheckpointStatus,
)

__all__ = ["AggregateKey", "ClusterState", "VpaRecommendation"]

_log = component_logger("vpa-recommender")

POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class AggregateKey:
    """AggregateStateKey: namespace, container name and the pod's label set string."""

    namespace: str
    container: str
    labels: str


@dataclass(frozen=True)
class VpaRecommendation:
    """What one UpdateVPAs pass computed for a VPA."""

    container_recommendations: list[RecommendedContainerResources]
    """``status.recommendation.containerRecommendations``, sorted by container name."""
    pod_count: int
    """Live pods the VPA's selector matches (``Vpa.PodCount``)."""
    config_unsupported: bool = False
    """The VPA was added without a usable selector (its ``ConfigUnsupported`` case)."""

    @property
    def has_recommendation(self) -> bool:
        """HasRecommendation: at least one container recommendation."""
        return bool(self.container_recommendations)

    @property
    def has_matching_pods(self) -> bool:
        return self.pod_count > 0

    def recommendation(self) -> RecommendedPodResources:
        """The ``status.recommendation`` object."""
        return {"containerRecommendations": self.container_recommendations}


Place = tuple[int, int]
"""A pod container's place in the walk over the pods: the pod's, then the container's within
it (sorting by it is walking ``ClusterState._pods`` in order, each pod's containers in order)."""
LiveContainers = dict[AggregateKey, list[tuple[Place, ContainerState]]]
"""Pod containers by aggregate key, each with its place in the walk over the pods."""


def label_set_key(labels: Mapping[str, str]) -> str:
    """labels.Set.String(): ``k=v`` pairs sorted by key, comma-joined."""
    return ",".join(f"{key}={labels[key]}" for key in sorted(labels))


@dataclass(slots=True)
class _LabelSet:
    key: str
    """:func:`label_set_key` of the labels, one string for every pod of the set."""
    labels: dict[str, str]
    users: int = 0
    """Pods and aggregates of this label set."""


@dataclass(slots=True)
class _Pod:
    cluster: ClusterState
    namespace: str
    name: str
    labels: dict[str, str]
    label_key: str
    phase: str
    containers: dict[str, _PodContainer] = field(default_factory=dict)
    seq: int = 0
    """Its place in ``ClusterState._pods``' order (a dict: new pods go last, and an updated
    pod keeps its place), so sorting by it walks the pods in order."""


@dataclass(slots=True)
class _Vpa:
    namespace: str
    name: str
    selector: LabelSelector
    config_unsupported: bool
    created_us: int
    aggregates: dict[AggregateKey, AggregateContainerState] = field(default_factory=dict)
    initial_state: dict[str, AggregateContainerState] = field(default_factory=dict)
    pod_count: int = 0
    annotations: dict[str, str] = field(default_factory=dict)
    resource_policy: PodResourcePolicy | None = None
    update_mode: str | None = None
    target_ref: CrossVersionObjectReference | None = None
    checkpoint_written_us: int = 0
    order: int = 0
    """When it entered the model (the order of ``ClusterState._vpas``)."""

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """PodLabelsMatchVPA."""
        return namespace == self.namespace and self.selector.matches(labels)


class _PodContainer(ContainerState):
    """A pod's container, its own aggregator: ContainerStateAggregatorProxy (finds, or
    recreates, the container's aggregate) folded into the container state, one object per
    container instead of two."""

    __slots__ = ("_name", "_pod", "place")

    def __init__(
        self, *, pod: _Pod, name: str, request_cpu: int, request_memory: int, place: Place
    ) -> None:
        super().__init__(request_cpu=request_cpu, request_memory=request_memory, aggregator=self)
        self._pod = pod
        self._name = name
        self.place = place

    def aggregate(self) -> AggregateContainerState:
        return self._pod.cluster._find_or_create_aggregate(self._pod, self._name)


_VpaKey = tuple[str, str]
_EQUALITY = frozenset({IN, EQUALS, DOUBLE_EQUALS})


class _VpaIndex:
    """The VPAs that *can* match a pod, found without trying every VPA (issue 29).

    Upstream's ``addPodToItsVpa`` tries every VPA of the cluster for each new pod
    (``PodLabelsMatchVPA``: same namespace, then the selector): pods × VPAs selector checks
    when the recommender first loads a cluster (150,000 × 5,000). A VPA can only match pods of
    its namespace, and a selector that requires ``key = value`` (``In``/``=``/``==``, the
    ``matchLabels`` of every Deployment's VPA) only pods carrying that label, so each VPA is
    filed under its namespace and its first such requirement's values; the rest (no equality
    requirement) are tried for every pod of the namespace, and the nothing-selector is filed
    nowhere. Callers still check :meth:`_Vpa.matches` on each candidate: the outcome is
    upstream's, the work proportional to the VPAs that share a label with the pod.
    """

    def __init__(self) -> None:
        self._by_label: dict[tuple[str, str, str], dict[_VpaKey, _Vpa]] = {}
        self._scan: dict[str, dict[_VpaKey, _Vpa]] = {}

    @staticmethod
    def _slots(vpa: _Vpa) -> list[tuple[str, str, str]] | None:
        if vpa.selector.nothing:
            return []
        for requirement in vpa.selector.requirements:
            if requirement.operator in _EQUALITY:
                return [(vpa.namespace, requirement.key, v) for v in requirement.values]
        return None

    def add(self, key: _VpaKey, vpa: _Vpa) -> None:
        slots = self._slots(vpa)
        if slots is None:
            self._scan.setdefault(vpa.namespace, {})[key] = vpa
            return
        for slot in slots:
            self._by_label.setdefault(slot, {})[key] = vpa

    def remove(self, key: _VpaKey, vpa: _Vpa) -> None:
        slots = self._slots(vpa)
        if slots is None:
            scan = self._scan.get(vpa.namespace, {})
            scan.pop(key, None)
            if not scan:
                self._scan.pop(vpa.namespace, None)
            return
        for slot in slots:
            filed = self._by_label.get(slot, {})
            filed.pop(key, None)
            if not filed:
                self._by_label.pop(slot, None)

    def candidates(self, namespace: str, labels: Mapping[str, str]) -> Iterator[_Vpa]:
        """Each VPA that may match a pod of ``namespace`` with ``labels``, once."""
        scan = self._scan.get(namespace)
        if scan:
            yield from scan.values()
        for label, value in labels.items():
            filed = self._by_label.get((namespace, label, value))
            if filed:
                yield from filed.values()


class ClusterState:
    """upstream ``model.clusterState`` (see module docstring)."""

    def __init__(self, *, config: RecommenderConfig) -> None:
        self.config = config
        self.stores = HistogramStores(config.aggregations)
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._vpas: dict[tuple[str, str], _Vpa] = {}
        self._vpa_index = _VpaIndex()
        self._vpa_order = 0
        self._aggregates: dict[AggregateKey, AggregateContainerState] = {}
        self._labels: dict[str, _LabelSet] = {}
        """upstream's labelSetMap (filled by ``getLabelSetKey``; this session found no removal
        upstream): each label set string's labels, one dict shared by the pods and aggregates
        of that set, released when the last of them goes (issue 29: a label that changes on
        every update grew it forever)."""
        self._pending_creation: list[AggregateContainerState] = []
        self._pod_seq = 0
        self._live: dict[AggregateKey, dict[Place, ContainerState]] = {}
        """The pods' containers by aggregate key, kept as pods come, change labels and go
        (issue 29: the checkpoint pass read a walk over every pod's containers each
        iteration); :meth:`live_containers` is the walk, the from-scratch answer."""
        self.containers_walked = 0
        """Pod containers visited by :meth:`live_containers` walks since start (per-pod work
        the checkpoint pass no longer does: it reads ``_live``)."""

    # -- pods ---------------------------------------------------------------------------------

    def add_or_update_pod(
        self,
        *,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        phase: str,
        containers: Mapping[str, Mapping[str, int]],
        now: datetime | None = None,
    ) -> None:
        """AddOrUpdatePod + AddOrUpdateContainer for each (non-init) container.

        ``containers`` maps container name to requests ``{"cpu": millicores, "memory":
        bytes}``. ``now`` stamps new aggregates' creation time (upstream's ``time.Now()``);
        without it they are stamped by the next :meth:`garbage_collect`. In memory-saver mode a
        pod no VPA matches is not tracked (and forgotten if it was).
        """
        if self.config.memory_saver and not any(
            vpa.matches(namespace, labels) for vpa in self._vpa_index.candidates(namespace, labels)
        ):
            self.delete_pod(namespace=namespace, name=name)
            return
        key = label_set_key(labels)
        pod = self._pods.get((namespace, name))
        creation_us = go_micros(now) if now is not None else 0
        if pod is None:
            held = self._hold_labels(key, labels)
            pod = _Pod(self, namespace, name, held.labels, held.key, phase, seq=self._pod_seq)
            self._pod_seq += 1
            self._pods[(namespace, name)] = pod
            self._count_pod(pod, 1)
        elif pod.label_key != key:
            self._count_pod(pod, -1)
            self._unlink_live(pod)
            held = self._hold_labels(key, labels)
            self._release_labels(pod.label_key)
            pod.labels, pod.label_key = held.labels, held.key
            for container in pod.containers:
                self._find_or_create_aggregate(pod, container, creation_us)
            self._link_live(pod, pod.containers.values())
            self._count_pod(pod, 1)
        pod.phase = phase
        for container_name, requests in containers.items():
            cpu = _amount(requests.get(CPU, 0))
            memory = _amount(requests.get(MEMORY, 0))
            state = pod.containers.get(container_name)
            if state is None:
                self._find_or_create_aggregate(pod, container_name, creation_us)
                state = pod.containers[container_name] = _PodContainer(
                    pod=pod,
                    name=container_name,
                    request_cpu=cpu,
                    request_memory=memory,
                    place=(pod.seq, len(pod.containers)),
                )
                self._link_live(pod, (state,))
            else:
                state.request_cpu = cpu
                state.request_memory = memory

    def delete_pod(self, *, namespace: str, name: str) -> None:
        """DeletePod."""
        pod = self._pods.pop((namespace, name), None)
        if pod is not None:
            self._count_pod(pod, -1)
            self._unlink_live(pod)
            self._release_labels(pod.label_key)

    def _hold_labels(self, key: str, labels: Mapping[str, str]) -> _LabelSet:
        """The shared label set ``key`` (``labels``), held once more."""
        held = self._labels.get(key)
        if held is None:
            held = self._labels[key] = _LabelSet(key, dict(labels))
        held.users += 1
        return held

    def _release_labels(self, key: str) -> None:
        """A pod or aggregate of the set ``key`` is gone: the set goes with the last one."""
        held = self._labels.get(key)
        if held is not None:
            held.users -= 1
            if held.users <= 0:
                del self._labels[key]

    def _link_live(self, pod: _Pod, containers: Iterable[_PodContainer]) -> None:
        for container in containers:
            key = AggregateKey(pod.namespace, container._name, pod.label_key)
            self._live.setdefault(key, {})[container.place] = container

    def _unlink_live(self, pod: _Pod) -> None:
        """The pod's containers leave ``_live`` (an emptied key goes: nothing is kept for a
        deleted pod)."""
        for name, container in pod.containers.items():
            key = AggregateKey(pod.namespace, name, pod.label_key)
            entries = self._live.get(key)
            if entries is not None:
                entries.pop(container.place, None)
                if not entries:
                    del self._live[key]

    def pod_keys(self) -> list[tuple[str, str]]:
        return sorted(self._pods)

    def _count_pod(self, pod: _Pod, delta: int) -> None:
        # addPodToItsVpa / removePodFromItsVpa over the VPAs that can match (_VpaIndex)
        for vpa in self._vpa_index.candidates(pod.namespace, pod.labels):
            if vpa.matches(pod.namespace, pod.labels):
                vpa.pod_count += delta

    def _find_or_create_aggregate(
        self, pod: _Pod, container: str, creation_us: int = 0
    ) -> AggregateContainerState:
        key = AggregateKey(pod.namespace, container, pod.label_key)
        state = self._aggregates.get(key)
        if state is None:
            state = AggregateContainerState(self.stores, creation_time_us=creation_us)
            self._hold_labels(pod.label_key, pod.labels)
            if creation_us == 0:
                self._pending_creation.append(state)
            self._aggregates[key] = state
            # UseAggregationIfMatching over every VPA (upstream's loop), tried only on the VPAs
            # that can match the pod (_VpaIndex), in the same order (of the VPAs' creation):
            # when several match, the last one's update mode and policy stay, as upstream's.
            candidates = self._vpa_index.candidates(pod.namespace, pod.labels)
            for vpa in sorted(candidates, key=lambda vpa: vpa.order):
                self._use_if_matching(vpa, key, state)
        return state

    # -- samples ------------------------------------------------------------------------------

    def container_state(self, namespace: str, pod: str, container: str) -> ContainerState | None:
        """The model's state of one container (None when the pod or container is unknown)."""
        return self._container(namespace, pod, container)

    def pod_containers(self, namespace: str, pod: str) -> Mapping[str, ContainerState] | None:
        """The model's states of a pod's containers by name (None when the pod is unknown)."""
        state = self._pods.get((namespace, pod))
        return state.containers if state is not None else None

    def _container(self, namespace: str, pod: str, container: str) -> ContainerState | None:
        state = self._pods.get((namespace, pod))
        return state.containers.get(container) if state is not None else None

    def add_sample(
        self,
        *,
        namespace: str,
        pod: str,
        container: str,
        resource: str,
        usage: int | float,
        request: int | float,
        measure_start: datetime,
    ) -> bool:
        """AddSample: False when upstream drops it (unknown pod or container, a CPU sample not
        after the previous one, an older memory sample, a negative usage, another resource).

        ``usage`` is a ResourceAmount (CPU millicores, memory bytes). ``request`` is accepted
        for the interface's sake: VPA >= 1.4 weighs CPU samples by a constant, not the request.
        """
        del request
        state = self._container(namespace, pod, container)
        if state is None:
            return False
        amount = _amount(usage)
        if resource == CPU:
            return state.add_cpu_sample(amount, go_micros(measure_start))
        if resource == MEMORY:
            return state.add_memory_sample(amount, go_micros(measure_start))
        return False

    def record_oom(
        self,
        *,
        namespace: str,
        pod: str,
        container: str,
        timestamp: datetime,
        memory_request: int,
    ) -> bool:
        """RecordOOM: False for an unknown container or an OOM too old to count."""
        state = self._container(namespace, pod, container)
        if state is None:
            return False
        return state.record_oom(go_micros(timestamp), _amount(memory_request))

    def add_samples(
        self, samples: Iterable[tuple[str, str, str, str, int | float, datetime]]
    ) -> int:
        """:meth:`add_sample` for many ``(namespace, pod, container, resource, usage,
        measure_start)`` samples, in order, with the CPU histogram additions applied in
        vectorised steps (same results). Returns how many were accepted."""
        batch = CpuSampleBatch(self.stores.cpu)
        accepted = 0
        last_moment: datetime | None = None
        time_us = 0
        try:
            for namespace, pod, container, resource, usage, measure_start in samples:
                if measure_start is not last_moment:
                    last_moment, time_us = measure_start, go_micros(measure_start)
                state = self._container(namespace, pod, container)
                if state is None:
                    continue
                amount = _amount(usage)
                if resource == CPU:
                    if amount < 0 or time_us <= state.last_cpu_sample_start_us:
                        continue
                    aggregate = state.aggregator.aggregate()
                    batch.add(aggregate.cpu_row, amount, time_us)
                    aggregate.count_cpu_sample(time_us)
                    state.last_cpu_sample_start_us = time_us
                    accepted += 1
                elif resource == MEMORY and state.add_memory_sample(amount, time_us):
                    accepted += 1
        finally:
            batch.flush()
        return accepted

    # -- VPAs ---------------------------------------------------------------------------------

    def add_or_update_vpa(
        self, vpa: VerticalPodAutoscaler, *, selector: LabelSelector | None
    ) -> None:
        """AddOrUpdateVpa. ``selector=None`` is the ConfigUnsupported case: the VPA matches no
        pod. A changed selector recreates the VPA (dropping its checkpointed initial state)."""
        metadata = Meta(vpa).raw
        spec = spec_of(vpa)
        namespace = str(metadata.get("namespace") or "")
        name = str(metadata.get("name") or "")
        unsupported = selector is None
        effective = NOTHING if selector is None else selector
        key = (namespace, name)
        state = self._vpas.get(key)
        if state is not None and (
            state.selector != effective or state.config_unsupported != unsupported
        ):
            self.delete_vpa(namespace=namespace, name=name)
            state = None
        if state is None:
            created = metadata.get("creationTimestamp")
            state = _Vpa(
                namespace=namespace,
                name=name,
                selector=effective,
                config_unsupported=unsupported,
                created_us=_time_us(created),
                order=self._vpa_order,
            )
            self._vpa_order += 1
            self._vpas[key] = state
            self._vpa_index.add(key, state)
            for aggregate_key, aggregate in self._aggregates.items():
                self._use_if_matching(state, aggregate_key, aggregate)
            state.pod_count = sum(
                1 for pod in self._pods.values() if state.matches(pod.namespace, pod.labels)
            )
        state.target_ref = spec.get("targetRef")
        state.annotations = dict(metadata.get("annotations") or {})
        update_policy = spec.get("updatePolicy")
        state.update_mode = (
            update_policy.get("updateMode") if isinstance(update_policy, Mapping) else None
        )
        raw_policy: object = spec.get("resourcePolicy")  # as sent: a malformed policy is none
        policy = cast(PodResourcePolicy, raw_policy) if isinstance(raw_policy, Mapping) else None
        if policy != state.resource_policy:
            state.resource_policy = policy
            for aggregate_key, aggregate in state.aggregates.items():
                aggregate.update_from_policy(container_policy(aggregate_key.container, policy))
        for aggregate in state.aggregates.values():
            aggregate.update_mode = state.update_mode

    def _use_if_matching(
        self, vpa: _Vpa, key: AggregateKey, aggregate: AggregateContainerState
    ) -> None:
        """UseAggregationIfMatching."""
        if key in vpa.aggregates:
            return
        held = self._labels.get(key.labels)
        labels = held.labels if held is not None else None
        if vpa.namespace == key.namespace and vpa.selector.matches(labels):
            vpa.aggregates[key] = aggregate
            aggregate.is_under_vpa = True
            aggregate.update_mode = vpa.update_mode
            aggregate.update_from_policy(container_policy(key.container, vpa.resource_policy))

    def delete_vpa(self, *, namespace: str, name: str) -> None:
        """DeleteVpa: its aggregates are marked not autoscaled."""
        state = self._vpas.pop((namespace, name), None)
        if state is None:
            return
        self._vpa_index.remove((namespace, name), state)
        for aggregate in state.aggregates.values():
            aggregate.mark_not_autoscaled()
        for initial in state.initial_state.values():
            initial.release()

    def vpa_keys(self) -> list[tuple[str, str]]:
        return sorted(self._vpas)

    def matching_vpa(self, *, namespace: str, labels: Mapping[str, str]) -> tuple[str, str] | None:
        """A VPA whose selector matches pods with these labels (memory saver, GC)."""
        for key, vpa in self._vpas.items():
            if vpa.matches(namespace, labels):
                return key
        return None

    # -- recommendations ----------------------------------------------------------------------

    def _merged_states(self, vpa: _Vpa) -> dict[str, AggregateContainerState]:
        """Vpa.AggregateStateByContainerName: merged per container name + initial state."""
        merged: dict[str, AggregateContainerState] = {}
        for key, aggregate in vpa.aggregates.items():
            target = merged.get(key.container)
            if target is None:
                target = merged[key.container] = AggregateContainerState(self.stores)
            target.merge(aggregate)
        for container, initial in vpa.initial_state.items():
            target = merged.get(container)
            if target is None:
                target = merged[container] = AggregateContainerState(self.stores)
            target.merge(initial)
        return merged

    def _states_for(
        self, vpa: _Vpa
    ) -> tuple[dict[str, AggregateContainerState], list[AggregateContainerState]]:
        """GetContainerNameToAggregateStateMap: the merged state per container name, ``mode:
        Off`` containers removed; and the temporary merged states to release afterwards.

        A container name with a single aggregate and no checkpointed state uses that aggregate
        itself: merging one histogram into an empty one copies it exactly (reference shifted
        from Go's zero time, weights ``0 + w``), so the result is the same without the copy.
        """
        sources: dict[str, list[AggregateContainerState]] = {}
        for key, aggregate in vpa.aggregates.items():
            sources.setdefault(key.container, []).append(aggregate)
        states: dict[str, AggregateContainerState] = {}
        temporaries: list[AggregateContainerState] = []
        for container in [*sources, *(c for c in vpa.initial_state if c not in sources)]:
            policy = container_policy(container, vpa.resource_policy)
            if policy is not None and policy.get("mode") == SCALING_MODE_OFF:
                continue
            parts = sources.get(container, [])
            initial = vpa.initial_state.get(container)
            if len(parts) == 1 and initial is None:
                states[container] = parts[0]
                continue
            merged = AggregateContainerState(self.stores)
            temporaries.append(merged)
            for part in parts:
                merged.merge(part)
            if initial is not None:
                merged.merge(initial)
            merged.update_from_policy(policy)
            states[container] = merged
        return states, temporaries

    def _finish(self, vpa: _Vpa, estimates: Mapping[str, ContainerEstimate]) -> VpaRecommendation:
        """MapToListOfRecommendedContainerResources, post-processors, UpdateRecommendation."""
        entries = build_recommendation(
            estimates,
            {
                name: controlled_resources(container_policy(name, vpa.resource_policy))
                for name in estimates
            },
            config=self.config,
            resource_policy=vpa.resource_policy,
            annotations=vpa.annotations,
        )
        # Vpa.UpdateRecommendation also keeps each aggregate's LastRecommendation, read only
        # by upstream's quality metrics (vpa_quality_*), which kubescale does not export: not
        # kept, so a recommendation costs no memory per container after it is returned.
        return VpaRecommendation(
            container_recommendations=entries,
            pod_count=vpa.pod_count,
            config_unsupported=vpa.config_unsupported,
        )

    def recommendation(self, *, namespace: str, name: str, now: datetime) -> VpaRecommendation:
        """One UpdateVPAs pass for the VPA: its recommendation, pod count and condition inputs.

        Records the uncapped targets on the VPA's aggregates (``Vpa.UpdateRecommendation``).
        Raises KeyError for a VPA not in the state.
        """
        vpa = self._vpas[(namespace, name)]
        self._stamp_creation(go_micros(now))
        states, temporaries = self._states_for(vpa)
        try:
            count = len(states)
            if self.config.recommendation_policy == ADAPTIVE_POLICY:
                now_us = go_micros(now)
                estimates = {
                    container: estimate_adaptive(
                        state, self.config, now_us=now_us, containers=count
                    )
                    for container, state in states.items()
                }
            else:
                estimates = {
                    container: estimate(state, self.config, containers=count)
                    for container, state in states.items()
                }
        finally:
            for state in temporaries:
                state.release()
        return self._finish(vpa, estimates)

    def recommendations(self, *, now: datetime) -> dict[tuple[str, str], VpaRecommendation]:
        """:meth:`recommendation` for every VPA, the estimation vectorised over all
        containers at once (:mod:`kubescale.controllers.vpa.model.batch_model`); same results."""
        self._stamp_creation(go_micros(now))
        plan: list[tuple[_Vpa, list[str]]] = []
        states: list[AggregateContainerState] = []
        counts: list[int] = []
        temporaries: list[AggregateContainerState] = []
        try:
            for vpa in self._vpas.values():
                by_name, temps = self._states_for(vpa)
                temporaries.extend(temps)
                plan.append((vpa, list(by_name)))
                states.extend(by_name.values())
                counts.extend([len(by_name)] * len(by_name))
            if self.config.recommendation_policy == ADAPTIVE_POLICY:
                estimates = estimate_adaptive_states(
                    states, counts, self.config, now_us=go_micros(now)
                )
            else:
                estimates = estimate_states(states, counts, self.config)
        finally:
            for state in temporaries:
                state.release()
        result: dict[tuple[str, str], VpaRecommendation] = {}
        position = 0
        for vpa, names in plan:
            chunk = estimates[position : position + len(names)]
            position += len(names)
            result[(vpa.namespace, vpa.name)] = self._finish(
                vpa, dict(zip(names, chunk, strict=True))
            )
        return result

    # -- checkpoints --------------------------------------------------------------------------

    def live_containers(self, *, of: Collection[AggregateKey] | None = None) -> LiveContainers:
        """The pods' containers by aggregate key (only the keys ``of``, if given), each with its
        place in the walk over the pods, from one walk over every pod: the from-scratch answer
        of what :meth:`checkpoints` reads from the kept index (:meth:`live_index`)."""
        index: LiveContainers = {}
        walked = 0
        for pod_place, pod in enumerate(self._pods.values()):
            for container_place, (container_name, container) in enumerate(pod.containers.items()):
                key = AggregateKey(pod.namespace, container_name, pod.label_key)
                if of is None or key in of:
                    index.setdefault(key, []).append(((pod_place, container_place), container))
            walked += len(pod.containers)
        self.containers_walked += walked
        return index

    def live_index(self) -> LiveContainers:
        """The kept index of the pods' containers by aggregate key, in the same form as
        :meth:`live_containers` (places sort the same way; their numbers differ)."""
        return {key: sorted(entries.items()) for key, entries in self._live.items()}

    def checkpoints(
        self, *, namespace: str, name: str, now: datetime, live: LiveContainers | None = None
    ) -> list[VerticalPodAutoscalerCheckpoint]:
        """The VPA's ``VerticalPodAutoscalerCheckpoint`` objects (``StoreCheckpoints``), one per
        container name, sorted by name, with each live container's in-progress memory peak
        subtracted (``subtractCurrentContainerMemoryPeak``). ``live`` is
        :meth:`live_containers` (the from-scratch walk); without it the kept index is read,
        only the VPA's own aggregates' entries."""
        vpa = self._vpas[(namespace, name)]
        now_us = go_micros(now)
        # The VPA's containers in the order of the walk over the pods, as upstream subtracts
        # them (float subtractions of one histogram do not commute bit for bit).
        if live is None:
            kept = self._live
            own = sorted(
                (place, key.container, container)
                for key in vpa.aggregates
                for place, container in kept.get(key, {}).items()
            )
        else:
            own = sorted(
                (place, key.container, container)
                for key in vpa.aggregates
                for place, container in live.get(key, ())
            )
        merged = self._merged_states(vpa)
        try:
            for _, container_name, container in own:
                target = merged.get(container_name)
                if target is not None and now_us < container.window_end_us:
                    target.subtract_memory_peak(
                        container.max_memory_peak(), container.window_end_us
                    )
            result = []
            for container_name in sorted(merged):
                status: VerticalPodAutoscalerCheckpointStatus = {
                    "lastUpdateTime": format_time(now_us)
                }
                status.update(merged[container_name].save_to_checkpoint())
                result.append(
                    checkpoint_object(
                        namespace=namespace,
                        vpa_name=name,
                        container_name=container_name,
                        status=status,
                    )
                )
        finally:
            for state in merged.values():
                state.release()
        return result

    def mark_checkpoint_written(self, *, namespace: str, name: str, now: datetime) -> None:
        """Vpa.CheckpointWritten = now (after the writer stored the VPA's checkpoints)."""
        vpa = self._vpas.get((namespace, name))
        if vpa is not None:
            vpa.checkpoint_written_us = go_micros(now)

    def vpa_keys_for_checkpoints(self) -> list[tuple[str, str]]:
        """getVpasToCheckpoint: VPAs, least recently checkpointed first."""
        return sorted(self._vpas, key=lambda key: (self._vpas[key].checkpoint_written_us, key))

    def load_checkpoint(self, checkpoint: VerticalPodAutoscalerCheckpoint) -> bool:
        """setVpaCheckpoint: the checkpoint becomes the VPA container's initial state. False
        for a VPA not in the state or a checkpoint that does not load (e.g. not ``v3``)."""
        spec = spec_of(checkpoint)
        key = (meta(checkpoint).namespace, str(spec.get("vpaObjectName") or ""))
        vpa = self._vpas.get(key)
        container = spec.get("containerName")
        if vpa is None or not isinstance(container, str):
            return False
        state = AggregateContainerState(self.stores)
        try:
            state.load_from_checkpoint(status_of(checkpoint))
        except (CheckpointFormatError, HistogramCheckpointError) as error:
            state.release()
            _log.warning(
                "cannot load checkpoint",
                extra={"fields": {"vpa": f"{key[0]}/{key[1]}", "error": str(error)}},
            )
            return False
        previous = vpa.initial_state.get(container)
        if previous is not None:
            previous.release()
        vpa.initial_state[container] = state
        return True

    # -- garbage collection -------------------------------------------------------------------

    def _stamp_creation(self, now_us: int) -> None:
        for state in self._pending_creation:
            if state.creation_time_us == 0:
                state.creation_time_us = now_us
        self._pending_creation.clear()

    def garbage_collect(
        self,
        *,
        now: datetime,
        controller_exists: Callable[[str, CrossVersionObjectReference | None], bool] | None = None,
    ) -> int:
        """garbageCollectAggregateCollectionStates; returns how many aggregates went.

        An aggregate goes when it is empty and no contributive pod uses its key, or when it is
        expired (8 days after its last sample, or after creation if empty). A pod is
        contributive when not Succeeded/Failed, or when its controlling VPA's target controller
        exists: ``controller_exists(namespace, targetRef)``, assumed true when not given.
        """
        now_us = go_micros(now)
        self._stamp_creation(now_us)
        contributive: set[AggregateKey] = set()
        for pod in self._pods.values():
            active = pod.phase not in (POD_SUCCEEDED, POD_FAILED)
            if not active:
                controlling = next(
                    (v for v in self._vpas.values() if v.matches(pod.namespace, pod.labels)),
                    None,
                )
                active = controlling is not None and (
                    controller_exists is None
                    or controller_exists(controlling.namespace, controlling.target_ref)
                )
            if active:
                for container in pod.containers:
                    contributive.add(AggregateKey(pod.namespace, container, pod.label_key))
        doomed = [
            key
            for key, state in self._aggregates.items()
            if (key not in contributive and state.is_empty()) or state.is_expired(now_us)
        ]
        for key in doomed:
            state = self._aggregates.pop(key)
            self._release_labels(key.labels)
            for vpa in self._vpas.values():
                if vpa.aggregates.pop(key, None) is not None:
                    state.mark_not_autoscaled()
            state.release()
        return len(doomed)

    # -- introspection ------------------------------------------------------------------------

    def aggregate_count(self) -> int:
        """StateMapSize."""
        return len(self._aggregates)

    def label_set_count(self) -> int:
        """Label sets held (the pods' and aggregates')."""
        return len(self._labels)

    def aggregate(self, key: AggregateKey) -> AggregateContainerState | None:
        return self._aggregates.get(key)

    def aggregate_keys(self) -> list[AggregateKey]:
        return list(self._aggregates)

    def vpa_pod_count(self, *, namespace: str, name: str) -> int:
        return self._vpas[(namespace, name)].pod_count


def _amount(value: int | float) -> int:
    """A ResourceAmount from an int, or a float as Go's ``int64(f)`` would."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    return go_float_to_int64(float(value))


def _time_us(value: object) -> int:
    """A VPA's creationTimestamp (a datetime or metav1.Time) in Go microseconds; 0 when unset
    or unreadable (Go's zero time)."""
    moment = value if isinstance(value, datetime) else parse_time(value)
    if moment is None or moment == GO_ZERO_TIME:
        return 0
    return go_micros(moment)
