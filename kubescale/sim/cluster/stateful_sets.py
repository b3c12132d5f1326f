"""The StatefulSet controller (``pkg/controller/statefulset/stateful_set_control.go``), one sync
per call.

Pods are named ``<set>-<ordinal>`` for ordinals ``start .. start+replicas-1`` (``spec.ordinals``,
default start 0) and carry ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index``
and ``controller-revision-hash`` labels, ``hostname`` = the pod's name and ``subdomain`` =
``spec.serviceName``; the ordinal is also the pod's simulator index. Each
``volumeClaimTemplates`` entry becomes a PersistentVolumeClaim ``<claim>-<pod>`` (created before
the pod, kept when the pod goes: the default Retain policy) mounted as the volume of that name.

``OrderedReady`` (the default) is upstream's monotonic mode: pods are created in ordinal order,
each only once every lower one is Running and Ready; a terminating or unhealthy pod blocks; a
Failed or Succeeded pod is deleted and recreated; scaling down deletes the highest ordinal first,
one at a time, and only when every other pod is healthy. ``Parallel`` does all of that without
waiting. ``RollingUpdate`` (default; ``partition`` honoured) replaces pods whose revision is not
the template's current one from the highest ordinal down, one at a time, each once the rest are
healthy; ``OnDelete`` leaves them. Status: replicas, readyReplicas, availableReplicas,
currentReplicas, updatedReplicas, currentRevision, updateRevision, observedGeneration.

Difference: there are no ControllerRevision objects, so a pod created below the partition gets
the current template, not the previous revision's.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kubescale.kube.resources import PERSISTENT_VOLUME_CLAIMS, STATEFUL_SETS

from .controller_context import ControllerContext
from .workload_pods import (
    available_since,
    is_ready,
    is_terminal,
    is_terminating,
    pod_from_template,
    template_hash,
    workload_of,
)

__all__ = ["sync_stateful_set"]

POD_NAME_LABEL: Final = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"
REVISION_LABEL: Final = "controller-revision-hash"


def _ordinal(set_name: str, pod: dict[str, Any]) -> int | None:
    name = str(pod["metadata"]["name"])
    prefix = f"{set_name}-"
    if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
        return None
    return int(name[len(prefix) :])


def _running_and_ready(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod)


def _revision(pod: dict[str, Any]) -> str | None:
    value = (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)
    return value if isinstance(value, str) else None


class _SetSync:
    def __init__(self, ctx: ControllerContext, sts: dict[str, Any]) -> None:
        self.ctx = ctx
        self.sts = sts
        self.meta = sts["metadata"]
        self.spec = sts.get("spec") or {}
        self.name = str(self.meta["name"])
        self.template = self.spec.get("template") or {}
        self.update_revision = f"{self.name}-{template_hash(self.template)}"
        self.monotonic = self.spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        self.start = int((self.spec.get("ordinals") or {}).get("start") or 0)
        self.replicas = int(self.spec.get("replicas", 1))

    def pods(self) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        for pod in self.ctx.index.children(str(self.meta["uid"]), "pods"):
            ordinal = _ordinal(self.name, pod)
            if ordinal is not None:
                found[ordinal] = pod
        return found

    async def create_pod(self, ordinal: int) -> None:
        pod_name = f"{self.name}-{ordinal}"
        labels = {
            POD_NAME_LABEL: pod_name,
            POD_INDEX_LABEL: str(ordinal),
            REVISION_LABEL: self.update_revision,
        }
        pod = pod_from_template(
            template=self.template,
            owner=self.sts,
            workload=workload_of(self.template, self.name),
            index=ordinal,
            name=pod_name,
            labels=labels,
        )
        pod["spec"]["hostname"] = pod_name
        if self.spec.get("serviceName"):
            pod["spec"]["subdomain"] = self.spec["serviceName"]
        await self._claims(pod)
        await self.ctx.create(pod)

    async def _claims(self, pod: dict[str, Any]) -> None:
        """``createPersistentVolumeClaims`` + ``updateStorage``."""
        namespace = self.meta["namespace"]
        volumes = list(pod["spec"].get("volumes") or [])
        for claim in self.spec.get("volumeClaimTemplates") or []:
            claim_name = str((claim.get("metadata") or {}).get("name"))
            full_name = f"{claim_name}-{pod['metadata']['name']}"
            if self.ctx.api.store.peek(PERSISTENT_VOLUME_CLAIMS, full_name, namespace) is None:
                claim_labels = {
                    **((claim.get("metadata") or {}).get("labels") or {}),
                    **((self.spec.get("selector") or {}).get("matchLabels") or {}),
                }
                await self.ctx.create(
                    {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {
                            "name": full_name,
                            "namespace": namespace,
                            "labels": claim_labels,
                        },
                        "spec": copy.deepcopy(claim.get("spec") or {}),
                    }
                )
            volumes = [v for v in volumes if v.get("name") != claim_name]
            volumes.append({"name": claim_name, "persistentVolumeClaim": {"claimName": full_name}})
        if volumes:
            pod["spec"]["volumes"] = volumes

    async def manage(self) -> None:
        """``updateStatefulSet``: create, replace, scale down, roll — one pod at a time when
        monotonic."""
        pods = self.pods()
        wanted = range(self.start, self.start + self.replicas)
        for ordinal in wanted:
            pod = pods.get(ordinal)
            if pod is not None and is_terminal(pod) and not is_terminating(pod):
                self.ctx.delete_pod(pod)
                if self.monotonic:
                    return
                continue
            if pod is None:
                await self.create_pod(ordinal)
                if self.monotonic:
                    return
                continue
            if self.monotonic and (is_terminating(pod) or not _running_and_ready(pod)):
                return
        condemned = sorted((o for o in pods if o not in wanted), reverse=True)
        unhealthy = [
            o for o in sorted(pods) if not _running_and_ready(pods[o]) or is_terminating(pods[o])
        ]
        for ordinal in condemned:
            pod = pods[ordinal]
            if is_terminating(pod):
                if self.monotonic:
                    return
                continue
            # the first unhealthy pod may go; any other unhealthy one blocks (monotonic)
            if self.monotonic and not _running_and_ready(pod) and unhealthy[:1] != [ordinal]:
                return
            self.ctx.delete_pod(pod)
            if self.monotonic:
                return
        strategy = self.spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        for ordinal in sorted((o for o in pods if o in wanted), reverse=True):
            if ordinal < self.start + partition:
                break
            pod = pods[ordinal]
            if _revision(pod) != self.update_revision and not is_terminating(pod):
                if all(_running_and_ready(p) for o, p in pods.items() if o != ordinal):
                    self.ctx.delete_pod(pod)
                return
            if not _running_and_ready(pod):
                return

    def status(self) -> dict[str, Any]:
        pods = self.pods()
        old = self.sts.get("status") or {}
        min_ready = int(self.spec.get("minReadySeconds") or 0)
        current_revision = old.get("currentRevision") or self.update_revision
        counts = dict.fromkeys(("replicas", "ready", "available", "current", "updated"), 0)
        for pod in pods.values():
            counts["replicas"] += 1
            if _running_and_ready(pod):
                counts["ready"] += 1
                since = available_since(pod, min_ready)
                if since is not None and (min_ready == 0 or since <= self.ctx.now):
                    counts["available"] += 1
                elif since is not None:
                    key = (STATEFUL_SETS.plural, self.meta["namespace"], self.name)
                    self.ctx.wake_at(key, since)
            if not is_terminating(pod):
                revision = _revision(pod)
                counts["current"] += revision == current_revision
                counts["updated"] += revision == self.update_revision
        if (
            counts["updated"] == self.replicas
            and counts["ready"] >= self.replicas
            and current_revision != self.update_revision
        ):
            # completeRollingUpdate: every replica runs the update revision.
            current_revision = self.update_revision
            counts["current"] = counts["updated"]
        status = dict(old)
        status.update(
            {
                "observedGeneration": int(self.meta.get("generation") or 1),
                "replicas": counts["replicas"],
                "readyReplicas": counts["ready"],
                "availableReplicas": counts["available"],
                "currentReplicas": counts["current"],
                "updatedReplicas": counts["updated"],
                "currentRevision": current_revision,
                "updateRevision": self.update_revision,
            }
        )
        return status


async def sync_stateful_set(ctx: ControllerContext, sts: dict[str, Any]) -> None:
    sync = _SetSync(ctx, sts)
    if not sts["metadata"].get("deletionTimestamp"):
        await sync.manage()
    current = ctx.index.get(STATEFUL_SETS.plural, sts["metadata"]["namespace"], sync.name)
    if current is not None:
        sync.sts = current
        ctx.update_status(current, sync.status())
