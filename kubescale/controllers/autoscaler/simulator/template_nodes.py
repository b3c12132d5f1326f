"""Template nodes: what a new node of each group would look like.

Upstream's ``MixedTemplateNodeInfoProvider``.

Per node group, in upstream's order of preference (reference §2.1):

1. a **real node** of the group that is ready, schedulable and not being deleted (the first by
   name), with its DaemonSet and mirror pods — and remembered, so that
2. a **cached copy** of such a node stands in once the group has none (upstream keeps it for
   ``--node-info-cache-expire-time``, 10 years; here until the group disappears);
3. the provider's **scale-from-zero** template, with its start-up pods and a pod for every
   DaemonSet that would run there (``forceDaemonSets``);
4. as a last resort, an **unready** node of the group.

Sanitizing (``SanitizedTemplateNodeInfoFromNodeInfo``): the node is renamed
``template-node-for-<group>`` (upstream adds a random suffix; kubescale keeps it
deterministic), its hostname label follows, and the autoscaler's own taints, the node-condition
taints, startup taints (prefix or ``--startup-taint``), status taints (prefix or
``--status-taint``) and ignore-taints are removed; ``spec.unschedulable`` is cleared. Its pods
are renamed after the template and bound to it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    NodeGroup,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.model.node_facts import (
    DELETION_CANDIDATE_TAINT,
    IGNORE_TAINT_PREFIX,
    NODE_CONDITION_TAINTS,
    STARTUP_TAINT_PREFIX,
    STATUS_TAINT_PREFIX,
    TO_BE_DELETED_TAINT,
    NodeReadiness,
    node_name,
)
from kubescale.controllers.autoscaler.model.pod_facts import (
    is_daemonset_pod,
    is_mirror_pod,
    is_terminal,
)
from kubescale.objects.daemon_set import DaemonSet
from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import Pod
from kubescale.objects.views import Meta, spec_of, status_of
from kubescale.scheduling.filters import FILTERED_EFFECTS, NodeAffinity, first_untolerated_taint
from kubescale.scheduling.pod_resources import Amounts, amounts_of, node_allocatable

__all__ = ["TemplateNode", "TemplateRegistry", "daemon_set_pod", "sanitize_template"]

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
_CA_TAINTS: Final = frozenset({TO_BE_DELETED_TAINT, DELETION_CANDIDATE_TAINT})


@dataclass(frozen=True, kw_only=True)
class TemplateNode:
    """A sanitized node of a group and the pods it starts with."""

    group_id: str
    node: Node
    pods: tuple[Pod, ...]
    allocatable: Amounts
    capacity: Amounts
    source: str
    """``node`` (a real node), ``cache``, ``provider`` or ``unready-node``."""

    @property
    def name(self) -> str:
        return node_name(self.node)


def _safe_name(group_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in group_id.lower())


def _keep_taint(taint: Taint, startup: frozenset[str], status: frozenset[str]) -> bool:
    key = str(taint.get("key", ""))
    if key in _CA_TAINTS or key in NODE_CONDITION_TAINTS:
        return False
    if key.startswith((STARTUP_TAINT_PREFIX, STATUS_TAINT_PREFIX, IGNORE_TAINT_PREFIX)):
        return False
    return key not in startup and key not in status


def sanitize_template(
    *,
    node: Node,
    pods: Iterable[Pod],
    group_id: str,
    startup_taints: Iterable[str] = (),
    status_taints: Iterable[str] = (),
    source: str,
) -> TemplateNode:
    """The module docstring's sanitizing (``managedFields`` is not among the fields kubescale
    keeps: the projected informer caches the autoscaler reads have dropped it already)."""
    name = f"template-node-for-{_safe_name(group_id)}"
    sanitized = copy.deepcopy(node)
    meta = sanitized.setdefault("metadata", {})
    meta["name"] = name
    meta.pop("uid", None)
    meta.pop("resourceVersion", None)
    meta.pop("creationTimestamp", None)
    labels = dict(meta.get("labels") or {})
    labels[HOSTNAME_LABEL] = name
    meta["labels"] = labels
    spec = sanitized.setdefault("spec", {})
    startup, status = frozenset(startup_taints), frozenset(status_taints)
    spec["taints"] = [t for t in spec.get("taints") or () if _keep_taint(t, startup, status)]
    spec.pop("unschedulable", None)
    renamed: list[Pod] = []
    for index, pod in enumerate(pods):
        clone = copy.deepcopy(pod)
        pod_meta = clone.setdefault("metadata", {})
        pod_meta["name"] = f"{pod_meta.get('name', 'pod')}-{name}-{index}"
        pod_meta.pop("uid", None)
        clone.setdefault("spec", {})["nodeName"] = name
        renamed.append(clone)
    status_block = status_of(sanitized)
    return TemplateNode(
        group_id=group_id,
        node=sanitized,
        pods=tuple(renamed),
        allocatable=node_allocatable(sanitized),
        capacity=amounts_of(status_block.get("capacity") or status_block.get("allocatable")),
        source=source,
    )


def daemon_set_pod(daemon_set: DaemonSet, node: Node) -> Pod | None:
    """The pod ``daemon_set`` would run on ``node``, or ``None`` when it would not run there
    (node selector / required node affinity, or an untolerated NoSchedule/NoExecute taint)."""
    template = spec_of(daemon_set).get("template") or {}
    meta = Meta(daemon_set).raw
    spec = spec_of(template).copy()
    pod: Pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": str(meta.get("name", "daemonset")),
            "namespace": str(meta.get("namespace", "")),
            "labels": dict(Meta(template).raw.get("labels") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": str(meta.get("name", "")),
                    "uid": str(meta.get("uid", "")),
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Running"},
    }
    labels = Meta(node).raw.get("labels") or {}
    if not NodeAffinity.of_pod(pod).matches(node_name(node), labels):
        return None
    taints = spec_of(node).get("taints") or ()
    tolerations = tuple(spec.get("tolerations") or ())
    if first_untolerated_taint(taints, tolerations, FILTERED_EFFECTS) is not None:
        return None
    return pod


class TemplateRegistry:
    """Template nodes across loops (module docstring); ``recompute`` once per loop."""

    def __init__(self, *, startup_taints: Sequence[str] = (), status_taints: Sequence[str] = ()):
        self.startup_taints = tuple(startup_taints)
        self.status_taints = tuple(status_taints)
        self._cache: dict[str, TemplateNode] = {}
        self.templates: dict[str, TemplateNode] = {}

    def recompute(
        self,
        *,
        snapshot: ProviderSnapshot,
        nodes: Sequence[Node],
        pods_by_node: Mapping[str, Sequence[Pod]],
        daemon_sets: Sequence[DaemonSet],
        readiness: Callable[[Node], NodeReadiness],
        being_deleted: Callable[[Node], bool],
    ) -> dict[str, TemplateNode]:
        by_group: dict[str, list[Node]] = {}
        for node in sorted(nodes, key=node_name):
            group = snapshot.group_for_node(node)
            if group is not None:
                by_group.setdefault(group.id, []).append(node)
        templates: dict[str, TemplateNode] = {}
        for group in snapshot.groups.values():
            members = by_group.get(group.id, [])
            template = self._from_real_node(group, members, pods_by_node, readiness, being_deleted)
            if template is not None:
                self._cache[group.id] = template
            else:
                template = self._cache.get(group.id)
                if template is not None:
                    template = TemplateNode(
                        group_id=template.group_id,
                        node=template.node,
                        pods=template.pods,
                        allocatable=template.allocatable,
                        capacity=template.capacity,
                        source="cache",
                    )
            if template is None:
                template = self._from_provider(group, daemon_sets)
            if template is None and members:
                template = self._template(
                    group, members[0], pods_by_node.get(node_name(members[0]), ()), "unready-node"
                )
            if template is not None:
                templates[group.id] = template
        for gone in [g for g in self._cache if g not in snapshot.groups]:
            del self._cache[gone]
        self.templates = templates
        return templates

    def _template(
        self,
        group: NodeGroup,
        node: Node,
        pods: Iterable[Pod],
        source: str,
    ) -> TemplateNode:
        startup = [
            p
            for p in pods
            if (is_daemonset_pod(p) or is_mirror_pod(p))
            and not is_terminal(p)
            and not Meta(p).raw.get("deletionTimestamp")
        ]
        return sanitize_template(
            node=node,
            pods=startup,
            group_id=group.id,
            startup_taints=self.startup_taints,
            status_taints=self.status_taints,
            source=source,
        )

    def _from_real_node(
        self,
        group: NodeGroup,
        members: Sequence[Node],
        pods_by_node: Mapping[str, Sequence[Pod]],
        readiness: Callable[[Node], NodeReadiness],
        being_deleted: Callable[[Node], bool],
    ) -> TemplateNode | None:
        for node in members:
            if spec_of(node).get("unschedulable") or being_deleted(node):
                continue
            if not readiness(node).ready:
                continue
            return self._template(group, node, pods_by_node.get(node_name(node), ()), "node")
        return None

    def _from_provider(
        self, group: NodeGroup, daemon_sets: Sequence[DaemonSet]
    ) -> TemplateNode | None:
        if group.template is None:
            return None
        pods: list[Pod] = list(group.template_pods)
        for daemon_set in sorted(
            daemon_sets,
            key=lambda d: (
                str(Meta(d).raw.get("namespace", "")),
                str(Meta(d).raw.get("name", "")),
            ),
        ):
            pod = daemon_set_pod(daemon_set, group.template)
            if pod is not None:
                pods.append(pod)
        return sanitize_template(
            node=group.template,
            pods=pods,
            group_id=group.id,
            startup_taints=self.startup_taints,
            status_taints=self.status_taints,
            source="provider",
        )
