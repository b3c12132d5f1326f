"""The ``price`` expander (``pkg/expander/price/price.go``).

For each option, over the next hour:

* ``priceSubScore = (node price × N + stabilization) / (Σ pod prices + stabilization)``, the
  stabilization being the price of a 500m cpu / 500 MiB pod;
* ``unfitness = max(preferred cpu / node cpu, node cpu / preferred cpu)`` against the preferred
  node of ``SimplePreferredNodeProvider``: clusters of ≤ 2 nodes prefer 1 cpu, ≤ 6 → 2,
  ≤ 20 → 4, ≤ 60 → 8, ≤ 200 → 16, larger → 32 cpus (capacity);
* ``suppressed = (unfitness − 1) × (1 − tanh((N − 1) / 15)) + 1``;
* ``score = suppressed × priceSubScore`` (×1000 for GPU nodes); the lowest score wins, ties
  kept. An option whose template is missing is skipped.

kubescale prices nodes and pods with :class:`~.pricing.PricingModel` (the group's
``price_per_hour``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kubescale.controllers.autoscaler.expander.expansion_option import ExpansionOption
from kubescale.controllers.autoscaler.expander.pricing import PricingModel
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.pod import Pod

__all__ = ["PriceExpander", "preferred_node_cpu"]

STABILIZATION_POD: Final[Pod] = {
    "metadata": {"name": "stabilize", "namespace": ""},
    "spec": {
        "containers": [
            {"name": "stabilize", "resources": {"requests": {"cpu": "500m", "memory": "500Mi"}}}
        ]
    },
}
GPU_UNFITNESS: Final = 1000.0
_GPU_RESOURCES: Final = ("nvidia.com/gpu", "amd.com/gpu")


def preferred_node_cpu(cluster_nodes: int) -> int:
    """Millicores of ``SimplePreferredNodeProvider``'s node for a cluster of that size."""
    for limit, cores in ((2, 1), (6, 2), (20, 4), (60, 8), (200, 16)):
        if cluster_nodes <= limit:
            return cores * 1000
    return 32 * 1000


@dataclass
class PriceExpander:
    cluster_nodes: int
    pricing: PricingModel = field(default_factory=PricingModel)
    name: str = "price"
    debug: dict[str, str] = field(default_factory=dict)
    """Per group id, upstream's debug line of the last call."""

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> list[ExpansionOption]:
        preferred = preferred_node_cpu(self.cluster_nodes)
        stabilization = self.pricing.pod_price(STABILIZATION_POD, 1.0)
        best: list[ExpansionOption] = []
        best_score = 0.0
        for option in options:
            template = templates.get(option.group.id)
            if template is None:
                continue
            node_price = self.pricing.node_price(
                price_per_hour=option.group.price_per_hour,
                capacity=template.capacity,
                hours=1.0,
            )
            total_node_price = node_price * option.node_count
            total_pod_price = sum(self.pricing.pod_price(p, 1.0) for p in option.pods)
            price_score = (total_node_price + stabilization) / (total_pod_price + stabilization)
            node_cpu = template.capacity.get("cpu", 0)
            if any(template.capacity.get(g, 0) > 0 for g in _GPU_RESOURCES):
                unfitness = GPU_UNFITNESS
            elif node_cpu > 0:
                unfitness = max(preferred / node_cpu, node_cpu / preferred)
            else:
                unfitness = 1.0
            suppressed = (unfitness - 1.0) * (1.0 - math.tanh((option.node_count - 1) / 15.0)) + 1.0
            score = suppressed * price_score
            self.debug[option.group.id] = (
                f"all_nodes_price={total_node_price:f} pods_price={total_pod_price:f} "
                f"stabilized_ratio={price_score:f} unfitness={unfitness:f} "
                f"suppressed={suppressed:f} final_score={score:f}"
            )
            if not best or best_score > score:
                best, best_score = [option], score
            elif best_score == score:
                best.append(option)
        return best
