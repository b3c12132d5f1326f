"""The registry: every system of the suite, one entry each.

``kubescale serve`` (:mod:`kubescale.cli.serve`) and ``kubescale simulate``
(:mod:`kubescale.sim.scenario.runner`) read this tuple and nothing else to know which systems
exist: their flags, their settings, how to build them (the contract is
:mod:`kubescale.runtime.component`). Adding a system is one folder plus one entry here. Where a
system needs another system's computation, the provider is plugged in here, through the
coordination layer's port (:mod:`kubescale.coordination.ports`).

An entry imports only the system's declarations (its flags and settings: the ``*_config``
modules); the system itself — its component, loops, models — is named by module and imported
when it is built (:class:`BuildByName`), so a process runs only the code of the systems it
enables: ``kubescale serve --webhook true`` and every other system ``false`` imports no
recommender model, no numpy, no autoscaler or descheduler (issue 29: the webhook alone held
99 MiB against upstream's 34; tests/test_components.py checks it in a subprocess). This is the
one import by name below the CLI (tests/platform/test_layers.py), for the same reason as
``kubescale.cli.main``'s commands.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Final

from kubescale.controllers.autoscaler.capi_environment import with_capi_environment
from kubescale.controllers.autoscaler.config.autoscaler_config import autoscaler_settings_from_args
from kubescale.controllers.autoscaler.config.autoscaler_flags import add_autoscaler_arguments
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.descheduler.descheduler_config import (
    DeschedulerSettings,
    add_descheduler_arguments,
    descheduler_settings_from_args,
)
from kubescale.controllers.hpa.hpa_config import (
    SERVE_ONLY_FLAGS as HPA_SERVE_ONLY_FLAGS,
)
from kubescale.controllers.hpa.hpa_config import (
    HpaSettings,
    add_hpa_arguments,
    hpa_settings_from_args,
)
from kubescale.controllers.vpa.recommender.recommender_config import (
    SERVE_ONLY_FLAGS as RECOMMENDER_SERVE_ONLY_FLAGS,
)
from kubescale.controllers.vpa.recommender.recommender_config import (
    RecommenderSettings,
    add_recommender_arguments,
    recommender_settings_from_args,
)
from kubescale.controllers.vpa.updater.updater_config import (
    UpdaterSettings,
    add_updater_arguments,
    updater_settings_from_args,
)
from kubescale.extender.extender_config import (
    ExtenderSettings,
    add_extender_arguments,
    extender_settings_from_args,
)
from kubescale.runtime.component import Component, ComponentSpec, Runtime
from kubescale.webhook.webhook_config import SERVE_ONLY_FLAGS as WEBHOOK_SERVE_ONLY_FLAGS
from kubescale.webhook.webhook_config import (
    WebhookSettings,
    add_webhook_arguments,
    webhook_settings_from_args,
)

__all__ = ["REGISTRY", "BuildByName", "by_name"]


@dataclass(frozen=True)
class BuildByName:
    """A system's component class, named by module and imported when the component is built
    (only the systems a process enables are imported). ``providers``: ``(keyword, module,
    attribute)`` of the coordination ports' providers passed to it, imported the same way."""

    module: str
    attribute: str
    providers: tuple[tuple[str, str, str], ...] = ()

    def __call__(self, settings: Any, runtime: Runtime) -> Component:
        build = getattr(importlib.import_module(self.module), self.attribute)
        ports = {
            keyword: getattr(importlib.import_module(module), attribute)
            for keyword, module, attribute in self.providers
        }
        component: Component = build(settings, runtime, **ports)
        return component


WEBHOOK: Final = ComponentSpec[WebhookSettings](
    name="webhook",
    title="the VPA admission webhook",
    add_arguments=add_webhook_arguments,
    settings=lambda args, environ: webhook_settings_from_args(args, environ=environ),
    build=BuildByName("kubescale.webhook.component", "WebhookComponent"),
    serves_https=True,
    serve_only_flags=WEBHOOK_SERVE_ONLY_FLAGS,
)
VPA_RECOMMENDER: Final = ComponentSpec[RecommenderSettings](
    name="vpa-recommender",
    title="the VPA recommender",
    add_arguments=add_recommender_arguments,
    settings=lambda args, _environ: recommender_settings_from_args(args),
    build=BuildByName("kubescale.controllers.vpa.recommender.component", "RecommenderComponent"),
    serve_only_flags=RECOMMENDER_SERVE_ONLY_FLAGS,
)
VPA_UPDATER: Final = ComponentSpec[UpdaterSettings](
    name="vpa-updater",
    title="the VPA updater",
    add_arguments=add_updater_arguments,
    settings=lambda args, environ: updater_settings_from_args(args, environ=environ),
    build=BuildByName("kubescale.controllers.vpa.updater.component", "UpdaterComponent"),
)
HPA_CONTROLLER: Final = ComponentSpec[HpaSettings](
    name="hpa-controller",
    title="the HPA controller",
    add_arguments=add_hpa_arguments,
    settings=lambda args, _environ: hpa_settings_from_args(args),
    build=BuildByName("kubescale.controllers.hpa.component", "HpaComponent"),
    serve_only_flags=HPA_SERVE_ONLY_FLAGS,
)
# The coordination layer's providers, plugged in here: the systems import no other system
# (docs/coordination.md). The cluster autoscaler binpacks with what the VPA's webhook will
# give a pod (the port RequestsAhead), when the coordination asks for it (one brain).
CLUSTER_AUTOSCALER: Final = ComponentSpec[AutoscalerSettings](
    name="cluster-autoscaler",
    title="the cluster autoscaler",
    add_arguments=add_autoscaler_arguments,
    settings=lambda args, environ: with_capi_environment(
        autoscaler_settings_from_args(args), environ
    ),
    build=BuildByName(
        "kubescale.controllers.autoscaler.component",
        "AutoscalerComponent",
        providers=(
            ("requests_ahead", "kubescale.controllers.vpa.requests_ahead", "WebhookRequestsAhead"),
        ),
    ),
)
DESCHEDULER: Final = ComponentSpec[DeschedulerSettings](
    name="descheduler",
    title="the descheduler",
    add_arguments=add_descheduler_arguments,
    settings=lambda args, _environ: descheduler_settings_from_args(args),
    build=BuildByName("kubescale.controllers.descheduler.component", "DeschedulerComponent"),
)
SCHEDULER_EXTENDER: Final = ComponentSpec[ExtenderSettings](
    name="scheduler-extender",
    title="the scheduler extender",
    add_arguments=add_extender_arguments,
    settings=lambda args, _environ: extender_settings_from_args(args),
    build=BuildByName("kubescale.extender.component", "ExtenderComponent"),
    serves_https=True,
)

REGISTRY: Final[tuple[ComponentSpec[Any], ...]] = (
    WEBHOOK,
    VPA_RECOMMENDER,
    VPA_UPDATER,
    HPA_CONTROLLER,
    CLUSTER_AUTOSCALER,
    DESCHEDULER,
    SCHEDULER_EXTENDER,
)


def by_name(name: str) -> ComponentSpec[Any] | None:
    """The registered component called ``name``."""
    for spec in REGISTRY:
        if spec.name == name:
            return spec
    return None
