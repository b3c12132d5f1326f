"""The recommender in a simulated run: its flags there, and what it reports on the timeline.

:func:`simulated_recommender_settings` reads a scenario's ``kubescale: {vpa-recommender:
{...}}`` flags: ``kubescale serve``'s recommender flags without the dashes
(``recommender-interval: 1m``, ``memory-saver: true``, ``vpa-object-namespace: shop`` ...).
Flags that make no sense without a real cluster are refused: ``storage`` and the Prometheus
history flags (no Prometheus; history comes from checkpoints, as by default), ``vpa-recommender``
(the scenario's ``kubescale`` section decides), ``update-worker-count`` and ``min-checkpoints``
(no effect anywhere).

:class:`SimulatedRecommender` wraps
:class:`~kubescale.controllers.vpa.recommender.recommender_loop.RecommenderLoop` for the runner: it
settles like the loop's informers, and after each iteration it reports every container whose
``target`` changed in a status the loop wrote, as ``("vpa-recommendation", "<namespace>/<vpa>",
"<container>: target cpu=... memory=... (lower ..., upper ...)")`` — the report's record of the
recommendations converging.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kubescale.controllers.vpa.recommender.recommender_config import (
    RecommenderConfigError,
    RecommenderSettings,
    add_recommender_arguments,
    recommender_settings_from_args,
)
from kubescale.controllers.vpa.recommender.recommender_loop import LOOP_NAME, RecommenderLoop
from kubescale.sim.scenario.component_flags import component_flag_names, parse_component_flags

__all__ = [
    "RECOMMENDATION_EVENT",
    "SimulatedRecommender",
    "simulated_recommender_flags",
    "simulated_recommender_settings",
]

RECOMMENDATION_EVENT: Final = "vpa-recommendation"
"""Timeline kind of a VPA container's new target (subject ``namespace/vpa``)."""

_ONLY_IN_SERVE: Final = frozenset(
    {
        "vpa-recommender",
        "storage",
        "update-worker-count",
        "min-checkpoints",
        "prometheus-address",
        "prometheus-insecure",
        "prometheus-cadvisor-job-name",
        "history-length",
        "history-resolution",
        "history-cpu-metric",
        "history-memory-metric",
        "prometheus-query-timeout",
        "pod-label-prefix",
        "metric-for-pod-labels",
        "pod-namespace-label",
        "pod-name-label",
        "container-namespace-label",
        "container-pod-name-label",
        "container-name-label",
        "username",
        "password",
        "prometheus-bearer-token",
        "prometheus-bearer-token-file",
    }
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_recommender_arguments(parser, namespace_flags=True)


def simulated_recommender_flags() -> frozenset[str]:
    """The flag names (without dashes) a scenario may give the recommender."""
    return component_flag_names(_add_arguments, exclude=_ONLY_IN_SERVE)


def simulated_recommender_settings(flags: Mapping[str, Any]) -> RecommenderSettings:
    """The settings of a scenario's recommender; :class:`RecommenderConfigError` names the flag."""
    args = parse_component_flags(
        flags,
        component="vpa-recommender",
        add_arguments=_add_arguments,
        allowed=simulated_recommender_flags(),
        error=RecommenderConfigError,
    )
    return recommender_settings_from_args(args)


def _resources_text(resources: object) -> str:
    values = resources if isinstance(resources, Mapping) else {}
    return " ".join(f"{name}={values[name]}" for name in sorted(values))


class SimulatedRecommender:
    """The recommender loop of a run (module docstring)."""

    name = LOOP_NAME

    def __init__(self, loop: RecommenderLoop) -> None:
        self.loop = loop
        self._targets: dict[tuple[str, str, str], str] = {}
        self._reports: list[tuple[str, str, str]] = []

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        return await self.loop.wait_for_resource_version(resource_version, within=within)

    async def run_once(self, now: datetime) -> None:
        await self.loop.run_once(now)
        for (namespace, name), status in self.loop.written:
            recommendation = status.get("recommendation") or {}
            for entry in recommendation.get("containerRecommendations") or []:
                container = str(entry.get("containerName") or "")
                target = _resources_text(entry.get("target"))
                key = (namespace, name, container)
                if self._targets.get(key) == target:
                    continue
                self._targets[key] = target
                detail = (
                    f"{container}: target {target} (lower "
                    f"{_resources_text(entry.get('lowerBound'))}, upper "
                    f"{_resources_text(entry.get('upperBound'))})"
                )
                self._reports.append((RECOMMENDATION_EVENT, f"{namespace}/{name}", detail))

    def drain_reports(self) -> list[tuple[str, str, str]]:
        """The changes of target since the last call (the runner's ``ReportingLoop``)."""
        reports, self._reports = self._reports, []
        return reports
