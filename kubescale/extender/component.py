"""The scheduler extender as a component (:mod:`kubescale.runtime.component`): routes only.

* **Caches** (declared when built, by :func:`~.informer_feed.feed`): Nodes, Pods, Namespaces,
  PodDisruptionBudgets, PersistentVolumeClaims, PriorityClasses — the process's shared
  informers, folded into a :class:`~.cluster_cache.ClusterCache` event by event. A request is
  answered from it alone, no API call.
* **Routes** ``POST <--extender-url-prefix>/filter`` and ``/prioritize`` on the TLS server,
  every replica (:class:`~.extender_routes.SchedulerExtender`); its KubeSchedulerConfiguration
  entry (:meth:`ExtenderComponent.scheduler_extenders`): ``filterVerb`` ``filter``,
  ``prioritizeVerb`` ``prioritize``, ``weight`` 1, ``nodeCacheCapable``, ``ignorable``,
  ``httpTimeout`` 5s — ``manifests/examples/kube-scheduler-config.yaml`` for a cluster; a
  simulated run points its scheduler at it.
* **The policy** it enforces is the descheduler's (``--policy-config-file`` /
  ``--descheduler-policy``); **shared with the descheduler** of the process
  (:mod:`kubescale.coordination.descheduling_board`): its eviction memory records
  the descheduler's evictions, its cache receives the descheduler's usage readings.
* **Metrics** ``kubescale_extender_*`` (:mod:`.extender_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiohttp import web

from kubescale.base.logs import component_logger
from kubescale.certs.client_identity import ClientCertificateCheck
from kubescale.coordination.brain import brain_of
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.coordination.placement_rules import PlacementRules
from kubescale.runtime.component import BaseComponent, Runtime

from .cluster_cache import ClusterCache
from .extender_config import (
    ExtenderConfigError,
    ExtenderSettings,
)
from .extender_metrics import ExtenderMetrics
from .extender_routes import SchedulerExtender
from .informer_feed import feed
from .offload import DecisionThread, DeferredMemory, DeferredUsage, DeferredWrites

__all__ = ["HTTP_TIMEOUT", "ExtenderComponent"]

log = component_logger("extender")

HTTP_TIMEOUT: Final = "5s"
"""kube-scheduler's default ``httpTimeout``, written out in the entry."""


class ExtenderComponent(BaseComponent):
    """The scheduler extender (module docstring)."""

    name = "scheduler-extender"

    def __init__(self, settings: ExtenderSettings, runtime: Runtime) -> None:
        policy = settings.policy
        if policy is None:
            raise ExtenderConfigError(
                "--policy-config-file or --descheduler-policy: the scheduler extender enforces "
                "a descheduler policy; none given"
            )
        self.settings = settings
        self.policy = policy
        brain = brain_of(runtime.cache)
        board = brain.board
        # Decisions run on a worker thread; every write of the cache and the memory from the
        # serving loop waits (queued, not blocking) while one reads (module .offload).
        writes = DeferredWrites()
        self.decisions = DecisionThread(writes)
        self.memory: EvictionMemory | None = None
        if settings.eviction_memory.total_seconds() > 0:
            self.memory = DeferredMemory(
                duration=settings.eviction_memory,
                max_entries=settings.eviction_memory_entries,
                writes=writes,
            )
        board.memory = self.memory
        self.cache = ClusterCache(policy=policy, now=runtime.clock.now)
        board.subscribe(DeferredUsage(self.cache, writes))
        readiness = feed(self.cache, runtime.cache.informers, defer=writes.wrap)
        self.metrics = ExtenderMetrics(runtime.registry)
        client_ca = runtime.certificates.extender_client_ca_file
        # A bad file is a CertificateError naming it, at start (serve's TLS load reads it first).
        client_cert = None if client_ca is None else ClientCertificateCheck(client_ca, logger=log)
        self.extender = SchedulerExtender(
            cache=self.cache,
            rules=PlacementRules.from_policy(policy),
            veto=brain.placement_veto,
            settings=settings,
            clock=runtime.clock,
            metrics=self.metrics,
            readiness=readiness,
            client_cert=client_cert,
            decisions=self.decisions,
        )

    def mount(self, app: web.Application) -> None:
        self.extender.mount(app)

    def scheduler_extenders(self) -> Sequence[Mapping[str, Any]]:
        return [
            {
                "urlPrefix": self.settings.url_prefix,
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 1,
                "nodeCacheCapable": True,
                "ignorable": True,
                "httpTimeout": HTTP_TIMEOUT,
            }
        ]

    async def start(self) -> None:
        settings = self.settings
        log.info(
            "scheduler extender serving",
            extra={
                "fields": {
                    "filter": settings.route("filter"),
                    "prioritize": settings.route("prioritize"),
                    "policy": settings.policy_origin,
                    "eviction_memory": settings.eviction_memory.total_seconds(),
                    "client_ca": str(self.extender.client_cert.ca_file)
                    if self.extender.client_cert is not None
                    else None,
                }
            },
        )

    async def stop(self) -> None:
        self.decisions.close()
