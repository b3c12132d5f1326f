"""kube-scheduler's PodTopologySpread filter: the pod's ``DoNotSchedule`` spread constraints.

``plugins/podtopologyspread/{common,filtering}.go``. Only constraints with
``whenUnsatisfiable: DoNotSchedule`` filter (``ScheduleAnyway`` only scores, and the cluster
default constraints are ``ScheduleAnyway``); a pod without any skips the filter — the fast path.
Per constraint (``filterTopologySpreadConstraints``):

* the selector is ``labelSelector`` (absent: selects nothing) with, for every key of
  ``matchLabelKeys`` the pod has, ``key in (the pod's value)`` merged in;
* ``minDomains`` unset is 1; ``nodeAffinityPolicy`` unset is ``Honor``, ``nodeTaintsPolicy``
  unset is ``Ignore``.

PreFilter (``calPreFilterState``) counts, over **every** node of the snapshot — cordoned ones
too — that carries *all* the constraints' topology keys, per constraint: when the node passes the
constraint's inclusion policies (``matchNodeInclusionPolicies``: Honor affinity → the pod's
``nodeSelector`` and required node affinity match it; Honor taints → the pod tolerates its
NoSchedule/NoExecute taints), the pods on it in the pod's namespace, not terminating, that the
selector matches, into the domain of the node's topology value. A domain whose nodes hold no
matching pod is still a domain (count 0). Filter, for each constraint in order:

1. a node without the topology key → ``node(s) didn't match pod topology spread constraints
   (missing required label)``, ``UnschedulableAndUnresolvable``;
2. ``min`` = the smallest domain count — or 0 when there are fewer domains than ``minDomains``;
3. ``count(node's domain) + (1 if the selector matches the pod itself) − min > maxSkew`` →
   ``node(s) didn't match pod topology spread constraints`` (``Unschedulable``).

With no domain at all, fewer domains than ``minDomains`` (at least 1) makes the minimum 0, so
``0 + 1 − 0 <= maxSkew`` holds wherever the key exists. A constraint whose selector does not
parse makes upstream's PreFilter fail, so the pod fits no node (:data:`REASON_SPREAD_INVALID`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kubescale.objects.pod import Pod, Toleration, TopologySpreadConstraint
from kubescale.objects.selectors import (
    EQUALS,
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    new_requirement,
)
from kubescale.objects.views import Meta, spec_of

from .filters import (
    FILTERED_EFFECTS,
    FilterStatus,
    NodeAffinity,
    NodeState,
    first_untolerated_taint,
)

__all__ = [
    "REASON_SPREAD",
    "REASON_SPREAD_INVALID",
    "REASON_SPREAD_LABEL",
    "KeyedNodes",
    "SpreadConstraint",
    "SpreadCounts",
    "is_terminating",
    "keyed_nodes",
    "required_spread_constraints",
]

REASON_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL: Final = REASON_SPREAD + " (missing required label)"
REASON_SPREAD_INVALID: Final = "pod topology spread constraints have an invalid label selector"
HONOR: Final = "Honor"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"


@dataclass(frozen=True)
class SpreadConstraint:
    """One ``DoNotSchedule`` constraint as the filter uses it (module docstring)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False


def _merged_selector(raw: TopologySpreadConstraint, labels: Mapping[str, str]) -> LabelSelector:
    """``labelSelector`` with ``matchLabelKeys`` merged in (``mergeLabelSetWithSelector``)."""
    selector = label_selector_from_dict(raw.get("labelSelector"))
    keys = raw.get("matchLabelKeys") or ()
    extra = [new_requirement(k, EQUALS, (labels[k],)) for k in keys if k in labels]
    if not extra or selector.nothing:
        return selector
    return LabelSelector(
        requirements=tuple(sorted([*extra, *selector.requirements], key=lambda r: r.key))
    )


def required_spread_constraints(pod: Pod) -> tuple[SpreadConstraint, ...] | None:
    """The pod's ``DoNotSchedule`` constraints; ``None`` when a selector does not parse."""
    raw_constraints = spec_of(pod).get("topologySpreadConstraints") or ()
    if not raw_constraints:
        return ()
    labels = Meta(pod).raw.get("labels") or {}
    found: list[SpreadConstraint] = []
    for raw in raw_constraints:
        if raw.get("whenUnsatisfiable") != DO_NOT_SCHEDULE:
            continue
        try:
            selector = _merged_selector(raw, labels)
        except SelectorError:
            return None
        min_domains = raw.get("minDomains")
        found.append(
            SpreadConstraint(
                max_skew=int(raw.get("maxSkew") or 0),
                topology_key=str(raw.get("topologyKey") or ""),
                selector=selector,
                min_domains=int(min_domains) if min_domains is not None else 1,
                honor_affinity=(raw.get("nodeAffinityPolicy") or HONOR) == HONOR,
                honor_taints=(raw.get("nodeTaintsPolicy") or "Ignore") == HONOR,
            )
        )
    return tuple(found)


def is_terminating(pod: Pod) -> bool:
    """The pod has a deletion timestamp (it is not counted in any domain, #87621)."""
    return bool(Meta(pod).raw.get("deletionTimestamp"))


MatchCounts = Callable[[LabelSelector], Mapping[str, int]]
"""Selector → node name → the matching, non-terminating pods of the incoming pod's namespace
on that node (a node missing from the mapping has none)."""


@dataclass(frozen=True)
class KeyedNodes:
    """The nodes that carry every one of some topology keys (``nodeLabelsMatchSpreadConstraints``
    — the others are in no domain at all), with their values, and the values per key."""

    values: Mapping[str, tuple[str, ...]]
    """Node name → its value of each key, in the keys' order."""
    domains: tuple[frozenset[str], ...]
    """Per key: the values the nodes carry."""


def keyed_nodes(keys: tuple[str, ...], nodes: Iterable[NodeState]) -> KeyedNodes:
    values: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        labels = node.labels
        if all(key in labels for key in keys):
            values[node.name] = tuple(labels[key] for key in keys)
    domains = tuple(frozenset(v[i] for v in values.values()) for i in range(len(keys)))
    return KeyedNodes(values=values, domains=domains)


class SpreadCounts:
    """PodTopologySpread's PreFilter state for one incoming pod (module docstring)."""

    def __init__(
        self,
        constraints: Sequence[SpreadConstraint],
        domains: Sequence[Mapping[str, int]],
        pod_labels: Mapping[str, str],
    ) -> None:
        self.constraints = tuple(constraints)
        self.domains = tuple(domains)
        """Per constraint: topology value → matching pods in that domain."""
        self.self_match = tuple(c.selector.matches(pod_labels) for c in self.constraints)
        self.minimum = tuple(
            _minimum(c, counts) for c, counts in zip(self.constraints, self.domains, strict=True)
        )
        """Per constraint: the global minimum the skew is measured from (``None``: no domain,
        nothing can exceed the skew)."""

    @classmethod
    def build(
        cls,
        *,
        constraints: Sequence[SpreadConstraint],
        pod_labels: Mapping[str, str],
        node_affinity: NodeAffinity,
        tolerations: Sequence[Toleration],
        nodes: Mapping[str, NodeState],
        keyed: KeyedNodes,
        affine: Callable[[], KeyedNodes],
        match_counts: MatchCounts,
    ) -> SpreadCounts:
        """``calPreFilterState``. ``keyed`` are the nodes carrying every constraint's key
        (:func:`keyed_nodes` of ``nodes``), ``affine()`` those of them the pod's node affinity
        admits. Without a taints policy to honour, a constraint reads only the nodes with
        matching pods; with one, each candidate node's taints are checked."""
        affinity_is_trivial = not node_affinity.selector and node_affinity.terms is None
        domains: list[dict[str, int]] = []
        admitted: KeyedNodes | None = None
        taints_ok: dict[str, bool] = {}
        for index, constraint in enumerate(constraints):
            per_node = match_counts(constraint.selector)
            candidates = keyed
            if constraint.honor_affinity and not affinity_is_trivial:
                if admitted is None:
                    admitted = affine()
                candidates = admitted
            if not constraint.honor_taints:
                table = dict.fromkeys(candidates.domains[index], 0)
                for name, count in per_node.items():
                    values = candidates.values.get(name)
                    if values is not None:
                        table[values[index]] += count
                domains.append(table)
                continue
            table = {}
            for name, values in candidates.values.items():
                ok = taints_ok.get(name)
                if ok is None:
                    untolerated = first_untolerated_taint(
                        nodes[name].taints, tolerations, FILTERED_EFFECTS
                    )
                    ok = taints_ok[name] = untolerated is None
                if ok:
                    value = values[index]
                    table[value] = table.get(value, 0) + per_node.get(name, 0)
            domains.append(table)
        return cls(constraints, domains, pod_labels)

    def filter(self, node: NodeState) -> FilterStatus | None:
        """The node's verdict (``None``: it passes)."""
        labels = node.labels
        for index, constraint in enumerate(self.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return FilterStatus((REASON_SPREAD_LABEL,), unresolvable=True)
            minimum = self.minimum[index]
            if minimum is None:
                continue
            own = 1 if self.self_match[index] else 0
            if self.domains[index].get(value, 0) + own - minimum > constraint.max_skew:
                return FilterStatus((REASON_SPREAD,), unresolvable=False)
        return None


def _minimum(constraint: SpreadConstraint, counts: Mapping[str, int]) -> int | None:
    """``minMatchNum``: fewer domains than ``minDomains`` → 0; else the smallest count
    (``None`` — upstream's ``MaxInt32`` — only with no domain and ``minDomains`` 0, which the
    API server does not admit)."""
    if len(counts) < constraint.min_domains:
        return 0
    return min(counts.values()) if counts else None
