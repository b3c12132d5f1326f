"""An in-process API server with a Deployment's pods, their metrics and HPAs, and the HPA loop
on the real client (the recommender tests' ``cluster`` fixture underneath)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from kubescale.base.clock import Clock
from kubescale.controllers.hpa.hpa_config import CONTROLLER_ANNOTATION, HpaSettings
from kubescale.controllers.hpa.hpa_loop import HpaLoop
from kubescale.controllers.hpa.hpa_metrics import HpaMetrics
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import CORE_EVENTS, DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS
from kubescale.kube.shared_cache import SharedCache
from kubescale.prometheus.query_api import PrometheusQueryClient
from tests.controllers.vpa.recommender.test_recommender_loop import NAMESPACE, Cluster

__all__ = ["NAMESPACE", "Hpas"]


def fmt(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Hpas:
    """Builders and the loop on one :class:`Cluster`."""

    cluster: Cluster
    loops: list[tuple[HpaLoop, EventRecorder]] = field(default_factory=list)

    @property
    def now(self) -> datetime:
        return self.cluster.now

    def deployment(
        self, name: str, *, replicas: int, labels: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        labels = dict(labels or {"app": name})
        return self.cluster.api.store.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "app", "image": "app"}]},
                    },
                },
            }
        )

    def replicas(self, name: str) -> int:
        return int(self.cluster.api.store.get(DEPLOYMENTS, name, NAMESPACE)["spec"]["replicas"])

    def pod(
        self,
        name: str,
        *,
        labels: Mapping[str, str],
        cpu: str = "1",
        usage: str | None = None,
        started: datetime | None = None,
    ) -> dict[str, Any]:
        """A Running, Ready pod requesting ``cpu``, started an hour ago; ``usage`` sets its
        PodMetrics now."""
        store = self.cluster.api.store
        created = store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels)},
                "spec": {
                    "nodeName": "node-1",
                    "containers": [
                        {"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu}}}
                    ],
                },
            }
        )
        start = fmt(started or self.now - timedelta(hours=1))
        status = {
            "phase": "Running",
            "startTime": start,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": start}],
        }
        if usage is not None:
            self.usage(name, usage, labels=labels)
        return store.update_status({**created, "status": status})

    def usage(self, pod: str, cpu: str, *, labels: Mapping[str, str]) -> None:
        self.cluster.api.metrics.set_pod_metrics(
            namespace=NAMESPACE,
            name=pod,
            containers={"app": {"cpu": cpu}},
            labels=labels,
            timestamp=self.now,
        )

    def hpa(
        self,
        name: str,
        *,
        target: str,
        max_replicas: int = 10,
        min_replicas: int | None = None,
        metrics: list[dict[str, Any]] | None = None,
        behavior: dict[str, Any] | None = None,
        annotations: Mapping[str, str] | None = None,
        kind: str = "Deployment",
        api_version: str = "apps/v1",
        handled: bool = True,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": target},
            "maxReplicas": max_replicas,
            "metrics": metrics
            or [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 50},
                    },
                }
            ],
        }
        if min_replicas is not None:
            spec["minReplicas"] = min_replicas
        if behavior is not None:
            spec["behavior"] = behavior
        notes = dict(annotations or {})
        if handled:
            notes[CONTROLLER_ANNOTATION] = "kubescale"
        return self.cluster.api.store.create(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name, "namespace": NAMESPACE, "annotations": notes},
                "spec": spec,
            }
        )

    @contextlib.contextmanager
    def past_validation(self) -> Iterator[None]:
        """HPAs created meanwhile skip kube-apiserver's validation: objects it refuses today
        but a cluster may hold (stored before the rule, or written to etcd directly)."""
        validators = self.cluster.api.store.validators
        validate = validators.pop(HORIZONTAL_POD_AUTOSCALERS.key)
        try:
            yield
        finally:
            validators[HORIZONTAL_POD_AUTOSCALERS.key] = validate

    def get_hpa(self, name: str) -> dict[str, Any]:
        return self.cluster.api.store.get(HORIZONTAL_POD_AUTOSCALERS, name, NAMESPACE)

    def conditions(self, name: str) -> dict[str, tuple[str, str, str]]:
        return {
            c["type"]: (c["status"], c["reason"], c["message"])
            for c in (self.get_hpa(name).get("status") or {}).get("conditions") or []
        }

    async def events(self, name: str) -> list[tuple[str, str, str]]:
        for _, recorder in self.loops:
            await recorder.flush()
        return [
            (e["type"], e["reason"], e["message"])
            for e in self.cluster.api.store.list(CORE_EVENTS, namespace=NAMESPACE)
            if e["involvedObject"]["name"] == name
        ]

    async def loop(
        self,
        settings: HpaSettings | None = None,
        *,
        registry: CollectorRegistry | None = None,
        prometheus: PrometheusQueryClient | None = None,
        clock: Clock | None = None,
    ) -> HpaLoop:
        client = self.cluster.client
        cache = SharedCache(client=client, clock=client.clock, rng=random.Random(4))
        self.cluster.loops.append(cache)
        events = EventRecorder(client=client, component="horizontal-pod-autoscaler")
        loop = HpaLoop(
            client=client,
            cache=cache,
            settings=settings or HpaSettings(),
            metrics=HpaMetrics(registry if registry is not None else CollectorRegistry()),
            events=events,
            prometheus=prometheus,
            clock=clock,
        )
        self.loops.append((loop, events))
        cache.start()
        assert await asyncio.wait_for(cache.wait_synced(), timeout=10)
        return loop

    async def run(self, loop: HpaLoop) -> None:
        """Settle the loop's informers on the store, then one pass at the cluster's now."""
        await self.settle(loop)
        await loop.run_once(self.now)

    async def settle(self, loop: HpaLoop) -> None:
        """Until the loop's informers have seen every change to the store."""
        target = str(self.cluster.api.store.resource_version)
        for _ in range(100):
            self.cluster.api.bookmark_watches()
            if await loop.wait_for_resource_version(target, within=0.1):
                break
        else:
            raise AssertionError("the HPA loop's informers did not catch up")

    async def close(self) -> None:
        for loop, recorder in self.loops:
            await loop.close()
            await recorder.close()
