"""When the descheduler's placement plugins evict a pod: the conditions both the descheduler's
strategies (:mod:`kubescale.controllers.descheduler.strategies`) and the scheduler extender's
placement veto (:mod:`kubescale.coordination.placement_rules`) apply, so that the extender
refuses exactly the nodes the next cycle would evict the pod from.

* the plugins' names, as a ``DeschedulerPolicy`` spells them;
* RemovePodsViolatingNodeTaints (upstream ``removepodsviolatingnodetaints``): a taint is
  *considered* (:func:`considered_taints`) when its effect is ``NoSchedule`` — or
  ``PreferNoSchedule`` with ``includePreferNoSchedule`` (``NoExecute`` never: the taint manager
  evicts those pods itself) — no ``excludedTaints`` entry matches it, and an ``includedTaints``
  list (when given) has an entry matching it (``key`` matches the key, ``key=value`` key and
  value); a pod violates when it does not tolerate a considered taint (:func:`violating_taint`);
* RemovePodsViolatingNodeAffinity (``removepodsviolatingnodeaffinity``): which pods it looks at
  (:func:`has_required_affinity`, :func:`has_preferred_affinity`);
* RemovePodsViolatingInterPodAntiAffinity (``removepodsviolatinginterpodantiaffinity``,
  ``CheckPodsWithAntiAffinityExist``): where a pod's required anti-affinity terms forbid it
  (:func:`forbidden_domains`, :func:`anti_affinity_conflict`) — a term selects another pod, in
  the term's namespaces (default: the pod's own), on a node with the same value of the term's
  ``topologyKey`` (the same node always counts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import NodeAffinity as NodeAffinitySpec
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import spec_of

from .cycle_view import node_labels, node_name
from .filters import tolerates
from .fit import pod_key
from .inter_pod_affinity import required_terms
from .policy.strategy_args import RemovePodsViolatingNodeTaintsArgs

__all__ = [
    "ANTI_AFFINITY",
    "HIGH_NODE_UTILIZATION",
    "LOW_NODE_UTILIZATION",
    "NODE_AFFINITY",
    "NODE_TAINTS",
    "TOPOLOGY_SPREAD",
    "ForbiddenDomains",
    "anti_affinity_conflict",
    "considered_taints",
    "forbidden_domains",
    "has_preferred_affinity",
    "has_required_affinity",
    "node_affinity_of",
    "taint_text",
    "violating_taint",
]

NODE_TAINTS: Final = "RemovePodsViolatingNodeTaints"
NODE_AFFINITY: Final = "RemovePodsViolatingNodeAffinity"
ANTI_AFFINITY: Final = "RemovePodsViolatingInterPodAntiAffinity"
TOPOLOGY_SPREAD: Final = "RemovePodsViolatingTopologySpreadConstraint"
LOW_NODE_UTILIZATION: Final = "LowNodeUtilization"
HIGH_NODE_UTILIZATION: Final = "HighNodeUtilization"


def _entry_matches(entry: str, taint: Taint) -> bool:
    key, sep, value = entry.partition("=")
    if taint.get("key", "") != key:
        return False
    return not sep or (taint.get("value") or "") == value


def considered_taints(
    taints: Iterable[Taint], args: RemovePodsViolatingNodeTaintsArgs
) -> list[Taint]:
    """The taints this plugin enforces (module docstring)."""
    effects = (
        ("NoSchedule", "PreferNoSchedule") if args.include_prefer_no_schedule else ("NoSchedule",)
    )
    chosen = []
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if any(_entry_matches(entry, taint) for entry in args.excluded_taints):
            continue
        if args.included_taints is not None and not any(
            _entry_matches(entry, taint) for entry in args.included_taints
        ):
            continue
        chosen.append(taint)
    return chosen


def violating_taint(
    pod: Pod, taints: Sequence[Taint], args: RemovePodsViolatingNodeTaintsArgs
) -> Taint | None:
    """The first considered taint of ``taints`` the pod does not tolerate, if any."""
    tolerations = spec_of(pod).get("tolerations") or ()
    for taint in considered_taints(taints, args):
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: Taint) -> str:
    value = taint.get("value") or ""
    return f"{taint.get('key', '')}{'=' + value if value else ''}:{taint.get('effect', '')}"


def node_affinity_of(pod: Pod) -> NodeAffinitySpec:
    """The pod's ``affinity.nodeAffinity`` (empty when none)."""
    return (spec_of(pod).get("affinity") or {}).get("nodeAffinity") or {}


def has_required_affinity(pod: Pod) -> bool:
    return node_affinity_of(pod).get("requiredDuringSchedulingIgnoredDuringExecution") is not None


def has_preferred_affinity(pod: Pod) -> bool:
    return bool(node_affinity_of(pod).get("preferredDuringSchedulingIgnoredDuringExecution"))


@dataclass(frozen=True)
class ForbiddenDomains:
    """Where one required anti-affinity term of a pod forbids it: the nodes running a pod the
    term selects, and those nodes' values of the term's ``topologyKey``."""

    topology_key: str
    nodes: Mapping[str, Pod]
    """Node name → one selected pod on it."""
    values: Mapping[str, Pod]
    """Topology value → one selected pod in that domain."""

    def conflict(self, node: Node) -> Pod | None:
        """The selected pod ``node`` would be next to (the same node always counts)."""
        return self.conflict_at(node_name(node), node_labels(node))

    def conflict_at(self, name: str, labels: Mapping[str, str]) -> Pod | None:
        """:meth:`conflict` for the node ``name`` with ``labels``."""
        found = self.nodes.get(name)
        if found is not None:
            return found
        value = labels.get(self.topology_key)
        return self.values.get(value) if value is not None else None


Select = Callable[[str, LabelSelector], Iterable[Pod]]
"""The pods of a namespace a selector may match (a superset: each is matched again)."""


def forbidden_domains(
    pod: Pod,
    pods_by_namespace: Mapping[str, Iterable[Pod]],
    nodes: Mapping[str, Node],
    namespace_labels: Mapping[str, Mapping[str, str]],
    *,
    select: Select | None = None,
) -> list[ForbiddenDomains]:
    """For each of ``pod``'s required anti-affinity terms, where the pods it selects run
    (module docstring, step 3): one pass over the pods, then a lookup per node. ``select``
    narrows a namespace's pods to those a selector may match (an index)."""
    found = []
    own = pod_key(pod)
    for term in required_terms(pod, "podAntiAffinity"):
        by_node: dict[str, Pod] = {}
        by_value: dict[str, Pod] = {}
        scope = term.namespaces or frozenset(pods_by_namespace)
        for namespace in sorted(scope):
            pods = (
                select(namespace, term.selector)
                if select is not None
                else pods_by_namespace.get(namespace, ())
            )
            for other in pods:
                if pod_key(other) == own or not term.matches(other, namespace_labels):
                    continue
                name = str(spec_of(other).get("nodeName") or "")
                other_node = nodes.get(name)
                if other_node is None:
                    continue
                by_node.setdefault(name, other)
                value = node_labels(other_node).get(term.topology_key)
                if value is not None:
                    by_value.setdefault(value, other)
        found.append(
            ForbiddenDomains(topology_key=term.topology_key, nodes=by_node, values=by_value)
        )
    return found


def anti_affinity_conflict(
    pod: Pod,
    node: Node,
    pods_by_namespace: Mapping[str, Sequence[Pod]],
    nodes: Mapping[str, Node],
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> Pod | None:
    """The first other pod that one of ``pod``'s required anti-affinity terms forbids next to it
    if ``pod`` ran on ``node``; ``None`` when there is none (module docstring, step 3)."""
    for domains in forbidden_domains(pod, pods_by_namespace, nodes, namespace_labels):
        other = domains.conflict(node)
        if other is not None:
            return other
    return None
