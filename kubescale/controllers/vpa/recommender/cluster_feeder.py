"""What the recommender feeds its model from: informers, PodMetrics and OOMs.

Upstream ``pkg/recommender/input/cluster_feeder.go`` (``clusterStateFeeder``) on kubescale's
access layer. Informers (from the process's :class:`kubescale.kube.shared_cache.SharedCache`,
scoped to ``--vpa-object-namespace`` when set):

* VerticalPodAutoscalers; the shared controller lookups for the targets' selectors
  (:mod:`kubescale.controllers.vpa.api.vpa_targets`);
* pods — read as upstream's lister with ``status.phase!=Pending`` reads them (a pending pod has
  no usage yet): pending pods are skipped here rather than by a field selector, so the process
  watches pods once for every component; their updates go to the OOM observer;
* core Events with ``reason=Evicted`` (upstream's eviction watch; new events go to the OOM
  observer);
* VerticalPodAutoscalerCheckpoints (:mod:`kubescale.controllers.vpa.checkpoint.checkpoint_store`).

The steps, each called by
:class:`kubescale.controllers.vpa.recommender.recommender_loop.RecommenderLoop`:

* :meth:`ClusterFeeder.load_vpas` (``LoadVPAs``): the VPAs this recommender handles
  (:func:`handles_vpa`: recommender name and namespace flags) enter the model with their
  target's selector, or none when the target is unusable (``ConfigUnsupported``); VPAs gone
  from the cache leave it. Targets whose kind or ``/scale`` was unknown are looked up on the API
  server and checked again in the same pass.
* :meth:`ClusterFeeder.load_pods` (``LoadPods``): cached pods with their labels, phase and
  each app container's current requests (``ContainerRequestsAndLimits``: CPU as
  ``MilliValue()``, memory as ``Value()``); init containers are not tracked, so their samples
  are dropped. Upstream feeds every pod each loop; here only the pods the informer changed
  since the last iteration (:mod:`.pod_feed`, the same model; every pod at start-up), split
  into :meth:`ClusterFeeder.take_pods` on the event loop and :meth:`ClusterFeeder.feed` on the
  worker. Pods gone from the cache are deleted only after the OOMs are recorded
  (:meth:`delete_removed_pods`), as upstream does.
* :meth:`ClusterFeeder.load_real_time_metrics` (``LoadRealTimeMetrics``): one LIST of
  ``metrics.k8s.io/v1beta1`` PodMetrics; each container's CPU (``MilliValue()``) and memory
  (``Value()``) become samples at the PodMetrics ``timestamp``; then every OOM observed since
  the last call is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, cast

from kubescale.base.logs import component_logger
from kubescale.base.times import parse_time
from kubescale.controllers.vpa.api.current_resources import CPU, MEMORY
from kubescale.controllers.vpa.api.vpa_targets import TargetCheck, VpaTargets
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.go_math import go_micros
from kubescale.controllers.vpa.recommender.oom_observer import OomInfo, OomObserver
from kubescale.controllers.vpa.recommender.pod_feed import (
    PENDING,
    PodChanges,
    PodFeed,
    container_requests,
    phase,
)
from kubescale.controllers.vpa.recommender.recommender_config import (
    DEFAULT_RECOMMENDER_NAME,
    RecommenderSettings,
)
from kubescale.controllers.vpa.recommender.recommender_metrics import RecommenderMetrics
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeError
from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.resources import (
    CORE_EVENTS,
    PODS,
    VERTICAL_POD_AUTOSCALERS,
    VPA_CHECKPOINTS,
    ResourceType,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.meta import CrossVersionObjectReference
from kubescale.objects.metrics_api import PodMetrics
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, optional_spec_of
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = [
    "POD_METRICS",
    "ClusterFeeder",
    "MetricsReader",
    "ObservedVpa",
    "container_requests",
    "handles_vpa",
    "pod_metrics_samples",
]

log = component_logger("vpa-recommender")

POD_METRICS: Final = ResourceType(
    group="metrics.k8s.io",
    version="v1beta1",
    kind="PodMetrics",
    plural="pods",
    namespaced=True,
    verbs=("get", "list"),
)
"""metrics-server's resource metrics API (``PodMetricses`` in the Go client)."""
EVICTION_EVENTS: Final = "reason=Evicted"

Sample = tuple[str, str, str, str, int, datetime]


@dataclass(frozen=True)
class ObservedVpa:
    """A VPA this recommender handles, as last listed, and what its target check said."""

    vpa: VerticalPodAutoscaler
    check: TargetCheck

    @property
    def key(self) -> tuple[str, str]:
        metadata = Meta(self.vpa).raw
        return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _recommender_names(vpa: VerticalPodAutoscaler) -> list[str]:
    spec = optional_spec_of(vpa)
    selectors: object = spec.get("recommenders") if spec is not None else None
    if not isinstance(selectors, list):
        return []
    return [str(s.get("name") or "") for s in selectors if isinstance(s, Mapping)]


def handles_vpa(
    vpa: VerticalPodAutoscaler,
    *,
    recommender_name: str,
    vpa_object_namespace: str = "",
    ignored_namespaces: Collection[str] = (),
) -> bool:
    """``filterVPAs``: the recommender named ``default`` takes VPAs naming no recommender or
    naming ``default``; any other name only VPAs naming it. Then ``shouldIgnoreNamespace``."""
    names = _recommender_names(vpa)
    spec = optional_spec_of(vpa)
    implicit_default = not (spec is not None and spec.get("recommenders"))
    if recommender_name == DEFAULT_RECOMMENDER_NAME:
        if not implicit_default and recommender_name not in names:
            return False
    elif implicit_default or recommender_name not in names:
        return False
    namespace = str(Meta(vpa).raw.get("namespace") or "")
    return not ignores_namespace(
        namespace, vpa_object_namespace=vpa_object_namespace, ignored=ignored_namespaces
    )


def ignores_namespace(
    namespace: str, *, vpa_object_namespace: str, ignored: Collection[str]
) -> bool:
    """``shouldIgnoreNamespace``."""
    if vpa_object_namespace and namespace != vpa_object_namespace:
        return True
    return namespace in ignored


def _usage_amount(resource: str, value: object) -> int:
    """``MilliValue()`` of a CPU usage, ``Value()`` of a memory usage (QuantityError)."""
    quantity = Quantity.from_json(value)
    return quantity.milli_value() if resource == CPU else quantity.value()


def _container_samples(
    namespace: str,
    pod: str,
    container: Mapping[str, object],
    name: str,
    *,
    moment: datetime,
    amount: Callable[[str, object], int],
) -> tuple[Sample, ...]:
    """``newContainerUsageSamplesWithKey`` for one container of a PodMetrics: its CPU and
    memory samples at ``moment``, none (and a warning) if a usage does not parse."""
    usage = cast("Mapping[str, object]", container.get("usage") or {})
    try:
        cpu = amount(CPU, usage.get(CPU, "0"))
        memory = amount(MEMORY, usage.get(MEMORY, "0"))
    except QuantityError:
        log.warning(
            "unparsable PodMetrics usage",
            extra={"fields": {"pod": f"{namespace}/{pod}", "container": name}},
        )
        return ()
    return (namespace, pod, name, CPU, cpu, moment), (namespace, pod, name, MEMORY, memory, moment)


def pod_metrics_samples(items: Iterable[PodMetrics]) -> list[Sample]:
    """``createContainerMetricsSnapshots`` + ``newContainerUsageSamplesWithKey``: one CPU and
    one memory sample per container, measured at the PodMetrics ``timestamp``."""
    samples: list[Sample] = []
    for item in items:
        metadata = Meta(item).raw
        namespace = str(metadata.get("namespace") or "")
        pod = str(metadata.get("name") or "")
        moment = parse_time(item.get("timestamp"))
        containers: object = item.get("containers")  # as metrics-server sent it: checked here
        if moment is None or not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, Mapping):
                continue
            name = str(container.get("name") or "")
            samples.extend(
                _container_samples(
                    namespace, pod, container, name, moment=moment, amount=_usage_amount
                )
            )
    return samples


MEMO_SIZE: Final = 1 << 16
"""Entries the :class:`MetricsReader` memos keep at most (each is emptied when full)."""


class MetricsReader:
    """:func:`pod_metrics_samples` reading only what the model can still take (issue 29).

    Upstream lists every PodMetrics each loop (``LoadRealTimeMetrics``): that pass is over
    every pod by upstream's algorithm. What it costs per pod is made small here, with the same
    samples accepted in the same order:

    * a container the model does not know (pod not fed, or an init container) is skipped
      before its usage is read: upstream's ``AddSample`` drops it (``NewKeyError``);
    * a container whose two samples the model would both refuse by their time is skipped
      before its usage is read: upstream's ``addCPUSample`` discards a sample whose
      ``MeasureStart`` is not after ``LastCPUSampleStart`` and ``addMemorySample`` one before
      ``lastMemorySampleStart`` (``model/container.go``). Both times only grow while the
      listing's samples are added (OOMs are recorded after them), so a sample refused when
      read is refused when added. A PodMetrics whose ``timestamp`` has not moved since the
      last loop is such a duplicate for CPU; its memory sample, at the same time as the last,
      is taken again by upstream's rule (a no-op on the peaks) and is read;
    * otherwise both samples are read (a container with an unparsable usage loses both, as
      before), each usage text converted once: the memo of quantity texts and of timestamps
      (pure conversions, kept across loops so a steady cluster's usages are not parsed again,
      emptied when :data:`MEMO_SIZE` entries are reached).

    The one difference from the from-scratch path: an unparsable usage of a container skipped
    unread is not logged."""

    def __init__(self) -> None:
        self._quantities: dict[tuple[str, str], int] = {}
        self._times: dict[str, tuple[datetime, int]] = {}
        self.parsed = 0
        """Usage quantities and timestamps parsed since start (the per-pod work a steady
        loop no longer does)."""
        self.skipped = 0
        """Containers skipped unread since start (unknown, or both samples refused)."""

    def _time(self, value: object) -> tuple[datetime, int] | None:
        if not isinstance(value, str):
            return None
        known = self._times.get(value)
        if known is None:
            moment = parse_time(value)
            if moment is None:
                return None
            self.parsed += 1
            if len(self._times) >= MEMO_SIZE:
                self._times.clear()
            known = self._times[value] = (moment, go_micros(moment))
        return known

    def _amount(self, resource: str, value: object) -> int:
        """``MilliValue()`` of a CPU usage, ``Value()`` of a memory usage (QuantityError)."""
        if not isinstance(value, str):  # a number as sent: not memoised
            return _usage_amount(resource, value)
        key = (resource, value)
        known = self._quantities.get(key)
        if known is None:
            known = _usage_amount(resource, value)
            self.parsed += 1
            if len(self._quantities) >= MEMO_SIZE:
                self._quantities.clear()
            self._quantities[key] = known
        return known

    def samples(self, items: Iterable[PodMetrics], state: ClusterState) -> list[Sample]:
        """The samples of ``items`` that ``state`` may accept, in :func:`pod_metrics_samples`'
        order (the rest it would refuse)."""
        samples: list[Sample] = []
        amount = self._amount
        for item in items:
            metadata = Meta(item).raw
            namespace = str(metadata.get("namespace") or "")
            pod = str(metadata.get("name") or "")
            known = state.pod_containers(namespace, pod)
            containers: object = item.get("containers")  # as metrics-server sent it
            if known is None or not isinstance(containers, list):
                self.skipped += len(containers) if isinstance(containers, list) else 0
                continue
            when = self._time(item.get("timestamp"))
            if when is None:
                continue
            moment, time_us = when
            for container in containers:
                if not isinstance(container, Mapping):
                    continue
                name = str(container.get("name") or "")
                model = known.get(name)
                if model is None or (
                    time_us <= model.last_cpu_sample_start_us
                    and time_us < model.last_memory_sample_start_us
                ):
                    self.skipped += 1
                    continue
                samples.extend(
                    _container_samples(
                        namespace, pod, container, name, moment=moment, amount=amount
                    )
                )
        return samples


class ClusterFeeder:
    """The informers and the feeding steps of one recommender (see the module docstring)."""

    def __init__(
        self,
        *,
        client: KubeClient,
        cache: SharedCache,
        settings: RecommenderSettings,
        metrics: RecommenderMetrics,
    ) -> None:
        self.client = client
        self.cache = cache
        self.settings = settings
        self.metrics = metrics
        informers = cache.informers
        namespace = settings.vpa_object_namespace or None
        self.vpas: Informer[VerticalPodAutoscaler] = informers.informer(
            VERTICAL_POD_AUTOSCALERS, namespace=namespace
        )
        self.pods = informers.informer(PODS, namespace=namespace)
        self.events = informers.informer(
            CORE_EVENTS, namespace=namespace, field_selector=EVICTION_EVENTS
        )
        self.checkpoints = informers.informer(VPA_CHECKPOINTS, namespace=namespace)
        self.targets = VpaTargets(controllers=cache.controllers)
        self.oom = OomObserver()
        self.pods.add_handlers(EventHandlers(on_update=self._pod_updated))
        self.events.add_handlers(EventHandlers(on_add=self.oom.on_event))
        self.state = ClusterState(config=settings.model)
        self.observed: list[ObservedVpa] = []
        self.pod_feed = PodFeed(memory_saver=settings.model.memory_saver)
        """Which pods each ``LoadPods`` feeds (:mod:`.pod_feed`: the changed ones)."""
        self.metrics_reader = MetricsReader()
        """What ``LoadRealTimeMetrics`` reads of each PodMetrics (:class:`MetricsReader`)."""
        self.pods.add_handlers(
            EventHandlers(
                on_add=self.pod_feed.changed,
                on_update=lambda _old, new: self.pod_feed.changed(new),
                on_delete=self.pod_feed.changed,
            )
        )

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        # Upstream's pod informer lists status.phase!=Pending: a pod leaving Pending is an ADD
        # there, not an update, and a pending pod is never seen.
        if phase(old) != PENDING and phase(new) != PENDING:
            self.oom.on_pod_update(old, new)

    def reset(self) -> None:
        """A fresh model, as a restarted recommender has (OOMs seen so far are dropped)."""
        self.state = ClusterState(config=self.settings.model)
        self.observed = []
        self.pod_feed.reset()
        self.oom.drain()

    def ignores_namespace(self, namespace: str) -> bool:
        return ignores_namespace(
            namespace,
            vpa_object_namespace=self.settings.vpa_object_namespace,
            ignored=self.settings.ignored_namespaces,
        )

    def all_vpa_keys(self) -> set[tuple[str, str]]:
        """Every cached VPA, whichever recommender it names (checkpoint GC keeps theirs)."""
        keys = set()
        for vpa in self.vpas.lister.list():
            metadata = Meta(vpa).raw
            keys.add((str(metadata.get("namespace") or ""), str(metadata.get("name") or "")))
        return keys

    def _handled(self) -> list[VerticalPodAutoscaler]:
        settings = self.settings
        handled = [
            vpa
            for vpa in self.vpas.lister.list()
            if handles_vpa(
                vpa,
                recommender_name=settings.recommender_name,
                vpa_object_namespace=settings.vpa_object_namespace,
                ignored_namespaces=settings.ignored_namespaces,
            )
        ]
        return sorted(handled, key=lambda vpa: ObservedVpa(vpa, TargetCheck(None)).key)

    async def load_vpas(self) -> None:
        """``LoadVPAs`` (module docstring)."""
        vpas = self._handled()
        checks = [self.targets.check(vpa) for vpa in vpas]
        if self.targets.pending:
            try:
                await self.targets.refresh()
            except KubeError as err:
                log.warning("cannot look up VPA targets", extra={"fields": {"error": str(err)}})
            checks = [self.targets.check(vpa) for vpa in vpas]
        observed = [ObservedVpa(vpa, check) for vpa, check in zip(vpas, checks, strict=True)]
        for entry in observed:
            self.state.add_or_update_vpa(entry.vpa, selector=entry.check.selector)
        keys = {entry.key for entry in observed}
        for namespace, name in self.state.vpa_keys():
            if (namespace, name) not in keys:
                log.info("deleting VPA", extra={"fields": {"vpa": f"{namespace}/{name}"}})
                self.state.delete_vpa(namespace=namespace, name=name)
        self.pod_feed.vpas_loaded((entry.key, entry.check.selector) for entry in observed)
        self.observed = observed

    def load_pods(self, *, now: datetime) -> None:
        """``LoadPods`` (module docstring), the pods taken and fed at once."""
        self.feed(self.take_pods(), now=now)

    def take_pods(self) -> PodChanges:
        """The pods ``LoadPods`` feeds next (:meth:`.pod_feed.PodFeed.take`), read from the
        informer on the event loop's thread."""
        return self.pod_feed.take(self.pods.lister)

    def feed(self, changes: PodChanges, *, now: datetime) -> None:
        """``LoadPods`` over what :meth:`take_pods` took: touches only the model, so it may
        run on the loop's worker thread."""
        self.pod_feed.feed(self.state, changes, now=now)

    def feed_pods(self, pods: Sequence[Pod], *, now: datetime) -> None:
        """``LoadPods`` over ``pods``, every pod (the from-scratch path): a list taken from
        the informer (``lister.list()``: a new list of the cached objects, which informers
        replace and never change in place). Touches only the model."""
        self.pod_feed.feed_all(self.state, pods, now=now)

    @property
    def pods_fed(self) -> int:
        """Pods the last ``LoadPods`` fed into the model (``add_or_update_pod`` calls)."""
        return self.pod_feed.fed

    async def load_real_time_metrics(self) -> int:
        """``LoadRealTimeMetrics``; returns how many samples the model accepted."""
        items, ooms = await self.fetch_real_time_metrics()
        return self.feed_real_time_metrics(items, ooms)

    async def fetch_real_time_metrics(self) -> tuple[list[PodMetrics], list[OomInfo]]:
        """The I/O half of ``LoadRealTimeMetrics``, on the event loop: the PodMetrics listed
        and the OOMs observed since the last call (the observer is fed by informer handlers,
        on the loop)."""
        items: list[PodMetrics] = []
        try:
            listing = await self.client.list(
                POD_METRICS, namespace=self.settings.vpa_object_namespace or None
            )
        except KubeError as err:
            self.metrics.record_metrics_server_response(error=True)
            log.error("cannot get PodMetrics", extra={"fields": {"error": str(err)}})
        else:
            self.metrics.record_metrics_server_response(error=False)
            # a PodMetrics list's items: objects, each field checked by pod_metrics_samples
            items = [
                cast(PodMetrics, item)
                for item in listing.get("items") or []
                if isinstance(item, dict)
            ]
        return items, self.oom.drain()

    def feed_real_time_metrics(self, items: Sequence[PodMetrics], ooms: Sequence[OomInfo]) -> int:
        """The model half of ``LoadRealTimeMetrics`` (what :meth:`fetch_real_time_metrics`
        returned): touches only the model, so it may run on the loop's worker thread."""
        accepted = self.state.add_samples(self.metrics_reader.samples(items, self.state))
        for oom in ooms:
            if not self.state.record_oom(
                namespace=oom.namespace,
                pod=oom.pod,
                container=oom.container,
                timestamp=oom.timestamp,
                memory_request=oom.memory,
            ):
                log.info(
                    "failed to record OOM",
                    extra={
                        "fields": {"pod": f"{oom.namespace}/{oom.pod}", "container": oom.container}
                    },
                )
        self.metrics.aggregate_states.set(self.state.aggregate_count())
        return accepted

    def delete_removed_pods(self) -> None:
        """``DeleteRemovedPods``: pods missing from the last :meth:`load_pods`."""
        self.pod_feed.delete_removed(self.state)

    def controller_exists(
        self, namespace: str, target_ref: CrossVersionObjectReference | None
    ) -> bool:
        """For aggregate GC: does the VPA's target controller exist (unknown kinds: assumed)."""
        if not isinstance(target_ref, Mapping):  # none, or malformed (the VPA as sent)
            return False
        kind = str(target_ref.get("kind") or "")
        if not self.targets.is_scalable(str(target_ref.get("apiVersion") or ""), kind):
            return True
        found = self.targets.owner(
            str(target_ref.get("apiVersion") or ""),
            kind,
            namespace,
            str(target_ref.get("name") or ""),
        )
        return found is not None
