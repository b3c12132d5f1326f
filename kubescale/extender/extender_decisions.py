"""What the extender answers for one pod: which candidate nodes pass, and their scores.

Filter (:func:`decide_filter`), for the candidates kube-scheduler sends (those that passed its
own filters):

1. the nodes the coordination layer vetoes (:class:`~kubescale.coordination.ports.PlacementVeto`:
   in one brain the nodes the pod's owner was evicted from within the eviction memory's
   duration; in ``separate``, upstream's, none) are refused as ``FailedAndUnresolvableNodes``
   ("recently descheduled <kind>/<name> from <node>"):
   preemption cannot change that, so the scheduler does not try;
2. the nodes the active descheduler policy would evict the pod from
   (:func:`~kubescale.coordination.placement_rules.policy_refusals`) are
   refused — taints and node affinity as ``FailedAndUnresolvableNodes``, the rest (anti-affinity,
   topology spread, over-utilization: evicting other pods could change them) as ``FailedNodes``;
3. *never strand a pod on policy grounds*: when the policy would refuse every candidate left,
   none is refused for policy reasons and :attr:`FilterDecision.policy_fallback` is set (the pod
   runs where it fits, as without the extender, rather than stay Pending). The eviction memory
   is not relaxed: it expires by itself.

Prioritize (:func:`decide_prioritize`):
:func:`~kubescale.coordination.placement_rules.placement_scores` for every candidate, in the
request's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from kubescale.coordination.placement_rules import (
    PlacementRules,
    PlacementState,
    placement_scores,
    policy_refusals,
)
from kubescale.coordination.ports import PlacementVeto
from kubescale.objects.pod import Pod

__all__ = ["FilterDecision", "decide_filter", "decide_prioritize"]


@dataclass(frozen=True)
class FilterDecision:
    passed: tuple[str, ...]
    failed: Mapping[str, str]
    unresolvable: Mapping[str, str]
    policy_fallback: bool = False
    """Every candidate left would have been refused by the policy: none was (step 3)."""
    refused_by: Mapping[str, str] | None = None
    """Node → the strategy (or ``EvictionMemory``) that refused it."""


def decide_filter(
    pod: Pod,
    candidates: Sequence[str],
    *,
    rules: PlacementRules,
    state: PlacementState,
    veto: PlacementVeto | None,
    now: datetime,
) -> FilterDecision:
    """The filter's answer (module docstring). A node offered twice is judged once: with the
    duplicates counted, "the policy refuses every candidate" (step 3) could never hold."""
    candidates = list(dict.fromkeys(candidates))
    remembered = veto.refused_nodes(pod, now) if veto is not None else {}
    unresolvable = {n: remembered[n].describe() for n in candidates if n in remembered}
    refused_by = dict.fromkeys(unresolvable, "EvictionMemory")
    remaining = [n for n in candidates if n not in unresolvable]
    refusals = policy_refusals(pod, remaining, rules=rules, state=state)
    if remaining and len(refusals) == len(remaining):
        return FilterDecision(
            passed=tuple(remaining),
            failed={},
            unresolvable=unresolvable,
            policy_fallback=True,
            refused_by=refused_by,
        )
    failed: dict[str, str] = {}
    for name, refusal in refusals.items():
        target = unresolvable if refusal.unresolvable else failed
        target[name] = refusal.message
        refused_by[name] = refusal.strategy
    return FilterDecision(
        passed=tuple(n for n in remaining if n not in refusals),
        failed=failed,
        unresolvable=unresolvable,
        refused_by=refused_by,
    )


def decide_prioritize(
    pod: Pod,
    candidates: Sequence[str],
    *,
    rules: PlacementRules,
    state: PlacementState,
) -> list[tuple[str, int]]:
    scores = placement_scores(pod, candidates, rules=rules, state=state)
    return [(name, scores[name]) for name in candidates]
