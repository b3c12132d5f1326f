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
``PriorityConfigMapNoGroupMatched`` / ``PriorityConfigMapInvalid`` with upstream's texts:
"Wrong configmap for priority expander, doesn't contain priorities key. Ignoring update." for a
missing key, "Wrong configuration for priority expander: <reason>. Ignoring update." for an
empty or malformed value).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import yaml

from kubescale.controllers.autoscaler.expander.expansion_option import ExpansionOption
from kubescale.controllers.autoscaler.simulator.template_nodes import TemplateNode
from kubescale.objects.config_map import ConfigMap

__all__ = [
    "PRIORITY_CONFIG_MAP",
    "PriorityConfigError",
    "PriorityExpander",
    "parse_priorities",
]

PRIORITY_CONFIG_MAP: Final = "cluster-autoscaler-priority-expander"
PRIORITIES_KEY: Final = "priorities"


class PriorityConfigError(ValueError):
    """The ConfigMap's ``priorities`` does not parse; the message is upstream's event text."""


def _wrong_configuration(reason: str) -> str:
    """``reloadConfigMap``'s event text for a value that does not parse."""
    return f"Wrong configuration for priority expander: {reason}. Ignoring update."


def parse_priorities(
    config_map: ConfigMap | None,
) -> list[tuple[int, list[re.Pattern[str]]]]:
    """``priority → compiled expressions``, highest priority first."""
    if config_map is None:
        raise PriorityConfigError(f"Priority expander config map {PRIORITY_CONFIG_MAP} not found")
    data = config_map.get("data") or {}
    if PRIORITIES_KEY not in data:
        # upstream ``reloadConfigMap`` (pkg/expander/priority/priority.go): the key is missing
        raise PriorityConfigError(
            f"Wrong configmap for priority expander, doesn't contain {PRIORITIES_KEY} key. "
            "Ignoring update."
        )
    text = data[PRIORITIES_KEY]
    if not text:
        # upstream ``parsePrioritiesYAMLString``'s error, wrapped by ``reloadConfigMap`` as
        # "Wrong configuration for priority expander: %v. Ignoring update."
        raise PriorityConfigError(
            _wrong_configuration(
                f"priority configuration in {PRIORITY_CONFIG_MAP} configmap is empty; please "
                "provide valid configuration"
            )
        )
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PriorityConfigError(
            _wrong_configuration(f"Can't parse YAML with priorities in the configmap: {err}")
        ) from None
    if not isinstance(raw, dict):
        raise PriorityConfigError(
            _wrong_configuration(
                "Can't parse YAML with priorities in the configmap: want a mapping of priority "
                "to regexps"
            )
        )
    result: list[tuple[int, list[re.Pattern[str]]]] = []
    for key, expressions in raw.items():
        if isinstance(key, bool) or not isinstance(key, int):
            raise PriorityConfigError(
                _wrong_configuration(
                    "Can't parse YAML with priorities in the configmap: "
                    f"priority {key!r} is not an integer"
                )
            )
        if not isinstance(expressions, list) or not all(isinstance(e, str) for e in expressions):
            raise PriorityConfigError(
                _wrong_configuration(
                    "Can't parse YAML with priorities in the configmap: "
                    f"priority {key}: want a list of strings"
                )
            )
        compiled = []
        for expression in expressions:
            try:
                compiled.append(re.compile(expression))
            except re.error as err:
                raise PriorityConfigError(
                    _wrong_configuration(
                        f"Can't compile regexp rule for priority {key} and rule {expression}: {err}"
                    )
                ) from None
        result.append((key, compiled))
    return sorted(result, key=lambda item: -item[0])


@dataclass
class PriorityExpander:
    """The filter; ``config_map`` reads the ConfigMap (the loop's informer cache)."""

    config_map: Callable[[], ConfigMap | None]
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
            self.warnings.append(("PriorityConfigMapInvalid", str(err)))
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
