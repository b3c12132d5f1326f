"""The cluster autoscaler as a component (:mod:`kubescale.runtime.component`): one leader-only loop.

* **Caches** (declared when built, by :class:`~.autoscaler_loop.AutoscalerLoop` and its
  :class:`~.clusterapi_provider.ClusterApiProvider`): Nodes, Pods, PodDisruptionBudgets,
  PriorityClasses, Namespaces, DaemonSets, ReplicaSets, StatefulSets, Jobs,
  ReplicationControllers, the ConfigMaps of ``--namespace`` (the priority expander's), and
  Cluster API MachineDeployments, MachineSets and Machines (at ``CAPI_VERSION``, else the
  ``CAPI_GROUP`` group's preferred version, discovered by the loop's first iteration).
* **Loop** ``cluster-autoscaler`` every ``--scan-interval``, leader-only: upstream runs one
  cluster-autoscaler replica, or leader-elects them. When this replica starts a new term of
  leadership, the loop starts over as upstream's process does after a restart: its registry,
  unneeded times, backoffs and drains in progress were about a world another replica may have
  changed; the first iteration removes the ``ToBeDeletedByClusterAutoscaler`` taints a previous
  leader left, and scale-down starts in cooldown.
* **Metrics** under upstream's names (:mod:`.autoscaler_metrics`), registered once;
  **stop** closes the event recorder.
* What the loop did joins a simulation's timeline (:meth:`.AutoscalerLoop.drain_reports`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_provider import ClusterApiProvider
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_versions import (
    CapiVersionError,
    validated_group_version,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import (
    autoscaler_settings_from_args,
)
from kubescale.controllers.autoscaler.config.autoscaler_flags import add_autoscaler_arguments
from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    AutoscalerConfigError,
    AutoscalerSettings,
)
from kubescale.controllers.autoscaler.core.autoscaler_loop import LOOP_NAME, AutoscalerLoop
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.controllers.vpa.admission.cached_pod_admission import (
    AdmissionOptions,
    CachedPodAdmission,
)
from kubescale.controllers.vpa.api.pod_admission import PodAdmissionError
from kubescale.controllers.vpa.api.pod_patches import OBSERVED_CONTAINERS_ANNOTATION
from kubescale.controllers.vpa.api.requests_ahead import pod_with_admitted_resources
from kubescale.kube.events import EventRecorder
from kubescale.objects.views import Meta, spec_of
from kubescale.runtime.component import (
    BaseComponent,
    ComponentSpec,
    LoopSpec,
    Runtime,
    TimelineReport,
)

__all__ = ["EVENT_COMPONENT", "SPEC", "AutoscalerComponent", "with_capi_environment"]

log = component_logger("cluster-autoscaler")

EVENT_COMPONENT: Final = "cluster-autoscaler"
"""The events' ``source.component`` (upstream's)."""


def with_capi_environment(
    settings: AutoscalerSettings, environ: Mapping[str, str]
) -> AutoscalerSettings:
    """Upstream's clusterapi provider reads ``CAPI_GROUP`` and ``CAPI_VERSION`` from its
    environment (:mod:`.clusterapi_versions`); a value that cannot be one is a one-line
    :class:`~.autoscaler_settings.AutoscalerConfigError` naming the variable."""
    try:
        group, version = validated_group_version(environ)
    except CapiVersionError as err:
        raise AutoscalerConfigError(str(err)) from None
    return replace(settings, capi_group=group, capi_version=version)


class _TermAwareLoop:
    """The autoscaler loop, started over at the start of each term of leadership."""

    name = LOOP_NAME

    def __init__(self, component: AutoscalerComponent) -> None:
        self._component = component
        self._term: int | None = None

    async def run_once(self, now: datetime) -> None:
        component = self._component
        term = component.runtime.leadership.term
        if term != self._term:
            if self._term is not None:
                log.info("new term of leadership: the loop starts over")
                component.loop = component.new_loop()
            self._term = term
        await component.loop.run_once(now)

    def drain_reports(self) -> list[TimelineReport]:
        return self._component.loop.drain_reports()


class AutoscalerComponent(BaseComponent):
    """The cluster autoscaler (module docstring)."""

    name = "cluster-autoscaler"

    def __init__(self, settings: AutoscalerSettings, runtime: Runtime) -> None:
        self.settings = settings
        self.runtime = runtime
        self.metrics = AutoscalerMetrics(runtime.registry)
        self.events = EventRecorder(
            client=runtime.leader_client, component=EVENT_COMPONENT, host=runtime.identity
        )
        self.admission: CachedPodAdmission | None = None
        if runtime.coordination.shared:
            # One brain: pods are binpacked with the requests the webhook gives them
            # (kubescale/controllers/vpa/api/requests_ahead.py), through the webhook's own
            # cached decision on the shared cache.
            # Optional: on a cluster without the VPA's CRDs the autoscaler still starts, and
            # binpacks pods with their own requests (the admission caches never sync).
            with runtime.cache.informers.optional():
                self.admission = CachedPodAdmission(
                    caches=AdmissionCaches(cache=runtime.cache, watch_hpas=True),
                    settings=AdmissionOptions(avoid_hpa_conflict=True),
                )
        self.loop = self.new_loop()
        self._gated = _TermAwareLoop(self)

    def pod_ahead(self, pod: dict[str, Any]) -> dict[str, Any]:
        """``pod`` with the requests the VPA will give it (a pending pod: the webhook's; a
        scheduled one: the larger of its own and the webhook's), or ``pod`` itself."""
        admission = self.admission
        if admission is None:
            return pod
        scheduled = bool(spec_of(pod).get("nodeName"))
        annotations = Meta(pod).raw.get("annotations") or {}
        if scheduled and OBSERVED_CONTAINERS_ANNOTATION not in annotations:
            return pod  # never admitted with a VPA: no VPA update coming (and no cost)
        try:
            decision = admission.decide(pod, may_wait=False)
        except PodAdmissionError:
            return pod
        if not decision.patches:
            return pod
        return dict(pod_with_admitted_resources(pod, decision.patches, only_raise=scheduled))

    def new_loop(self) -> AutoscalerLoop:
        """A loop with no memory (the informers are the shared cache's); its random choices (the
        ``random`` expander, ties) come from the client's generator: the scenario seed in a
        simulated run."""
        return AutoscalerLoop(
            client=self.runtime.leader_client,
            informers=self.runtime.cache.informers,
            settings=self.settings,
            metrics=self.metrics,
            events=self.events,
            rng=random.Random(self.runtime.client.rng.random()),
            disruptions=self.runtime.cache.disruptions,
            pods_ahead=self.pod_ahead if self.admission is not None else None,
        )

    def loops(self) -> Sequence[LoopSpec]:
        return [LoopSpec(loop=self._gated, interval=self.settings.scan_interval)]

    async def unserved_apis(self) -> Sequence[str]:
        """The Cluster API, when the server does not serve it (its version is discovered, so
        its collections are declared later than every other component's): the autoscaler is
        then not started, and the rest of kubescale runs."""
        provider = self.loop.provider
        if not isinstance(provider, ClusterApiProvider):
            return ()
        return await provider.unserved_apis()

    async def start(self) -> None:
        settings = self.settings
        log.info(
            "cluster autoscaler started",
            extra={
                "fields": {
                    "scan_interval": settings.scan_interval,
                    "expander": ",".join(settings.expander),
                    "cloud_provider": "clusterapi",
                    "consolidation": settings.consolidation.policy,
                }
            },
        )

    async def stop(self) -> None:
        await self.events.close()


SPEC: Final = ComponentSpec[AutoscalerSettings](
    name="cluster-autoscaler",
    title="the cluster autoscaler",
    add_arguments=add_autoscaler_arguments,
    settings=lambda args, environ: with_capi_environment(
        autoscaler_settings_from_args(args), environ
    ),
    build=AutoscalerComponent,
)
"""The registry entry (:mod:`kubescale.components`)."""
