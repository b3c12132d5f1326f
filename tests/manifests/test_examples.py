"""The example files of manifests/examples parse as the components that read them do."""

from __future__ import annotations

import re
from typing import cast

from kubescale.controllers.autoscaler.expander.priority_expander import (
    PRIORITY_CONFIG_MAP,
    parse_priorities,
)
from kubescale.objects.config_map import ConfigMap

from .manifest_files import EXAMPLES, load_documents


def _priority(priorities: list[tuple[int, list[re.Pattern[str]]]], group: str) -> int | None:
    for priority, expressions in priorities:
        if any(expression.search(group) for expression in expressions):
            return priority
    return None


def test_the_priority_expander_example_parses_and_ranks_groups() -> None:
    (document,) = load_documents(EXAMPLES / "priority-expander.yaml")
    config_map = cast(ConfigMap, document)  # the YAML as the API server would serve it
    assert config_map["metadata"]["name"] == PRIORITY_CONFIG_MAP
    priorities = parse_priorities(config_map)
    # highest matching priority: reserved-* 100 (also matches .* at 10), spot 50, the rest 10
    assert _priority(priorities, "MachineDeployment/capi-system/reserved-a") == 100
    assert _priority(priorities, "MachineDeployment/capi-system/spot-b") == 50
    assert _priority(priorities, "MachineSet/default/workers") == 10
