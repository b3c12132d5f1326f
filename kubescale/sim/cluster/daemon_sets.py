"""The DaemonSet controller (``pkg/controller/daemon``), one sync per call.

Which nodes get a pod (``NodeShouldRunDaemonPod``): the template's required node affinity and
``nodeSelector`` must match the node, and no NoSchedule/NoExecute taint may be left untolerated
— counting the tolerations the controller adds to every daemon pod
(``AddOrUpdateDaemonPodTolerations``: not-ready and unreachable NoExecute; disk-, memory- and
pid-pressure and unschedulable NoSchedule; network-unavailable NoSchedule for host-network
pods), so a cordoned or not-ready node still gets its pod. A pod already there may stay on a
node with a new untolerated NoSchedule taint; an untolerated NoExecute taint or a node that no
longer matches removes it.

Pods are created unscheduled, pinned by a required node affinity ``matchFields metadata.name In
[node]`` that replaces the template's required terms (``ReplaceDaemonSetPodNodeNameNodeAffinity``);
the scheduler binds them. A pod belongs to the node it is bound to, or else to the node its
affinity names. Per node: none (a terminating pod still counts) → create; more than one →
keep the oldest; Failed → delete (recreated next sync); on a node that should not run one, or a
node that is gone → delete.

``RollingUpdate`` (default, ``maxUnavailable`` 1, no surge): pods of an older template hash are
deleted — unavailable ones at once, available ones while fewer than ``maxUnavailable`` nodes are
unavailable — and recreated; ``OnDelete`` leaves them. Status: desired/current/updated number
scheduled, misscheduled, ready, available, unavailable, observedGeneration.
"""

from __future__ import annotations

import copy
from typing import Any, Final, cast

from kubescale.kube.resources import DAEMON_SETS
from kubescale.objects.pod import Pod
from kubescale.scheduling.filters import NodeAffinity, first_untolerated_taint

from .controller_context import ControllerContext
from .workload_pods import (
    available_since,
    is_ready,
    is_terminal,
    is_terminating,
    pod_from_template,
    scaled_value,
    template_hash,
    workload_of,
)

__all__ = ["DAEMON_TOLERATIONS", "sync_daemon_set", "target_node"]

REVISION_LABEL: Final = "controller-revision-hash"
TEMPLATE_GENERATION_LABEL: Final = "pod-template-generation"
DAEMON_TOLERATIONS: Final = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
_HOST_NETWORK_TOLERATION: Final = ("node.kubernetes.io/network-unavailable", "NoSchedule")


def _with_daemon_tolerations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    tolerations = list(spec.get("tolerations") or [])
    wanted = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(_HOST_NETWORK_TOLERATION)
    for key, effect in wanted:
        toleration = {"key": key, "operator": "Exists", "effect": effect}
        if toleration not in tolerations:
            tolerations.append(toleration)
    return tolerations


def _pinned_affinity(spec: dict[str, Any], node: str) -> dict[str, Any]:
    affinity = copy.deepcopy(spec.get("affinity") or {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    return affinity


def target_node(pod: dict[str, Any]) -> str | None:
    """``util.GetTargetNodeName``: the bound node, else the one the affinity pins."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and values:
                return str(values[0])
    return None


def _placement(template_spec: dict[str, Any], node: dict[str, Any]) -> tuple[bool, bool]:
    """(should run, should continue running) on ``node``."""
    # a pod of the template (``NewPod``): the store's untyped JSON read as the typed Pod it is
    # by the shared node affinity (a TypedDict is the same dict at run time)
    probe = cast(Pod, {"spec": template_spec})
    name = str(node["metadata"]["name"])
    labels = node["metadata"].get("labels") or {}
    if not NodeAffinity.of_pod(probe).matches(name, labels):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or []
    tolerations = template_spec.get("tolerations") or []
    if first_untolerated_taint(taints, tolerations, ("NoExecute",)) is not None:
        return False, False
    return first_untolerated_taint(taints, tolerations, ("NoSchedule",)) is None, True


async def sync_daemon_set(ctx: ControllerContext, ds: dict[str, Any]) -> None:
    meta = ds["metadata"]
    spec = ds.get("spec") or {}
    name = str(meta["name"])
    template = copy.deepcopy(spec.get("template") or {})
    template_spec = template.setdefault("spec", {})
    template_spec["tolerations"] = _with_daemon_tolerations(template_spec)
    revision = template_hash(spec.get("template") or {})
    workload = workload_of(template, name)
    min_ready = int(spec.get("minReadySeconds") or 0)
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in ctx.index.children(str(meta["uid"]), "pods"):
        node = target_node(pod)
        if node is not None:
            by_node.setdefault(node, []).append(pod)
    nodes = ctx.index.nodes
    placements = {n: _placement(template_spec, nodes[n]) for n in sorted(nodes)}
    if not meta.get("deletionTimestamp"):
        to_create = _manage_nodes(ctx, placements=placements, by_node=by_node)
        labels = {
            REVISION_LABEL: revision,
            TEMPLATE_GENERATION_LABEL: str(meta.get("generation", 1)),
        }
        for node_name in to_create:
            pod = pod_from_template(
                template=template,
                owner=ds,
                workload=workload,
                index=ctx.index.free_index(meta["namespace"], workload),
                labels=labels,
            )
            pod["spec"]["affinity"] = _pinned_affinity(pod["spec"], node_name)
            await ctx.create(pod)
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            _roll(
                ctx,
                by_node=by_node,
                revision=revision,
                strategy=strategy,
                desired=[n for n, (run, _) in placements.items() if run],
                min_ready=min_ready,
            )
    _write_status(ctx, ds=ds, placements=placements, revision=revision, min_ready=min_ready)


def _manage_nodes(
    ctx: ControllerContext,
    *,
    placements: dict[str, tuple[bool, bool]],
    by_node: dict[str, list[dict[str, Any]]],
) -> list[str]:
    """``podsShouldBeOnNode`` for every node: delete what must go, keep in ``by_node`` the one
    pod each node keeps; the nodes that need a new pod (those with no pod at all — a pod still
    terminating holds its node's place, as upstream)."""
    to_create: list[str] = []
    for node_name in sorted(set(placements) | set(by_node)):
        should_run, may_stay = placements.get(node_name, (False, False))
        pods = sorted(
            by_node.pop(node_name, []),
            key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]),
        )
        alive = [p for p in pods if not is_terminal(p) and not is_terminating(p)]
        for pod in pods:
            if is_terminal(pod) and not is_terminating(pod):
                ctx.delete_pod(pod)  # a failed daemon pod is replaced
        if not may_stay:
            for pod in alive:
                ctx.delete_pod(pod)
        elif alive:
            for pod in alive[1:]:
                ctx.delete_pod(pod)  # duplicates: the oldest stays
            by_node[node_name] = alive[:1]
        elif should_run and not pods:
            to_create.append(node_name)  # (a node whose old pod still terminates waits)
    return to_create


def _roll(
    ctx: ControllerContext,
    *,
    by_node: dict[str, list[dict[str, Any]]],
    revision: str,
    strategy: dict[str, Any],
    desired: list[str],
    min_ready: int,
) -> None:
    """``rollingUpdate`` without surge: old pods go within the maxUnavailable budget, counted
    over the nodes that should run a pod (one without an available pod is unavailable)."""
    budget = scaled_value(
        (strategy.get("rollingUpdate") or {}).get("maxUnavailable"),
        len(desired),
        round_up=True,
        default="1",
    )

    def available(pod: dict[str, Any]) -> bool:
        since = available_since(pod, min_ready)
        return is_ready(pod) and since is not None and (min_ready == 0 or since <= ctx.now)

    unavailable = sum(1 for node in desired if not any(available(p) for p in by_node.get(node, [])))
    for node_name in sorted(by_node):
        for pod in by_node[node_name]:
            if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision:
                continue
            if not available(pod):
                ctx.delete_pod(pod)
            elif unavailable < budget:
                ctx.delete_pod(pod)
                unavailable += 1


def _write_status(
    ctx: ControllerContext,
    *,
    ds: dict[str, Any],
    placements: dict[str, tuple[bool, bool]],
    revision: str,
    min_ready: int,
) -> None:
    meta = ds["metadata"]
    key = (DAEMON_SETS.plural, meta["namespace"], meta["name"])
    current = ctx.index.get(*key)
    if current is None:
        return
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in ctx.index.children(str(meta["uid"]), "pods"):
        node = target_node(pod)
        if node is not None and not is_terminating(pod) and not is_terminal(pod):
            by_node.setdefault(node, []).append(pod)
    desired = scheduled = misscheduled = ready = available = updated = 0
    for node_name, (should_run, _) in placements.items():
        desired += should_run
        pods = by_node.get(node_name, [])
        if not should_run:
            misscheduled += bool(pods)
            continue
        if not pods:
            continue
        scheduled += 1
        pod = pods[0]
        updated += (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision
        if is_ready(pod):
            ready += 1
            since = available_since(pod, min_ready)
            if since is not None and (min_ready == 0 or since <= ctx.now):
                available += 1
            elif since is not None:
                ctx.wake_at(key, since)
    status = dict(current.get("status") or {})
    status.update(
        {
            "observedGeneration": int(meta.get("generation") or 1),
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": scheduled,
            "numberMisscheduled": misscheduled,
            "numberReady": ready,
            "numberAvailable": available,
            "numberUnavailable": desired - available,
            "updatedNumberScheduled": updated,
        }
    )
    ctx.update_status(current, status)
