"""RemovePodsViolatingNodeTaints (Deschedule; upstream ``removepodsviolatingnodetaints``).

A taint of the pod's node is *considered* when (:func:`considered_taints`):

* its effect is ``NoSchedule`` — or ``PreferNoSchedule`` with ``includePreferNoSchedule``
  (``NoExecute`` is never considered: the taint manager evicts those pods itself);
* no ``excludedTaints`` entry matches it, and an ``includedTaints`` list (when given) has an
  entry matching it — an entry ``key`` matches the taint's key, ``key=value`` its key and value.

For each node, each pod passing the namespaces, the label selector, ``Filter`` and
``PreEvictionFilter`` is evicted when it does not tolerate every considered taint of its node
(:func:`violating_taint`, shared with the scheduler extender).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from kubescale.objects.views import Meta, spec_of
from kubescale.scheduling.cycle_view import node_name
from kubescale.scheduling.filters import tolerates

from ..framework.eviction import EvictionResult
from ..framework.strategy_context import StrategyContext, StrategyRun
from ..policy.common_args import labels_match
from ..policy.strategy_args import RemovePodsViolatingNodeTaintsArgs

__all__ = ["NAME", "considered_taints", "remove_pods_violating_node_taints", "violating_taint"]

NAME: Final = "RemovePodsViolatingNodeTaints"
Pod = Mapping[str, Any]


def _entry_matches(entry: str, taint: Mapping[str, Any]) -> bool:
    key, sep, value = entry.partition("=")
    if taint.get("key", "") != key:
        return False
    return not sep or (taint.get("value") or "") == value


def considered_taints(
    taints: Iterable[Mapping[str, Any]], args: RemovePodsViolatingNodeTaintsArgs
) -> list[Mapping[str, Any]]:
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
    pod: Pod, taints: Sequence[Mapping[str, Any]], args: RemovePodsViolatingNodeTaintsArgs
) -> Mapping[str, Any] | None:
    """The first considered taint of ``taints`` the pod does not tolerate, if any."""
    tolerations = spec_of(pod).get("tolerations") or ()
    for taint in considered_taints(taints, args):
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value") or ""
    return f"{taint.get('key', '')}{'=' + value if value else ''}:{taint.get('effect', '')}"


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
