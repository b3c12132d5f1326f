"""The ``--expander`` chain built from the settings (``expander/factory``)."""

from __future__ import annotations

import random
from collections.abc import Callable

from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.expander.expanders import (
    ExpanderChain,
    ExpanderFilter,
    LeastNodes,
    LeastWaste,
    MostPods,
    RandomPick,
)
from kubescale.controllers.autoscaler.expander.price_expander import PriceExpander
from kubescale.controllers.autoscaler.expander.priority_expander import PriorityExpander
from kubescale.objects.config_map import ConfigMap

__all__ = ["build_expander"]


def build_expander(
    settings: AutoscalerSettings,
    *,
    rng: random.Random,
    cluster_nodes: int,
    config_map: Callable[[], ConfigMap | None],
) -> ExpanderChain:
    filters: list[ExpanderFilter] = []
    for name in settings.expander:
        if name == "random":
            filters.append(RandomPick(rng=rng))
        elif name == "most-pods":
            filters.append(MostPods())
        elif name == "least-waste":
            filters.append(LeastWaste())
        elif name == "least-nodes":
            filters.append(LeastNodes())
        elif name == "price":
            filters.append(PriceExpander(cluster_nodes=cluster_nodes))
        elif name == "priority":
            filters.append(PriorityExpander(config_map=config_map))
    return ExpanderChain(filters, rng=rng)
