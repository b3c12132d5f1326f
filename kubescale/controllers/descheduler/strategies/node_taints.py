"""RemovePodsViolatingNodeTaints (Deschedule; upstream ``removepodsviolatingnodetaints``).

A taint of the pod's node is *considered* when
(:func:`~kubescale.scheduling.descheduler_rules.considered_taints`):

* its effect is ``NoSchedule`` — or ``PreferNoSchedule`` with ``includePreferNoSchedule``
  (``NoExecute`` is never considered: the taint manager evicts those pods itself);
* no ``excludedTaints`` entry matches it, and an ``includedTaints`` list (when given) has an
  entry matching it — an entry ``key`` matches the taint's key, ``key=value`` its key and value.

For each node, each pod passing the namespaces, the label selector, ``Filter`` and
``PreEvictionFilter`` is evicted when it does not tolerate every considered taint of its node
(:func:`~kubescale.scheduling.descheduler_rules.violating_taint`, shared with the scheduler
extender).
"""

from __future__ import annotations

from typing import Final

from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_name
from kubescale.scheduling.descheduler_rules import (
    NODE_TAINTS,
    considered_taints,
    taint_text,
    violating_taint,
)
from kubescale.scheduling.policy.common_args import labels_match
from kubescale.scheduling.policy.strategy_args import RemovePodsViolatingNodeTaintsArgs

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun

__all__ = ["NAME", "remove_pods_violating_node_taints"]

NAME: Final = NODE_TAINTS


def remove_pods_violating_node_taints(
    ctx: StrategyContext, args: RemovePodsViolatingNodeTaintsArgs
) -> StrategyRun:
    for node in ctx.view.nodes:
        taints = list(spec_of(node).get("taints") or ())
        if not considered_taints(taints, args):
            continue
        name = node_name(node)
        for pod in ctx.view.pods_on(name):
            namespace = str(Meta(pod).raw.get("namespace", ""))
            if not args.namespaces.allows(namespace) or not labels_match(args.label_selector, pod):
                continue
            taint = violating_taint(pod, taints, args)
            if taint is None or not ctx.evictable(pod):
                continue
            result = yield from ctx.evict(pod, f"pod does not tolerate taint {taint_text(taint)}")
            if result is EvictionResult.NODE_LIMIT:
                break
            if result is EvictionResult.TOTAL_LIMIT:
                return
