"""Expanders: which expansion option wins (``pkg/expander``, reference §2.4).

Each expander is a filter ``best_options(options) -> options``; ``--expander`` names a chain
(``factory/chain.go``): the filters run in order, the chain stops as soon as exactly one option
is left, and ``random`` picks among what remains (no option left: no scale-up).

* ``random`` — a uniform pick (the injected ``random.Random``);
* ``most-pods`` — the options scheduling the most pods (ties kept);
* ``least-waste`` — the least ``(cpu_avail − cpu_req)/cpu_avail + (mem_avail − mem_req)/mem_avail``
  with ``avail`` = template **capacity** × node count and ``req`` the regular containers' requests
  of the option's pods (ties kept);
* ``least-nodes`` — the fewest nodes (options adding 0 nodes ignored);
* ``price`` — :mod:`.price_expander`;
* ``priority`` — :mod:`.priority_expander` (the ``cluster-autoscaler-priority-expander``
  ConfigMap).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubescale.controllers.autoscaler.expander.expansion_option import (
    ExpansionOption,
    regular_requests,
)
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode

__all__ = [
    "ExpanderChain",
    "ExpanderFilter",
    "LeastNodes",
    "LeastWaste",
    "MostPods",
    "RandomPick",
]

Options = list[ExpansionOption]


class ExpanderFilter(Protocol):
    name: str

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> Options: ...


@dataclass
class RandomPick:
    rng: random.Random
    name: str = "random"

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> Options:
        if not options:
            return []
        return [options[self.rng.randrange(len(options))]]


class MostPods:
    name = "most-pods"

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> Options:
        if not options:
            return []
        most = max(len(o.pods) for o in options)
        return [o for o in options if len(o.pods) == most]


class LeastNodes:
    name = "least-nodes"

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> Options:
        counted = [o for o in options if o.node_count != 0]
        if not counted:
            return []
        least = min(o.node_count for o in counted)
        return [o for o in counted if o.node_count == least]


def waste_score(option: ExpansionOption, template: TemplateNode) -> float | None:
    """``least-waste``'s blended waste (``None`` when the template has no cpu or memory)."""
    cpu = memory = 0
    for pod in option.pods:
        pod_cpu, pod_memory = regular_requests(pod)
        cpu += pod_cpu
        memory += pod_memory
    avail_cpu = template.capacity.get("cpu", 0) * option.node_count
    avail_memory = template.capacity.get("memory", 0) * option.node_count
    if avail_cpu <= 0 or avail_memory <= 0:
        return None
    return (avail_cpu - cpu) / avail_cpu + (avail_memory - memory) / avail_memory


class LeastWaste:
    name = "least-waste"

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> Options:
        best: Options = []
        best_score = 0.0
        for option in options:
            template = templates.get(option.group.id)
            if template is None:
                continue
            score = waste_score(option, template)
            if score is None:
                continue
            if not best or score < best_score:
                best, best_score = [option], score
            elif score == best_score:
                best.append(option)
        return best


class ExpanderChain:
    """The ``--expander`` chain (module docstring)."""

    def __init__(self, filters: Sequence[ExpanderFilter], *, rng: random.Random) -> None:
        self.filters = list(filters)
        self.fallback = RandomPick(rng=rng)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.filters]

    def best_option(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> ExpansionOption | None:
        remaining: Options = list(options)
        for expander in self.filters:
            remaining = expander.best_options(remaining, templates)
            if len(remaining) == 1:
                return remaining[0]
        picked = self.fallback.best_options(remaining, templates)
        return picked[0] if picked else None


ExpanderFactory = Callable[[str], ExpanderFilter]
