"""Would the active descheduler policy evict this pod from that node? — the rules the scheduler
extender applies before a pod lands, so that it does not land where the next cycle evicts it.

The placement veto of the coordination layer: two systems meet here (the descheduler's policy,
judged for the scheduler extender), so it lives on the coordination floor, built from the pure
rules below it (:mod:`kubescale.scheduling.descheduler_rules`,
:mod:`kubescale.scheduling.spread_constraints`, :mod:`kubescale.scheduling.utilization_arrays`,
:mod:`kubescale.scheduling.evictor`) that the descheduler's strategies apply too.

For a pod and candidate nodes, :func:`policy_refusals` names, per node, the first plugin of the
policy (profile order, then the order below) that would evict the pod there. Only nodes of the
descheduler's cycle count (ready, matching the policy's nodeSelector): it never evicts from
others. A plugin counts only for a pod in its scope (namespaces, label selector,
``evictableNamespaces``) that its profile's ``DefaultEvictor`` Filter would let go — evaluated on
the pod as it will be once running (``minPodAge`` left out; ``PreEvictionFilter``/``nodeFit`` is
not evaluated, so a refusal may be more cautious than the cycle).

* RemovePodsViolatingNodeTaints — a considered taint of the node the pod does not tolerate
  (:func:`~kubescale.scheduling.descheduler_rules.violating_taint`); the scheduler already
  refuses NoSchedule, so this adds ``PreferNoSchedule`` with ``includePreferNoSchedule``;
* RemovePodsViolatingNodeAffinity — required: the node does not match the pod's required
  affinity; preferred: the node's Σ weight is below the best over the cycle's nodes;
* RemovePodsViolatingInterPodAntiAffinity — one of the pod's required anti-affinity terms
  selects a pod in the node's topology domain
  (:func:`~kubescale.scheduling.descheduler_rules.anti_affinity_conflict`);
* RemovePodsViolatingTopologySpreadConstraint — for every constraint the cycle would collect in
  the pod's namespace (the pod's own and its neighbours') whose selector matches the pod: with
  the pod counted in the node's domain, the constraint would be unbalanced (largest − smallest >
  maxSkew) and the node's domain above the average — the only domains ``balanceDomains`` takes
  pods from;
* LowNodeUtilization — the node would be over-utilized with the pod on it while the plugin acts
  (:func:`~kubescale.scheduling.utilization_arrays.lnu_over_after`), and — with static
  thresholds — the pod tolerates every taint of some under-utilized node (else the plugin
  would not move it; with deviation thresholds the under-utilized nodes move with the pod, so
  this is not relied on).

Each is a necessary condition for the cycle to evict the pod from that node for that reason, so
a pod placed on a node with no refusal is not evicted by the next cycle for these reasons (the
property test in ``tests/extender``). :func:`placement_scores` ranks nodes 0–10 for
``prioritize``: LowNodeUtilization's under-utilized nodes first, HighNodeUtilization's
under-utilized nodes (the ones it empties) last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta
from kubescale.scheduling.descheduler_rules import (
    ANTI_AFFINITY,
    HIGH_NODE_UTILIZATION,
    LOW_NODE_UTILIZATION,
    NODE_AFFINITY,
    NODE_TAINTS,
    TOPOLOGY_SPREAD,
    forbidden_domains,
    has_preferred_affinity,
    has_required_affinity,
    taint_text,
    violating_taint,
)
from kubescale.scheduling.evictor import DefaultEvictor, EvictorError, EvictorInputs
from kubescale.scheduling.filters import NodeAffinity, PreferredNodeAffinity
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.inter_pod_affinity import required_terms
from kubescale.scheduling.pods import requests_of, tolerates_taints_of_any
from kubescale.scheduling.policy.common_args import labels_match
from kubescale.scheduling.policy.evictor_args import DefaultEvictorArgs
from kubescale.scheduling.policy.policy_loading import DEFAULT_EVICTOR, DeschedulerPolicy
from kubescale.scheduling.policy.strategy_args import (
    NODE_AFFINITY_PREFERRED,
    NODE_AFFINITY_REQUIRED,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    RemovePodsViolatingNodeAffinityArgs,
    RemovePodsViolatingNodeTaintsArgs,
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from kubescale.scheduling.policy.utilization_args import (
    METRIC_RESOURCE,
    HighNodeUtilizationArgs,
    LowNodeUtilizationArgs,
)
from kubescale.scheduling.spread_constraints import (
    SpreadConstraint,
    domain_counts,
    spread_constraints,
)
from kubescale.scheduling.utilization_arrays import (
    UtilizationArrays,
    hnu_under,
    lnu_over_after,
    lnu_vector,
)

__all__ = [
    "PlacementRules",
    "PlacementState",
    "Refusal",
    "placement_scores",
    "policy_refusals",
]

MAX_SCORE: Final = 10
NEUTRAL_SCORE: Final = 5


class PlacementState(EvictorInputs, Protocol):
    """The cluster as the extender's caches hold it."""

    def descheduler_nodes(self) -> Mapping[str, Node]:
        """The cycle's nodes: ready, matching the policy's nodeSelector."""
        ...

    def node_labels_of(self) -> Mapping[str, Mapping[str, str]]:
        """The labels of :meth:`descheduler_nodes`, by name."""
        ...

    def node_taints_of(self) -> Mapping[str, Sequence[Taint]]:
        """The taints of those of :meth:`descheduler_nodes` that have any, by name."""
        ...

    def node_groups(self, keys: tuple[str, ...]) -> Mapping[tuple[str | None, ...], Sequence[str]]:
        """:meth:`descheduler_nodes` grouped by their values of the label ``keys``."""
        ...

    def pods_selected(self, namespace: str, selector: LabelSelector) -> Sequence[Pod]:
        """The namespace's pods bound to a node, not finished, whose labels ``selector``
        matches."""
        ...

    def spread_constraints_in(
        self, namespace: str
    ) -> Sequence[tuple[SpreadConstraint, Sequence[Pod]]]:
        """The distinct spread constraints the namespace's bound, unfinished pods carry, each
        with the pods carrying it."""
        ...

    def utilization(
        self, args: LowNodeUtilizationArgs | HighNodeUtilizationArgs
    ) -> UtilizationArrays | None:
        """Usage of the descheduler's nodes as the plugin measures it; ``None`` when unknown
        (metrics not collected yet)."""
        ...


class Refusal(NamedTuple):
    """Why nodes are refused: one object for every node refused for the same reason."""

    strategy: str
    profile: str
    message: str

    @property
    def unresolvable(self) -> bool:
        """A taint or node affinity: preemption cannot change it (the extender answers it as
        ``FailedAndUnresolvableNodes``; the rest, which evicting other pods could change, as
        ``FailedNodes``)."""
        return self.strategy in _UNRESOLVABLE_STRATEGIES


_UNRESOLVABLE_STRATEGIES: Final = frozenset({NODE_TAINTS, NODE_AFFINITY})


@dataclass(frozen=True)
class _Rule:
    profile: str
    name: str
    args: Any


@dataclass(frozen=True)
class PlacementRules:
    """The placement-related plugins of a policy, in the cycle's order."""

    rules: tuple[_Rule, ...] = ()
    evictors: Mapping[str, DefaultEvictorArgs | None] = field(default_factory=dict)
    """Profile → its evictor's arguments (``None``: its Filter is disabled)."""

    @classmethod
    def from_policy(cls, policy: DeschedulerPolicy) -> PlacementRules:
        placement = {
            NODE_TAINTS,
            NODE_AFFINITY,
            ANTI_AFFINITY,
            TOPOLOGY_SPREAD,
            LOW_NODE_UTILIZATION,
            HIGH_NODE_UTILIZATION,
        }
        rules: list[_Rule] = []
        for point in ("deschedule", "balance"):
            for profile in policy.profiles:
                names = profile.deschedule if point == "deschedule" else profile.balance
                rules.extend(
                    _Rule(profile.name, name, profile.args[name])
                    for name in names
                    if name in placement
                )
        evictors = {
            p.name: (p.evictor if DEFAULT_EVICTOR in p.filter else None) for p in policy.profiles
        }
        return cls(rules=tuple(rules), evictors=evictors)

    @property
    def empty(self) -> bool:
        return not self.rules


class _Evictable:
    """Each profile's Filter: on the pod being placed (as it will be once running, at most once
    per profile) and on the pods already there (as the cycle would see them now)."""

    def __init__(self, rules: PlacementRules, state: PlacementState, pod: Pod) -> None:
        self._rules, self._state, self._pod = rules, state, pod
        self._answers: dict[str, bool] = {}
        self._evictors: dict[tuple[str, bool], DefaultEvictor | None] = {}

    def _evictor(self, profile: str, *, ignore_age: bool) -> DefaultEvictor | None:
        key = (profile, ignore_age)
        if key not in self._evictors:
            args = self._rules.evictors.get(profile)
            made: DefaultEvictor | None = None
            if args is not None:
                try:
                    made = DefaultEvictor(args, self._state, ignore_age=ignore_age)
                except EvictorError:
                    made = None  # a PriorityClass it names is missing: the cycle skips it
            self._evictors[key] = made
        return self._evictors[key]

    def _filter(self, profile: str, pod: Pod, *, ignore_age: bool) -> bool:
        if self._rules.evictors.get(profile) is None:
            return True
        evictor = self._evictor(profile, ignore_age=ignore_age)
        return evictor is not None and evictor.filter(pod)

    def __call__(self, profile: str) -> bool:
        if profile not in self._answers:
            self._answers[profile] = self._filter(profile, self._pod, ignore_age=True)
        return self._answers[profile]

    def other(self, profile: str, pod: Pod) -> bool:
        return self._filter(profile, pod, ignore_age=False)


def _namespace(pod: Pod) -> str:
    return str(Meta(pod).raw.get("namespace", ""))


def _in_scope(pod: Pod, args: Any) -> bool:
    namespaces = getattr(args, "namespaces", None)
    if namespaces is not None and not namespaces.allows(_namespace(pod)):
        return False
    return labels_match(getattr(args, "label_selector", None), pod)


def policy_refusals(
    pod: Pod, candidates: Sequence[str], *, rules: PlacementRules, state: PlacementState
) -> dict[str, Refusal]:
    """Node → the first plugin that would evict ``pod`` there (module docstring)."""
    refused: dict[str, Refusal] = {}
    if rules.empty:
        return refused
    nodes = state.descheduler_nodes()
    names = (
        list(candidates)
        if nodes.keys() >= set(candidates)
        else [name for name in candidates if name in nodes]
    )
    if not names:
        return refused
    evictable = _Evictable(rules, state, pod)
    open_names, seen = names, 0
    for rule in rules.rules:
        if len(refused) != seen:
            open_names, seen = [n for n in names if n not in refused], len(refused)
        if not open_names:
            break
        if rule.name == LOW_NODE_UTILIZATION:
            if rule.args.evictable_namespaces.allows(_namespace(pod)) and evictable(rule.profile):
                _refuse_over_utilized(pod, open_names, rule, state, refused)
            continue
        if rule.name == HIGH_NODE_UTILIZATION or not _in_scope(pod, rule.args):
            continue
        if not evictable(rule.profile):
            continue
        if rule.name == NODE_TAINTS:
            _refuse_taints(pod, open_names, rule, state, refused)
        elif rule.name == NODE_AFFINITY:
            _refuse_affinity(pod, open_names, rule, state, refused)
        elif rule.name == ANTI_AFFINITY:
            _refuse_anti_affinity(pod, open_names, rule, state, refused)
        elif rule.name == TOPOLOGY_SPREAD:
            _refuse_spread(pod, open_names, rule, state, refused, evictable=evictable)
    return refused


def _refusal(rule: _Rule, why: str) -> Refusal:
    """The same text for every node refused for the same reason, so that kube-scheduler's
    FitError message counts them together ("1700 descheduler policy: ...")."""
    return Refusal(
        strategy=rule.name,
        profile=rule.profile,
        message=f"descheduler {rule.profile}/{rule.name} would evict it: {why}",
    )


def _refuse_all(rule: _Rule, names: Iterable[str], why: str, refused: dict[str, Refusal]) -> None:
    refused.update(dict.fromkeys(names, _refusal(rule, why)))


def _refuse_taints(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    state: PlacementState,
    refused: dict[str, Refusal],
) -> None:
    args: RemovePodsViolatingNodeTaintsArgs = rule.args
    tainted = state.node_taints_of()
    open_names = set(names)
    by_taint: dict[str, list[str]] = {}
    for name, taints in tainted.items():
        if name not in open_names:
            continue
        taint = violating_taint(pod, taints, args)
        if taint is not None:
            by_taint.setdefault(taint_text(taint), []).append(name)
    for text, chosen in by_taint.items():
        _refuse_all(rule, chosen, f"untolerated taint {text}", refused)


def _refuse_affinity(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    state: PlacementState,
    refused: dict[str, Refusal],
) -> None:
    args: RemovePodsViolatingNodeAffinityArgs = rule.args
    labels_of = state.node_labels_of()
    for kind in args.node_affinity_type:
        open_names = [n for n in names if n not in refused]
        if kind == NODE_AFFINITY_REQUIRED and has_required_affinity(pod):
            required = NodeAffinity.of_pod(pod)
            chosen = [n for n in open_names if not required.matches(n, labels_of[n])]
            _refuse_all(rule, chosen, "required node affinity not matched", refused)
        elif kind == NODE_AFFINITY_PREFERRED and has_preferred_affinity(pod):
            preferred = PreferredNodeAffinity.of_pod(pod)
            keys = preferred.label_keys()
            if keys is None:
                weights = preferred.weights(labels_of)
            else:
                weights = {}
                for members in state.node_groups(keys).values():
                    weight = preferred.weight(members[0], labels_of[members[0]])
                    weights.update(dict.fromkeys(members, weight))
            best = max(weights.values(), default=0)
            chosen = [n for n in open_names if weights[n] < best]
            _refuse_all(
                rule, chosen, "another node matches its preferred node affinity better", refused
            )


def _refuse_anti_affinity(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    state: PlacementState,
    refused: dict[str, Refusal],
) -> None:
    args: RemovePodsViolatingInterPodAntiAffinityArgs = rule.args
    terms = required_terms(pod, "podAntiAffinity")
    if not terms:
        return
    by_namespace: dict[str, list[Pod]] = {}
    for term in terms:
        for namespace in sorted(term.namespaces or state.namespace_labels.keys()):
            chosen = by_namespace.setdefault(namespace, [])
            chosen.extend(
                p for p in state.pods_selected(namespace, term.selector) if _in_scope(p, args)
            )
    nodes = state.descheduler_nodes()
    domains = forbidden_domains(pod, by_namespace, nodes, state.namespace_labels)
    open_names = set(names)
    conflicting: set[str] = set()
    for forbidden in domains:
        conflicting.update(n for n in forbidden.nodes if n in open_names)
        groups = state.node_groups((forbidden.topology_key,))
        for value in forbidden.values:
            conflicting.update(n for n in groups.get((value,), ()) if n in open_names)
    _refuse_all(
        rule,
        [n for n in names if n in conflicting],
        "pod anti-affinity",
        refused,
    )


def _refuse_spread(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    state: PlacementState,
    refused: dict[str, Refusal],
    *,
    evictable: _Evictable,
) -> None:
    args: RemovePodsViolatingTopologySpreadConstraintArgs = rule.args
    nodes = state.descheduler_nodes()
    own = pod_key(pod)
    namespace = _namespace(pod)
    labels = Meta(pod).raw.get("labels") or {}
    found: dict[str, SpreadConstraint] = {}
    for constraint in spread_constraints(pod, args.constraints):
        if constraint.selector.matches(labels):
            found.setdefault(constraint.identity, constraint)
    for constraint, holders in state.spread_constraints_in(namespace):
        if (
            constraint.identity in found
            or constraint.when_unsatisfiable not in args.constraints
            or not constraint.selector.matches(labels)
        ):
            continue
        if any(
            pod_key(h) != own and _in_scope(h, args) and evictable.other(rule.profile, h)
            for h in holders
        ):
            found[constraint.identity] = constraint
    for constraint in found.values():
        matching = [
            p
            for p in state.pods_selected(namespace, constraint.selector)
            if pod_key(p) != own and _in_scope(p, args) and evictable.other(rule.profile, p)
        ]
        key = constraint.topology_key
        groups = state.node_groups((key,))
        # The nodes' values of the key, already grouped: domain_counts need not read the nodes.
        values = [value for (value,) in groups if value is not None]
        placed = _SpreadAfterPlacement(domain_counts(constraint, nodes, matching, values=values))
        open_names = {n for n in names if n not in refused}
        chosen: set[str] = set()
        for (value,), members in groups.items():
            if value is not None and placed.evicted_from(value, constraint.max_skew)[0]:
                chosen.update(m for m in members if m in open_names)
        _refuse_all(
            rule,
            [n for n in names if n in chosen],
            f"{key} spread over maxSkew {constraint.max_skew}",
            refused,
        )


class _SpreadAfterPlacement:
    """Domain sizes of one constraint, and what one more pod in a domain does to them."""

    def __init__(self, domains: Mapping[str, Sequence[Pod]]) -> None:
        self.sizes = {value: len(members) for value, members in domains.items()}
        self.total = sum(self.sizes.values())
        ordered = sorted(self.sizes.values())
        self.smallest = ordered[0] if ordered else None
        self.second = ordered[1] if len(ordered) > 1 else None
        self.largest = ordered[-1] if ordered else None
        self.smallest_count = ordered.count(ordered[0]) if ordered else 0
        self._answers: dict[str, tuple[int | None, int]] = {}

    def evicted_from(self, value: str, max_skew: int) -> tuple[int | None, int]:
        """``(size, total)`` with the pod in ``value``'s domain when that makes the constraint
        unbalanced and the domain above the average, else ``(None, total)``."""
        cached = self._answers.get(value)
        if cached is not None:
            return cached
        old = self.sizes.get(value)
        new = (old or 0) + 1
        count = len(self.sizes) + (0 if old is not None else 1)
        largest = max(self.largest or 0, new)
        if self.smallest is None:
            smallest = new
        elif old is None:
            smallest = min(self.smallest, new)
        elif old == self.smallest and self.smallest_count == 1:
            smallest = min(self.second if self.second is not None else new, new)
        else:
            smallest = self.smallest
        total = self.total + 1
        unbalanced = largest - smallest > max_skew and new > total / count
        answer = (new if unbalanced else None, total)
        self._answers[value] = answer
        return answer


def _lnu_added(pod: Pod, arrays: UtilizationArrays, columns: Sequence[int]) -> list[int]:
    requests = requests_of(pod)
    added = []
    for column in columns:
        resource = arrays.resources[column]
        if resource == "pods":
            added.append(1)
        elif resource == METRIC_RESOURCE:
            added.append(0)  # a query's share of one pod is unknown
        else:
            added.append(requests.get(resource, 0))
    return added


def _refuse_over_utilized(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    state: PlacementState,
    refused: dict[str, Refusal],
) -> None:
    args: LowNodeUtilizationArgs = rule.args
    arrays = state.utilization(args)
    if arrays is None:
        return
    vector = lnu_vector(arrays, args)
    if not args.use_deviation_thresholds:
        under = {arrays.names[i]: arrays.taints[i] for i in vector.under.nonzero()[0].tolist()}
        if not under or not tolerates_taints_of_any(pod, under):
            return  # LowNodeUtilization would not move this pod anywhere
    indices = [arrays.index[n] for n in names if n in arrays.index]
    added = _lnu_added(pod, arrays, vector.columns)
    over = lnu_over_after(arrays, vector, args, candidates=indices, added=added)
    _refuse_all(
        rule,
        [arrays.names[i] for i, flag in zip(indices, over.tolist(), strict=True) if flag],
        "node over its target utilization",
        refused,
    )


def placement_scores(
    pod: Pod, candidates: Sequence[str], *, rules: PlacementRules, state: PlacementState
) -> dict[str, int]:
    """``prioritize`` scores 0–10: 5 by default, +5 on LowNodeUtilization's under-utilized
    nodes, −5 on HighNodeUtilization's (it empties them); clamped to [0, 10]."""
    scores = dict.fromkeys(candidates, NEUTRAL_SCORE)
    for rule in rules.rules:
        if rule.name not in (LOW_NODE_UTILIZATION, HIGH_NODE_UTILIZATION):
            continue
        arrays = state.utilization(rule.args)
        if arrays is None:
            continue
        if rule.name == LOW_NODE_UTILIZATION:
            under = lnu_vector(arrays, rule.args).under
            delta = MAX_SCORE - NEUTRAL_SCORE
        else:
            under = hnu_under(arrays, rule.args)
            delta = -NEUTRAL_SCORE
        for name in candidates:
            index = arrays.index.get(name)
            if index is not None and bool(under[index]):
                scores[name] = min(MAX_SCORE, max(0, scores[name] + delta))
    return scores
