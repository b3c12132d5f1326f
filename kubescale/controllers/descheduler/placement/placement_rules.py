"""Would the active descheduler policy evict this pod from that node? — the rules the scheduler
extender applies before a pod lands, so that it does not land where the next cycle evicts it.

For a pod and candidate nodes, :func:`policy_refusals` names, per node, the first plugin of the
policy (profile order, then the order below) that would evict the pod there. Only nodes of the
descheduler's cycle count (ready, matching the policy's nodeSelector): it never evicts from
others. A plugin counts only for a pod in its scope (namespaces, label selector,
``evictableNamespaces``) that its profile's ``DefaultEvictor`` Filter would let go — evaluated on
the pod as it will be once running (``minPodAge`` left out; ``PreEvictionFilter``/``nodeFit`` is
not evaluated, so a refusal may be more cautious than the cycle).

* RemovePodsViolatingNodeTaints — a considered taint of the node the pod does not tolerate
  (:func:`..strategies.node_taints.violating_taint`); the scheduler already refuses NoSchedule,
  so this adds ``PreferNoSchedule`` with ``includePreferNoSchedule``;
* RemovePodsViolatingNodeAffinity — required: the node does not match the pod's required
  affinity; preferred: the node's Σ weight is below the best over the cycle's nodes;
* RemovePodsViolatingInterPodAntiAffinity — one of the pod's required anti-affinity terms
  selects a pod in the node's topology domain
  (:func:`..strategies.pod_anti_affinity.anti_affinity_conflict`);
* RemovePodsViolatingTopologySpreadConstraint — for every constraint the cycle would collect in
  the pod's namespace (the pod's own and its neighbours') whose selector matches the pod: with
  the pod counted in the node's domain, the constraint would be unbalanced (largest − smallest >
  maxSkew) and the node's domain above the average — the only domains ``balanceDomains`` takes
  pods from;
* LowNodeUtilization — the node would be over-utilized with the pod on it while the plugin acts
  (:func:`.utilization_arrays.lnu_over_after`), and — with static thresholds — the pod tolerates
  every taint of some under-utilized node (else the plugin would not move it; with deviation
  thresholds the under-utilized nodes move with the pod, so this is not relied on).

Each is a necessary condition for the cycle to evict the pod from that node for that reason, so
a pod placed on a node with no refusal is not evicted by the next cycle for these reasons (the
property test in ``tests/extender``). :func:`placement_scores` ranks nodes 0–10 for
``prioritize``: LowNodeUtilization's under-utilized nodes first, HighNodeUtilization's
under-utilized nodes (the ones it empties) last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from kubescale.scheduling.filters import PreferredNodeAffinity
from kubescale.scheduling.fit import pod_key
from kubescale.scheduling.inter_pod_affinity import required_terms

from ..framework.evictor import DefaultEvictor, EvictorError, EvictorInputs
from ..framework.pods import requests_of, tolerates_taints_of_any
from ..policy.common_args import labels_match
from ..policy.evictor_args import DefaultEvictorArgs
from ..policy.policy_loading import DEFAULT_EVICTOR, DeschedulerPolicy
from ..policy.strategy_args import (
    NODE_AFFINITY_PREFERRED,
    NODE_AFFINITY_REQUIRED,
    RemovePodsViolatingInterPodAntiAffinityArgs,
    RemovePodsViolatingNodeAffinityArgs,
    RemovePodsViolatingNodeTaintsArgs,
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from ..policy.utilization_args import (
    METRIC_RESOURCE,
    HighNodeUtilizationArgs,
    LowNodeUtilizationArgs,
)
from ..strategies import node_affinity, node_taints, pod_anti_affinity, topology_spread
from ..strategies.node_utilization import HIGH_NAME, LOW_NAME
from .utilization_arrays import UtilizationArrays, hnu_under, lnu_over_after, lnu_vector

__all__ = [
    "PlacementRules",
    "PlacementState",
    "Refusal",
    "placement_scores",
    "policy_refusals",
]

Pod = Mapping[str, Any]
Node = Mapping[str, Any]
MAX_SCORE: Final = 10
NEUTRAL_SCORE: Final = 5


class PlacementState(EvictorInputs, Protocol):
    """The cluster as the extender's caches hold it."""

    def descheduler_nodes(self) -> Mapping[str, Node]:
        """The cycle's nodes: ready, matching the policy's nodeSelector."""
        ...

    def pods_in_namespace(self, namespace: str) -> Sequence[Pod]:
        """The namespace's pods bound to a node and not finished."""
        ...

    def utilization(
        self, args: LowNodeUtilizationArgs | HighNodeUtilizationArgs
    ) -> UtilizationArrays | None:
        """Usage of the descheduler's nodes as the plugin measures it; ``None`` when unknown
        (metrics not collected yet)."""
        ...


@dataclass(frozen=True)
class Refusal:
    node: str
    strategy: str
    profile: str
    message: str


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
            node_taints.NAME,
            node_affinity.NAME,
            pod_anti_affinity.NAME,
            topology_spread.NAME,
            LOW_NAME,
            HIGH_NAME,
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
    return str((pod.get("metadata") or {}).get("namespace", ""))


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
    names = [name for name in candidates if name in nodes]
    if not names:
        return refused
    evictable = _Evictable(rules, state, pod)
    for rule in rules.rules:
        open_names = [n for n in names if n not in refused]
        if not open_names:
            break
        if rule.name == LOW_NAME:
            if rule.args.evictable_namespaces.allows(_namespace(pod)) and evictable(rule.profile):
                _refuse_over_utilized(pod, open_names, rule, state, refused)
            continue
        if rule.name == HIGH_NAME or not _in_scope(pod, rule.args):
            continue
        if not evictable(rule.profile):
            continue
        if rule.name == node_taints.NAME:
            _refuse_taints(pod, open_names, rule, nodes, refused)
        elif rule.name == node_affinity.NAME:
            _refuse_affinity(pod, open_names, rule, nodes, refused)
        elif rule.name == pod_anti_affinity.NAME:
            _refuse_anti_affinity(pod, open_names, rule, state, refused)
        elif rule.name == topology_spread.NAME:
            _refuse_spread(pod, open_names, rule, state, refused, evictable=evictable)
    return refused


def _refusal(rule: _Rule, node: str, why: str) -> Refusal:
    return Refusal(
        node=node,
        strategy=rule.name,
        profile=rule.profile,
        message=f"descheduler policy: {rule.name} (profile {rule.profile}) would evict the "
        f"pod from this node: {why}",
    )


def _refuse_taints(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    nodes: Mapping[str, Node],
    refused: dict[str, Refusal],
) -> None:
    args: RemovePodsViolatingNodeTaintsArgs = rule.args
    for name in names:
        taints = (nodes[name].get("spec") or {}).get("taints") or ()
        taint = node_taints.violating_taint(pod, taints, args) if taints else None
        if taint is not None:
            text = node_taints.taint_text(taint)
            refused[name] = _refusal(rule, name, f"taint {text} is not tolerated")


def _refuse_affinity(
    pod: Pod,
    names: Sequence[str],
    rule: _Rule,
    nodes: Mapping[str, Node],
    refused: dict[str, Refusal],
) -> None:
    args: RemovePodsViolatingNodeAffinityArgs = rule.args
    for kind in args.node_affinity_type:
        if kind == NODE_AFFINITY_REQUIRED and node_affinity.has_required_affinity(pod):
            for name in names:
                if name not in refused and node_affinity.violates_required(pod, nodes[name]):
                    refused[name] = _refusal(rule, name, "required node affinity not matched")
        elif kind == NODE_AFFINITY_PREFERRED and node_affinity.has_preferred_affinity(pod):
            best = node_affinity.best_preferred_weight(pod, list(nodes.values()))
            preferred = PreferredNodeAffinity.of_pod(pod)
            for name in names:
                node = nodes[name]
                weight = preferred.weight(name, (node.get("metadata") or {}).get("labels") or {})
                if name not in refused and weight < best:
                    refused[name] = _refusal(
                        rule, name, f"preferred node affinity weight {weight} < best {best}"
                    )


def _scoped_pods(
    state: PlacementState, namespaces: Sequence[str], args: Any
) -> dict[str, list[Pod]]:
    found: dict[str, list[Pod]] = {}
    for namespace in namespaces:
        found[namespace] = [p for p in state.pods_in_namespace(namespace) if _in_scope(p, args)]
    return found


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
    scope: set[str] = set()
    for term in terms:
        scope.update(term.namespaces or state.namespace_labels.keys())
    by_namespace = _scoped_pods(state, sorted(scope), args)
    nodes = state.descheduler_nodes()
    for name in names:
        other = pod_anti_affinity.anti_affinity_conflict(
            pod, nodes[name], by_namespace, nodes, state.namespace_labels
        )
        if other is not None:
            meta = other.get("metadata") or {}
            refused[name] = _refusal(
                rule, name, f"its anti-affinity selects {meta.get('namespace')}/{meta.get('name')}"
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
    node_list = list(nodes.values())
    namespace = _namespace(pod)
    own = pod_key(pod)
    pods = [
        p
        for p in state.pods_in_namespace(namespace)
        if pod_key(p) != own and _in_scope(p, args) and evictable.other(rule.profile, p)
    ]
    labels = (pod.get("metadata") or {}).get("labels") or {}
    found: dict[str, topology_spread.SpreadConstraint] = {}
    for holder in [pod, *pods]:
        for constraint in topology_spread.spread_constraints(holder, args.constraints):
            if constraint.selector.matches(labels):
                found.setdefault(constraint.identity, constraint)
    constraints = list(found.values())
    if not constraints:
        return
    labels_of = {n: (nodes[n].get("metadata") or {}).get("labels") or {} for n in names}
    for constraint in constraints:
        placed = _SpreadAfterPlacement(topology_spread.domain_counts(constraint, node_list, pods))
        for name in names:
            value = labels_of[name].get(constraint.topology_key)
            if name in refused or value is None:
                continue
            size, total = placed.evicted_from(value, constraint.max_skew)
            if size is not None:
                refused[name] = _refusal(
                    rule,
                    name,
                    f"{constraint.topology_key}={value} would hold {size} of {total} matching "
                    f"pods (skew above {constraint.max_skew})",
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
    for position, flag in zip(indices, over.tolist(), strict=True):
        if flag:
            name = arrays.names[position]
            refused[name] = _refusal(rule, name, "the node would be above its target utilization")


def placement_scores(
    pod: Pod, candidates: Sequence[str], *, rules: PlacementRules, state: PlacementState
) -> dict[str, int]:
    """``prioritize`` scores 0–10: 5 by default, +5 on LowNodeUtilization's under-utilized
    nodes, −5 on HighNodeUtilization's (it empties them); clamped to [0, 10]."""
    scores = dict.fromkeys(candidates, NEUTRAL_SCORE)
    for rule in rules.rules:
        if rule.name not in (LOW_NAME, HIGH_NAME):
            continue
        arrays = state.utilization(rule.args)
        if arrays is None:
            continue
        if rule.name == LOW_NAME:
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
