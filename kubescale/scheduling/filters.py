"""kube-scheduler's in-tree Filter plugins, and the FitError message of a pod that fits nowhere.

The default profile runs its filters in this order and a node's verdict is the first plugin that
rejects it (``frameworkImpl.RunFilterPlugins``); the reasons are upstream's strings:

==================  ======================================================  =================
plugin              reason                                                  code
==================  ======================================================  =================
NodeUnschedulable   ``node(s) were unschedulable``                          unresolvable
TaintToleration     ``node(s) had untolerated taint {key: value}``          unresolvable
NodeAffinity        ``node(s) didn't match Pod's node affinity/selector``   unresolvable
NodePorts           ``node(s) didn't have free ports for the requested      unschedulable
                    pod ports``
NodeResourcesFit    ``Too many pods``, ``Insufficient cpu`` ... (all)        unschedulable
PodTopologySpread   ``node(s) didn't match pod topology spread              unresolvable
                    constraints (missing required label)``
                    ``node(s) didn't match pod topology spread              unschedulable
                    constraints``
InterPodAffinity    ``node(s) didn't match pod affinity rules``             unresolvable
                    ``node(s) didn't match pod anti-affinity rules``        unschedulable
                    ``node(s) didn't satisfy existing pods anti-affinity    unschedulable
                    rules``
==================  ======================================================  =================

"Unresolvable" is ``UnschedulableAndUnresolvable``: preemption cannot help there. Taints count
with effects NoSchedule and NoExecute; a cordoned node (``spec.unschedulable``) admits pods that
tolerate ``node.kubernetes.io/unschedulable:NoSchedule``. Node selector terms are ORed, their
expressions (In, NotIn, Exists, DoesNotExist, Gt, Lt) and ``matchFields`` (``metadata.name``)
ANDed; a term with neither matches nothing. NodePorts lives in :mod:`.node_ports`,
PodTopologySpread in :mod:`.topology_spread`, InterPodAffinity in :mod:`.inter_pod_affinity`;
the scheduler runs it last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubescale.objects.meta import LabelSelectorRequirement
from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import NodeSelectorTerm as NodeSelectorTermObject
from kubescale.objects.pod import Pod, Toleration
from kubescale.objects.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_IN,
    Requirement,
    SelectorError,
    new_requirement,
)
from kubescale.objects.views import meta, spec_of, status_of

from .node_ports import UsedPorts
from .pod_resources import Amounts

__all__ = [
    "REASON_NODE_AFFINITY",
    "REASON_TOO_MANY_PODS",
    "REASON_UNSCHEDULABLE",
    "FilterStatus",
    "NodeAffinity",
    "NodeSelectorTerm",
    "NodeState",
    "PreferredNodeAffinity",
    "first_untolerated_taint",
    "fit_error_message",
    "insufficient_resources",
    "is_node_ready",
    "parse_node_selector_term",
    "tolerates",
]

REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
REASON_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS: Final = "Too many pods"
PREEMPTION_NOT_HELPFUL: Final = "Preemption is not helpful for scheduling"
NO_VICTIMS: Final = "No preemption victims found for incoming pod"
UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"
FILTERED_EFFECTS: Final = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class FilterStatus:
    """Why one node was rejected: the plugin's reasons, and whether preemption could help."""

    reasons: tuple[str, ...]
    unresolvable: bool


# ----------------------------------------------------------------------------- taints


def is_node_ready(node: Node) -> bool:
    """The descheduler's ``IsReady`` (also the one-brain budget's destinations): no ``Ready``
    condition with a status other than ``True``."""
    for condition in status_of(node).get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return False
    return True


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``: effect (empty = any), key (empty = any), then
    ``Exists`` or ``Equal`` (the default) on the value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def first_untolerated_taint(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    effects: Sequence[str] = FILTERED_EFFECTS,
) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint (in node order) nothing tolerates."""
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


# ---------------------------------------------------------------------- node affinity

_NODE_SELECTOR_OPERATORS: Final = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
    "Gt": GREATER_THAN,
    "Lt": LESS_THAN,
}


def _requirement(expression: LabelSelectorRequirement) -> Requirement:
    operator = _NODE_SELECTOR_OPERATORS.get(str(expression.get("operator")))
    if operator is None:
        raise SelectorError(f"{expression.get('operator')!r} is not a valid node selector operator")
    return new_requirement(str(expression.get("key", "")), operator, expression.get("values") or [])


@dataclass(frozen=True)
class _Term:
    labels: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.labels) and all(
            r.matches({"metadata.name": name}) for r in self.fields
        )


NodeSelectorTerm = _Term
"""One ``NodeSelectorTerm``: its label expressions and ``metadata.name`` fields, ANDed."""


def parse_node_selector_term(term: NodeSelectorTermObject) -> NodeSelectorTerm | None:
    """A ``NodeSelectorTerm``; ``None`` when it matches no node (empty, invalid, or a field
    other than ``metadata.name``)."""
    expressions = term.get("matchExpressions") or []
    match_fields = term.get("matchFields") or []
    if not expressions and not match_fields:
        return None
    try:
        labels = tuple(_requirement(e) for e in expressions)
        fields = tuple(_requirement(e) for e in match_fields)
    except SelectorError:
        return None
    if any(f.key != "metadata.name" for f in fields):
        return None
    return _Term(labels=labels, fields=fields)


@dataclass(frozen=True)
class PreferredNodeAffinity:
    """``preferredDuringSchedulingIgnoredDuringExecution``: (weight, term) pairs; a term that
    matches nothing (empty or invalid) never adds its weight."""

    terms: tuple[tuple[int, NodeSelectorTerm | None], ...] = ()

    @classmethod
    def of_pod(cls, pod: Pod) -> PreferredNodeAffinity:
        affinity = (spec_of(pod).get("affinity") or {}).get("nodeAffinity") or {}
        preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        return cls(
            terms=tuple(
                (
                    int(entry.get("weight") or 0),
                    parse_node_selector_term(entry.get("preference") or {}),
                )
                for entry in preferred
            )
        )

    def weight(self, name: str, labels: Mapping[str, str]) -> int:
        """Σ weight of the terms matching the node (``GetNodeWeightGivenPodPreferredAffinity``)."""
        return sum(w for w, term in self.terms if term is not None and term.matches(name, labels))

    def label_keys(self) -> tuple[str, ...] | None:
        """The node labels the terms read (sorted); ``None`` when a term reads the node's name
        (``matchFields``), so that nodes cannot be told apart by labels alone."""
        terms = [term for _, term in self.terms if term is not None]
        if any(term.fields for term in terms):
            return None
        return tuple(sorted({r.key for term in terms for r in term.labels}))

    def weights(self, nodes: Mapping[str, Mapping[str, str]]) -> dict[str, int]:
        """:meth:`weight` of every node (name → labels); nodes that agree on the labels the
        terms read are scored once."""
        terms = [term for _, term in self.terms if term is not None]
        if any(term.fields for term in terms):
            return {name: self.weight(name, labels) for name, labels in nodes.items()}
        keys = sorted({r.key for term in terms for r in term.labels})
        memo: dict[tuple[str | None, ...], int] = {}
        found: dict[str, int] = {}
        for name, labels in nodes.items():
            projected = tuple(labels.get(key) for key in keys)
            weight = memo.get(projected)
            if weight is None:
                weight = memo[projected] = self.weight(name, labels)
            found[name] = weight
        return found


@dataclass(frozen=True)
class NodeAffinity:
    """``nodeaffinity.GetRequiredNodeAffinity``: ``spec.nodeSelector`` AND the required terms."""

    selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[_Term, ...] | None = None  # None: no required node affinity

    @classmethod
    def of_pod(cls, pod: Pod) -> NodeAffinity:
        spec = spec_of(pod)
        selector = tuple(sorted((spec.get("nodeSelector") or {}).items()))
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or None
        if required is None:
            return cls(selector=selector)
        terms: list[_Term] = []
        for term in required.get("nodeSelectorTerms") or []:
            expressions = term.get("matchExpressions") or []
            match_fields = term.get("matchFields") or []
            if not expressions and not match_fields:
                continue  # an empty term matches no objects
            try:
                labels = tuple(_requirement(e) for e in expressions)
                fields = tuple(_requirement(e) for e in match_fields)
            except SelectorError:
                continue  # an invalid term matches nothing (the lazy-error selector)
            if any(f.key != "metadata.name" for f in fields):
                continue
            terms.append(_Term(labels=labels, fields=fields))
        return cls(selector=selector, terms=tuple(terms))

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        for key, value in self.selector:
            if labels.get(key) != value:
                return False
        if self.terms is None:
            return True
        return any(term.matches(name, labels) for term in self.terms)


# ----------------------------------------------------------------------- node state


@dataclass
class NodeState:
    """One node as the scheduler's cache sees it during a step (updated as pods are bound)."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Amounts
    requested: Amounts = field(default_factory=dict)
    non_zero_requested: Amounts = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    used_ports: UsedPorts = field(default_factory=UsedPorts)
    """The host ports the pods on it hold (NodePorts; kept by the snapshot)."""

    @classmethod
    def of_node(cls, node: Node, allocatable: Amounts) -> NodeState:
        spec = spec_of(node)
        return cls(
            name=meta(node).name,
            labels=dict(meta(node).labels),
            taints=tuple(spec.get("taints") or ()),
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=allocatable,
        )

    def copy(self) -> NodeState:
        """An independent state with the same node and pods (what a snapshot changes —
        requests, pods, ports — copied; the node's own fields shared, never changed)."""
        return NodeState(
            name=self.name,
            labels=self.labels,
            taints=self.taints,
            unschedulable=self.unschedulable,
            allocatable=self.allocatable,
            requested=dict(self.requested),
            non_zero_requested=dict(self.non_zero_requested),
            pods=list(self.pods),
            used_ports=self.used_ports.copy(),
        )


def _is_scalar_resource(name: str) -> bool:
    """Resources NodeResourcesFit checks besides cpu/memory/ephemeral-storage."""
    return "/" in name or name.startswith("hugepages-")


def insufficient_resources(
    requests: Mapping[str, int], node: NodeState, ignored: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """``fitsRequest``: pods count first, then cpu, memory, ephemeral-storage, the rest."""
    reasons: list[str] = []
    if len(node.pods) + 1 > node.allocatable.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    for name in ("cpu", "memory", "ephemeral-storage"):
        wanted = requests.get(name, 0)
        if wanted > 0 and wanted > node.allocatable.get(name, 0) - node.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    for name in sorted(requests):
        wanted = requests[name]
        if not _is_scalar_resource(name) or wanted == 0 or name in ignored:
            continue
        if wanted > node.allocatable.get(name, 0) - node.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return tuple(reasons)


# --------------------------------------------------------------------- the message


def _histogram(statuses: Iterable[tuple[str, ...]]) -> str:
    """``sortReasonsHistogram``: ``"<count> <reason>"`` per reason, sorted as strings."""
    counts: dict[str, int] = {}
    for reasons in statuses:
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


def fit_error_message(
    *,
    num_nodes: int,
    statuses: Mapping[str, FilterStatus],
    preemption_policy: str | None,
) -> str:
    """``FitError.Error()`` followed by the DefaultPreemption PostFilter's message.

    No preemption is simulated: nodes rejected for an unresolvable reason are "not helpful",
    the others report that no victims were found (what upstream says when preemption fails).
    """
    message = f"0/{num_nodes} nodes are available:"
    reasons = _histogram(status.reasons for _, status in sorted(statuses.items()))
    if reasons:
        message += f" {reasons}."
    if preemption_policy == "Never":
        return message + " preemption: not eligible due to preemptionPolicy=Never."
    preemption = _histogram(
        (PREEMPTION_NOT_HELPFUL if status.unresolvable else NO_VICTIMS,)
        for _, status in sorted(statuses.items())
    )
    return message + f" preemption: 0/{num_nodes} nodes are available: {preemption}."
