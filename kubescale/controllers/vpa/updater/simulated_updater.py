"""The updater in a simulated run: its flags there, and what it reports on the timeline.

:func:`simulated_updater_settings` reads a scenario's ``kubescale: {vpa-updater: {...}}`` flags:
``kubescale serve``'s updater flags without the dashes (``updater-interval: 1m``,
``eviction-tolerance: 0.25``, ``min-replicas: 1`` ...); ``vpa-updater`` itself is refused (the
scenario's ``kubescale`` section decides). The admission status Lease namespace defaults to
``kube-system`` (no ``NAMESPACE`` variable in a run), where the simulated webhook renews it.

:class:`SimulatedUpdater` wraps :class:`~kubescale.controllers.vpa.updater.updater_loop.UpdaterLoop`
for the runner: it settles like the loop's informers, and after each iteration reports every
eviction as
``("vpa-eviction", "<namespace>/<pod>", "evicted by VPA")``, every in-place resize as
``("vpa-in-place-resize", ...)`` and a loop skipped for a stale admission status as
``("vpa-updater-skipped", "<lease namespace>/<lease name>", ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kubescale.controllers.vpa.updater.updater_config import (
    UpdaterConfigError,
    UpdaterSettings,
    add_updater_arguments,
    updater_settings_from_args,
)
from kubescale.controllers.vpa.updater.updater_loop import LOOP_NAME, UpdaterLoop
from kubescale.sim.scenario.component_flags import component_flag_names, parse_component_flags

__all__ = [
    "EVICTION_EVENT",
    "IN_PLACE_EVENT",
    "SKIPPED_EVENT",
    "SimulatedUpdater",
    "simulated_updater_flags",
    "simulated_updater_settings",
]

EVICTION_EVENT: Final = "vpa-eviction"
IN_PLACE_EVENT: Final = "vpa-in-place-resize"
SKIPPED_EVENT: Final = "vpa-updater-skipped"
_ONLY_IN_SERVE: Final = frozenset({"vpa-updater"})


def simulated_updater_flags() -> frozenset[str]:
    """The flag names (without dashes) a scenario may give the updater."""
    return component_flag_names(add_updater_arguments, exclude=_ONLY_IN_SERVE)


def simulated_updater_settings(flags: Mapping[str, Any]) -> UpdaterSettings:
    """The settings of a scenario's updater; :class:`UpdaterConfigError` names the flag."""
    args = parse_component_flags(
        flags,
        component="vpa-updater",
        add_arguments=add_updater_arguments,
        allowed=simulated_updater_flags(),
        error=UpdaterConfigError,
    )
    return updater_settings_from_args(args, environ={})


class SimulatedUpdater:
    """The updater loop of a run (module docstring)."""

    name = LOOP_NAME

    def __init__(self, loop: UpdaterLoop) -> None:
        self.loop = loop
        self._reports: list[tuple[str, str, str]] = []

    async def wait_for_resource_version(self, resource_version: str, *, within: float) -> bool:
        return await self.loop.wait_for_resource_version(resource_version, within=within)

    async def run_once(self, now: datetime) -> None:
        skipped = self.loop.skipped_stale_status
        await self.loop.run_once(now)
        await self.loop.events.flush()
        if self.loop.skipped_stale_status != skipped:
            settings = self.loop.settings
            self._reports.append(
                (
                    SKIPPED_EVENT,
                    f"{settings.status_lease_namespace}/{settings.status_lease_name}",
                    "admission controller status stale or missing: no update this loop",
                )
            )
        self._reports.extend((EVICTION_EVENT, pod, "evicted by VPA") for pod in self.loop.evicted)
        self._reports.extend(
            (IN_PLACE_EVENT, pod, "resized in place by VPA") for pod in self.loop.resized
        )

    def drain_reports(self) -> list[tuple[str, str, str]]:
        """What happened since the last call (the runner's ``ReportingLoop``)."""
        reports, self._reports = self._reports, []
        return reports
