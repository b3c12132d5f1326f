"""The ``priority`` expander and its ConfigMap (``pkg/expander/priority``).

ConfigMap ``cluster-autoscaler-priority-expander`` in the autoscaler's namespace, key
``priorities``: YAML mapping a priority (integer) to a list of regular expressions over node
group ids::

    10:
      - .*t2\\.large.*
    50:
      - .*m4\\.4xlarge.*

The ConfigMap is read again on every call. An option takes the highest priority whose list has
an expression matching its group id anywhere (``regexp.FindStringIndex``); the options with the
highest priority win (ties kept). A group no expression matches is dropped, with the Warning
event ``PriorityConfigMapNotMatchedGroup``; when no option matches at all, or the ConfigMap is
missing or does not parse, every option is returned unchanged (events
``PriorityConfigMapNoGroupMatched`` / ``PriorityConfigMapInvalid``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from kubescale.controllers.autoscaler.expander.expansion_option import ExpansionOption
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode

__all__ = [
    "PRIORITY_CONFIG_MAP",
    "PriorityConfigError",
    "PriorityExpander",
    "parse_priorities",
]

PRIORITY_CONFIG_MAP: Final = "cluster-autoscaler-priority-expander"
PRIORITIES_KEY: Final = "priorities"


class PriorityConfigError(ValueError):
    """The ConfigMap's ``priorities`` does not parse; the message says where."""


def parse_priorities(
    config_map: Mapping[str, Any] | None,
) -> list[tuple[int, list[re.Pattern[str]]]]:
    """``priority → compiled expressions``, highest priority first."""
    if config_map is None:
        raise PriorityConfigError(f"ConfigMap {PRIORITY_CONFIG_MAP} not found")
    text = (config_map.get("data") or {}).get(PRIORITIES_KEY)
    if not text:
        raise PriorityConfigError(f"ConfigMap {PRIORITY_CONFIG_MAP} has no key {PRIORITIES_KEY!r}")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PriorityConfigError(f"{PRIORITIES_KEY}: not YAML: {err}") from None
    if not isinstance(raw, dict):
        raise PriorityConfigError(f"{PRIORITIES_KEY}: want a mapping of priority to regexps")
    result: list[tuple[int, list[re.Pattern[str]]]] = []
    for key, expressions in raw.items():
        if isinstance(key, bool) or not isinstance(key, int):
            raise PriorityConfigError(f"{PRIORITIES_KEY}: priority {key!r} is not an integer")
        if not isinstance(expressions, list) or not all(isinstance(e, str) for e in expressions):
            raise PriorityConfigError(f"{PRIORITIES_KEY}: priority {key}: want a list of strings")
        try:
            compiled = [re.compile(e) for e in expressions]
        except re.error as err:
            raise PriorityConfigError(f"{PRIORITIES_KEY}: priority {key}: {err}") from None
        result.append((key, compiled))
    return sorted(result, key=lambda item: -item[0])


@dataclass
class PriorityExpander:
    """The filter; ``config_map`` reads the ConfigMap (the loop's informer cache)."""

    config_map: Callable[[], Mapping[str, Any] | None]
    name: str = "priority"
    warnings: list[tuple[str, str]] = field(default_factory=list)
    """(reason, message) of the Warning events the last call asked for."""

    def best_options(
        self, options: Sequence[ExpansionOption], templates: Mapping[str, TemplateNode]
    ) -> list[ExpansionOption]:
        self.warnings = []
        if not options:
            return []
        try:
            priorities = parse_priorities(self.config_map())
        except PriorityConfigError as err:
            self.warnings.append(("PriorityConfigMapInvalid", f"Priority expander: {err}"))
            return list(options)
        best: list[ExpansionOption] = []
        best_priority: int | None = None
        for option in options:
            group_id = option.group.id
            matched = next(
                (p for p, exprs in priorities if any(e.search(group_id) for e in exprs)), None
            )
            if matched is None:
                self.warnings.append(
                    (
                        "PriorityConfigMapNotMatchedGroup",
                        f"Priority expander: node group {group_id} not found in priority "
                        "expander configuration. The group won't be used.",
                    )
                )
                continue
            if best_priority is None or matched > best_priority:
                best, best_priority = [option], matched
            elif matched == best_priority:
                best.append(option)
        if not best:
            self.warnings.append(
                (
                    "PriorityConfigMapNoGroupMatched",
                    "Priority expander: no priorities info found for any of the expansion "
                    "options. Falling back to random choice.",
                )
            )
            return list(options)
        return best
