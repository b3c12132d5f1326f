"""The Deployment controller (``pkg/controller/deployment``), one sync per call.

``syncDeployment``: the ReplicaSets the Deployment controls are split into the *new* one (its
template equals the Deployment's once ``pod-template-hash`` is ignored; the oldest such) and the
old ones. Then, as upstream:

* being deleted → status only; paused, or a *scaling event* (some active ReplicaSet's
  ``deployment.kubernetes.io/desired-replicas`` differs from ``spec.replicas``) → ``sync``:
  proportional scaling of the active ReplicaSets (``scale``, ``GetReplicaSetProportion`` with the
  ``max-replicas`` annotations), then status;
* ``RollingUpdate`` (``rolloutRolling``): create the new ReplicaSet if missing
  (``<name>-<hash>``, template and selector with the ``pod-template-hash`` label, revision
  = highest old revision + 1), scale it up within ``replicas + maxSurge`` (``NewRSNewReplicas``),
  scale old ones down keeping ``replicas - maxUnavailable`` available (``reconcileOldReplicaSets``:
  unhealthy replicas first, then oldest first); ``maxSurge``/``maxUnavailable`` default to 25%
  (surge rounded up, unavailability down; both 0 → unavailability 1);
* ``Recreate``: scale every old ReplicaSet to 0, wait until no old pod is left running, then
  create/scale the new one to ``replicas``;
* when complete, old ReplicaSets with no replicas beyond ``revisionHistoryLimit`` (10) are
  deleted; the status (``calculateStatus``, ``syncRolloutStatus``) gets replicas,
  updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas, observedGeneration and
  the Available / Progressing conditions with upstream's reasons and messages
  (``progressDeadlineSeconds``, default 600, times a rollout out).

Each call does one step of this; the controller loop calls it again whenever one of the
Deployment's ReplicaSets or pods changes, so a rollout proceeds as pods become available.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from kubescale.kube.resources import DEPLOYMENTS, REPLICA_SETS

from .controller_context import ControllerContext
from .deployment_status import (
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    POD_TEMPLATE_HASH,
    REVISION,
    annotation_int,
    deployment_complete,
    deployment_status,
    max_surge,
    max_unavailable,
    proportional_sizes,
    replicas_of,
)
from .workload_pods import equal_ignoring_label, is_terminal, owner_reference, template_hash

__all__ = ["sync_deployment"]

_NOT_COPIED: Final = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        "deployment.kubernetes.io/revision-history",
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    }
)
"""``skipCopyAnnotation``: Deployment annotations that are not copied to its ReplicaSets."""
DEFAULT_REVISION_HISTORY_LIMIT: Final = 10


def _available(rs: dict[str, Any]) -> int:
    return int((rs.get("status") or {}).get("availableReplicas") or 0)


def _by_creation(rses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ReplicaSetsByCreationTimestamp``: oldest first, then by name."""
    return sorted(rses, key=lambda r: (r["metadata"].get("creationTimestamp", ""), _name(r)))


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


class _Sync:
    """One sync of one Deployment; ``rses`` is kept current as this sync writes them."""

    def __init__(self, ctx: ControllerContext, deployment: dict[str, Any]) -> None:
        self.ctx = ctx
        self.d = deployment
        self.replicas = replicas_of(deployment)
        uid = str(deployment["metadata"]["uid"])
        self.rses = _by_creation(list(ctx.index.children(uid, REPLICA_SETS.plural)))
        self.new_rs_created = False
        template = (deployment.get("spec") or {}).get("template") or {}
        matching = [
            rs
            for rs in self.rses
            if equal_ignoring_label(
                (rs.get("spec") or {}).get("template") or {}, template, label=POD_TEMPLATE_HASH
            )
        ]
        self.new_name: str | None = matching[0]["metadata"]["name"] if matching else None

    @property
    def new_rs(self) -> dict[str, Any] | None:
        return next((r for r in self.rses if r["metadata"]["name"] == self.new_name), None)

    @property
    def old_rses(self) -> list[dict[str, Any]]:
        return [r for r in self.rses if r["metadata"]["name"] != self.new_name]

    def _replace(self, rs: dict[str, Any]) -> None:
        name = rs["metadata"]["name"]
        self.rses = [rs if r["metadata"]["name"] == name else r for r in self.rses]

    # -------------------------------------------------------------------------- scaling

    def scale(self, rs: dict[str, Any], size: int) -> bool:
        """``scaleReplicaSet``: set replicas and the desired/max-replicas annotations."""
        size = max(0, size)
        annotations = dict(rs["metadata"].get("annotations") or {})
        wanted = {
            DESIRED_REPLICAS: str(self.replicas),
            MAX_REPLICAS: str(self.replicas + max_surge(self.d)),
        }
        if replicas_of(rs) == size and all(annotations.get(k) == v for k, v in wanted.items()):
            return False
        annotations.update(wanted)
        body = {
            **rs,
            "metadata": {**rs["metadata"], "annotations": annotations},
            "spec": {**(rs.get("spec") or {}), "replicas": size},
        }
        self._replace(self.ctx.update(body))
        return True

    def is_scaling_event(self) -> bool:
        for rs in self.rses:
            if replicas_of(rs) <= 0:
                continue
            desired = annotation_int(rs, DESIRED_REPLICAS)
            if desired is not None and desired != self.replicas:
                return True
        return False

    def proportional_scale(self) -> None:
        """``DeploymentController.scale``."""
        new_rs = self.new_rs
        active = [r for r in self.rses if replicas_of(r) > 0]
        if len(active) <= 1:
            # FindActiveOrLatest: the one active ReplicaSet, else the new one, else the newest.
            target = active[0] if active else (new_rs or (self.rses[-1] if self.rses else None))
            if target is not None and replicas_of(target) != self.replicas:
                self.scale(target, self.replicas)
            return
        if new_rs is not None and (
            annotation_int(new_rs, DESIRED_REPLICAS) == self.replicas
            and replicas_of(new_rs) == self.replicas
            and _available(new_rs) == self.replicas
        ):
            for rs in active:
                if rs is not new_rs:
                    self.scale(rs, 0)
            return
        if not _rolling(self.d):
            return
        for rs, size in proportional_sizes(self.d, active):
            self.scale(rs, size)

    # ----------------------------------------------------------------------- new and old

    async def ensure_new_rs(self) -> None:
        """``getNewReplicaSet(createIfNotExisted=true)``."""
        max_old = max((annotation_int(r, REVISION) or 0 for r in self.old_rses), default=0)
        revision = str(max_old + 1)
        new_rs = self.new_rs
        if new_rs is not None:
            annotations = dict(new_rs["metadata"].get("annotations") or {})
            copied = _copied_annotations(self.d)
            current = annotation_int(new_rs, REVISION) or 0
            wanted = {**annotations, **copied}
            if current < max_old + 1:
                wanted[REVISION] = revision
            min_ready = (self.d.get("spec") or {}).get("minReadySeconds")
            spec = new_rs.get("spec") or {}
            if wanted != annotations or spec.get("minReadySeconds") != min_ready:
                new_spec = {k: v for k, v in spec.items() if k != "minReadySeconds"}
                if min_ready is not None:
                    new_spec["minReadySeconds"] = min_ready
                body = {
                    **new_rs,
                    "metadata": {**new_rs["metadata"], "annotations": wanted},
                    "spec": new_spec,
                }
                self._replace(self.ctx.update(body))
            return
        spec = self.d.get("spec") or {}
        status = self.d.get("status") or {}
        collisions = status.get("collisionCount")
        pod_hash = template_hash(spec.get("template") or {}, collisions)
        template = copy.deepcopy(spec.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = pod_hash
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = pod_hash
        if _rolling(self.d):
            surge = max_surge(self.d)
            current = sum(replicas_of(r) for r in self.rses)
            size = max(0, min(self.replicas + surge - current, self.replicas))
        else:
            size = self.replicas
        meta = self.d["metadata"]
        rs_spec: dict[str, Any] = {"replicas": size, "selector": selector, "template": template}
        if spec.get("minReadySeconds") is not None:
            rs_spec["minReadySeconds"] = spec["minReadySeconds"]
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": meta["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {
                    **_copied_annotations(self.d),
                    REVISION: revision,
                    DESIRED_REPLICAS: str(self.replicas),
                    MAX_REPLICAS: str(self.replicas + max_surge(self.d)),
                },
                "ownerReferences": [owner_reference(self.d)],
            },
            "spec": rs_spec,
        }
        if self.ctx.index.get(REPLICA_SETS.plural, meta["namespace"], _name(body)) is not None:
            # A hash collision (upstream: AlreadyExists with another template): count it so the
            # next sync hashes differently.
            self.d = self.ctx.update_status(
                self.d, {**status, "collisionCount": int(collisions or 0) + 1}
            )
            return
        created = await self.ctx.create(body)
        self.rses.append(created)
        self.new_name = created["metadata"]["name"]
        self.new_rs_created = True

    def reconcile_new(self) -> bool:
        new_rs = self.new_rs
        if new_rs is None or replicas_of(new_rs) == self.replicas:
            return False
        if replicas_of(new_rs) > self.replicas:
            return self.scale(new_rs, self.replicas)
        current = sum(replicas_of(r) for r in self.rses)
        room = self.replicas + max_surge(self.d) - current
        if room <= 0:
            return False
        return self.scale(
            new_rs, replicas_of(new_rs) + min(room, self.replicas - replicas_of(new_rs))
        )

    def reconcile_old(self) -> bool:
        old = _by_creation(self.old_rses)
        if sum(replicas_of(r) for r in old) == 0:
            return False
        new_rs = self.new_rs
        all_pods = sum(replicas_of(r) for r in self.rses)
        min_available = self.replicas - max_unavailable(self.d)
        new_unavailable = (replicas_of(new_rs) - _available(new_rs)) if new_rs is not None else 0
        budget = all_pods - min_available - new_unavailable
        if budget <= 0:
            return False
        scaled = False
        cleaned = 0
        for rs in old:  # cleanupUnhealthyReplicas
            if cleaned >= budget:
                break
            unhealthy = replicas_of(rs) - _available(rs)
            if replicas_of(rs) == 0 or unhealthy <= 0:
                continue
            count = min(budget - cleaned, unhealthy)
            scaled |= self.scale(rs, replicas_of(rs) - count)
            cleaned += count
        available = sum(_available(r) for r in self.rses)  # scaleDownOldReplicaSetsForRollingUpdate
        if available > min_available:
            total = available - min_available
            done = 0
            for rs in _by_creation(self.old_rses):
                if done >= total:
                    break
                if replicas_of(rs) == 0:
                    continue
                count = min(replicas_of(rs), total - done)
                scaled |= self.scale(rs, replicas_of(rs) - count)
                done += count
        return scaled

    def old_pods_running(self) -> bool:
        if any(int((r.get("status") or {}).get("replicas") or 0) > 0 for r in self.old_rses):
            return True
        for rs in self.old_rses:
            for pod in self.ctx.index.children(str(rs["metadata"]["uid"]), "pods"):
                if not is_terminal(pod):
                    return True
        return False

    def cleanup(self) -> None:
        """``cleanupDeployment``: drop old, empty ReplicaSets beyond revisionHistoryLimit."""
        limit = (self.d.get("spec") or {}).get("revisionHistoryLimit")
        limit = DEFAULT_REVISION_HISTORY_LIMIT if limit is None else int(limit)
        alive = [r for r in self.old_rses if not r["metadata"].get("deletionTimestamp")]
        excess = len(alive) - limit
        if excess <= 0:
            return
        alive.sort(key=lambda r: (annotation_int(r, REVISION) or 0, r["metadata"]["name"]))
        for rs in alive[:excess]:
            status = rs.get("status") or {}
            if (
                int(status.get("replicas") or 0) != 0
                or replicas_of(rs) != 0
                or int(rs["metadata"].get("generation") or 1)
                > int(status.get("observedGeneration") or 0)
            ):
                continue
            self.ctx.delete(REPLICA_SETS, rs)

    def sync_revision(self) -> None:
        """``SetDeploymentRevision``: the Deployment carries its new ReplicaSet's revision."""
        new_rs = self.new_rs
        revision = (new_rs["metadata"].get("annotations") or {}).get(REVISION) if new_rs else None
        annotations = self.d["metadata"].get("annotations") or {}
        if revision is None or annotations.get(REVISION) == revision:
            return
        body = {
            **self.d,
            "metadata": {**self.d["metadata"], "annotations": {**annotations, REVISION: revision}},
        }
        self.d = self.ctx.update(body)

    def write_status(self) -> None:
        status, wake = deployment_status(
            self.d,
            rses=self.rses,
            new_rs=self.new_rs,
            now=self.ctx.now,
            new_rs_created=self.new_rs_created,
        )
        meta = self.d["metadata"]
        key = (DEPLOYMENTS.plural, meta["namespace"], meta["name"])
        if wake is not None:
            self.ctx.wake_at(key, wake)
        current = self.ctx.index.get(*key)
        if current is not None:
            self.ctx.update_status(current, status)


def _rolling(d: dict[str, Any]) -> bool:
    strategy = (d.get("spec") or {}).get("strategy") or {}
    return bool(strategy.get("type", "RollingUpdate") != "Recreate")


def _copied_annotations(d: dict[str, Any]) -> dict[str, str]:
    annotations = d["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if k not in _NOT_COPIED}


async def sync_deployment(ctx: ControllerContext, deployment: dict[str, Any]) -> None:
    sync = _Sync(ctx, deployment)
    spec = deployment.get("spec") or {}
    if deployment["metadata"].get("deletionTimestamp"):
        sync.write_status()
        return
    if spec.get("paused") or sync.is_scaling_event():
        sync.proportional_scale()
        if spec.get("paused"):
            sync.cleanup()
        sync.write_status()
        return
    if _rolling(deployment):
        await sync.ensure_new_rs()
        sync.sync_revision()
        progressed = sync.reconcile_new() or sync.reconcile_old()
        if not progressed and deployment_complete(sync.d, sync.d.get("status") or {}):
            sync.cleanup()
    else:
        scaled = False
        for rs in sync.old_rses:
            if replicas_of(rs) > 0:
                scaled |= sync.scale(rs, 0)
        if not scaled and not sync.old_pods_running():
            await sync.ensure_new_rs()
            sync.sync_revision()
            new_rs = sync.new_rs
            if new_rs is not None:
                sync.scale(new_rs, sync.replicas)
            if deployment_complete(sync.d, sync.d.get("status") or {}):
                sync.cleanup()
    sync.write_status()
