"""Topology spread constraints as the descheduler counts them: the arithmetic both the descheduler's
RemovePodsViolatingTopologySpreadConstraint (:mod:`kubescale.controllers.descheduler.strategies.
topology_spread`) and the scheduler extender's placement veto
(:mod:`kubescale.coordination.placement_rules`) apply — upstream descheduler's
``removepodsviolatingtopologyspreadconstraint`` (``topologyspreadconstraint.go``).

* :class:`SpreadConstraint` — one constraint as a pod carries it (``newTopologySpreadConstraint``):
  ``maxSkew``, ``topologyKey``, ``whenUnsatisfiable``, the label selector with ``matchLabelKeys``
  merged in from the pod's own labels, ``nodeAffinityPolicy`` (unset: Honor) and
  ``nodeTaintsPolicy`` (unset: Ignore) with the pod's required node affinity / tolerations when
  honoured. ``minDomains`` is not supported.
* :func:`domain_counts` — a domain for every value of ``topologyKey`` on the nodes passing the
  inclusion policies (:func:`node_included`: Honor affinity — the node matches the pod's
  required affinity; Honor taints — no untolerated NoSchedule/NoExecute taint), then every
  matching, non-terminating pod on a node with the label counts in its node's domain.

(kube-scheduler's own PodTopologySpread filter, which counts every node of the snapshot, is
:mod:`.topology_spread`.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod, Toleration, TopologySpreadConstraint
from kubescale.objects.selectors import (
    EQUALS,
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    new_requirement,
)
from kubescale.objects.views import Meta, spec_of

from .cycle_view import node_labels, node_name
from .filters import FILTERED_EFFECTS, NodeAffinity, first_untolerated_taint
from .pods import is_terminating

__all__ = [
    "HONOR",
    "SpreadConstraint",
    "domain_counts",
    "includes_every_node",
    "node_included",
    "spread_constraint",
    "spread_constraints",
]

HONOR: Final = "Honor"


@dataclass(frozen=True)
class SpreadConstraint:
    """One ``TopologySpreadConstraint`` as a pod carries it (module docstring)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    node_affinity: NodeAffinity | None
    """The pod's required node affinity when ``nodeAffinityPolicy`` is Honor."""
    tolerations: tuple[Toleration, ...] | None
    """The pod's tolerations when ``nodeTaintsPolicy`` is Honor."""
    identity: str = field(compare=False)
    """Upstream's DeepEqual of constraints, as text."""


def _merged_selector(raw: TopologySpreadConstraint, pod: Pod) -> LabelSelector:
    selector = label_selector_from_dict(raw.get("labelSelector"))
    keys = raw.get("matchLabelKeys") or []
    labels = Meta(pod).raw.get("labels") or {}
    if not keys or not labels or selector.nothing:
        return selector
    extra = [new_requirement(k, EQUALS, (labels[k],)) for k in keys if k in labels]
    if not extra:
        return selector
    return LabelSelector(
        requirements=tuple(sorted([*extra, *selector.requirements], key=lambda r: r.key))
    )


def spread_constraint(raw: TopologySpreadConstraint, pod: Pod) -> SpreadConstraint | None:
    """``newTopologySpreadConstraint``; ``None`` when its selector does not parse."""
    try:
        selector = _merged_selector(raw, pod)
    except SelectorError:
        return None
    spec = spec_of(pod)
    affinity_policy = raw.get("nodeAffinityPolicy") or HONOR
    taints_policy = raw.get("nodeTaintsPolicy") or "Ignore"
    node_affinity = NodeAffinity.of_pod(pod) if affinity_policy == HONOR else None
    tolerations = tuple(spec.get("tolerations") or ()) if taints_policy == HONOR else None
    identity = json.dumps(
        [
            int(raw.get("maxSkew") or 0),
            str(raw.get("topologyKey") or ""),
            str(raw.get("whenUnsatisfiable") or ""),
            str(selector) if not selector.nothing else None,
            repr(node_affinity),
            list(tolerations) if tolerations is not None else None,
        ],
        sort_keys=True,
        default=str,
    )
    return SpreadConstraint(
        max_skew=int(raw.get("maxSkew") or 0),
        topology_key=str(raw.get("topologyKey") or ""),
        when_unsatisfiable=str(raw.get("whenUnsatisfiable") or ""),
        selector=selector,
        node_affinity=node_affinity,
        tolerations=tolerations,
        identity=identity,
    )


def spread_constraints(pod: Pod, kinds: Sequence[str]) -> list[SpreadConstraint]:
    """The pod's constraints of the ``whenUnsatisfiable`` kinds in ``kinds``."""
    found = []
    for raw in spec_of(pod).get("topologySpreadConstraints") or ():
        if raw.get("whenUnsatisfiable") not in kinds:
            continue
        constraint = spread_constraint(raw, pod)
        if constraint is not None:
            found.append(constraint)
    return found


def node_included(constraint: SpreadConstraint, node: Node) -> bool:
    """``matchNodeInclusionPolicies`` (module docstring)."""
    affinity = constraint.node_affinity
    if (
        affinity is not None
        and (affinity.selector or affinity.terms is not None)
        and not affinity.matches(node_name(node), node_labels(node))
    ):
        return False
    if constraint.tolerations is not None:
        taints = spec_of(node).get("taints") or ()
        if first_untolerated_taint(taints, constraint.tolerations, FILTERED_EFFECTS) is not None:
            return False
    return True


def includes_every_node(constraint: SpreadConstraint) -> bool:
    """Every node passes the constraint's inclusion policies."""
    affinity = constraint.node_affinity
    return constraint.tolerations is None and (
        affinity is None or (not affinity.selector and affinity.terms is None)
    )


def domain_counts(
    constraint: SpreadConstraint,
    nodes: Mapping[str, Node],
    pods: Sequence[Pod],
    *,
    values: Iterable[str] | None = None,
) -> dict[str, list[Pod]]:
    """Domain value → matching pods (module docstring), domains by value; ``nodes`` by
    name. ``values``, when known, are the nodes' values of the topology key: with no inclusion
    policy to apply they are the domains, and the nodes need not be read."""
    domains: dict[str, list[Pod]] = {}
    key = constraint.topology_key
    inclusive = includes_every_node(constraint)
    if inclusive and values is not None:
        domains = {value: [] for value in values}
        nodes_to_read: Iterable[Node] = ()
    else:
        nodes_to_read = nodes.values()
    for node in nodes_to_read:
        value = (Meta(node).raw.get("labels") or {}).get(key)
        if (
            value is not None
            and value not in domains
            and (inclusive or node_included(constraint, node))
        ):
            domains[value] = []
    for pod in pods:
        if is_terminating(pod) or not constraint.selector.matches(
            Meta(pod).raw.get("labels") or {}
        ):
            continue
        bound = nodes.get(str(spec_of(pod).get("nodeName") or ""))
        if bound is None:
            continue
        value = node_labels(bound).get(key)
        if value is not None:
            domains.setdefault(value, []).append(pod)
    return dict(sorted(domains.items()))
