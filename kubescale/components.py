"""The registry: every system of the suite, one line each.

``kubescale serve`` (:mod:`kubescale.cli.serve`) and ``kubescale simulate``
(:mod:`kubescale.sim.scenario.runner`) read this tuple and nothing else to know which systems
exist: their flags, their settings, how to build them (the contract is
:mod:`kubescale.runtime.component`). Adding a system is one folder plus one line here. Where a
system needs another system's computation, the provider is plugged in here, through the
coordination layer's port (:mod:`kubescale.coordination.ports`).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Final

from kubescale.controllers.autoscaler.component import SPEC as AUTOSCALER_ALONE
from kubescale.controllers.autoscaler.component import AutoscalerComponent
from kubescale.controllers.descheduler.component import SPEC as DESCHEDULER
from kubescale.controllers.hpa.component import SPEC as HPA_CONTROLLER
from kubescale.controllers.vpa.recommender.component import SPEC as VPA_RECOMMENDER
from kubescale.controllers.vpa.requests_ahead import WebhookRequestsAhead
from kubescale.controllers.vpa.updater.component import SPEC as VPA_UPDATER
from kubescale.extender.component import SPEC as SCHEDULER_EXTENDER
from kubescale.runtime.component import ComponentSpec
from kubescale.webhook.component import SPEC as WEBHOOK

__all__ = ["REGISTRY", "by_name"]

# The coordination layer's providers, plugged in here: the systems import no other system
# (docs/coordination.md). The cluster autoscaler binpacks with what the VPA's webhook will
# give a pod (the port RequestsAhead), when the coordination asks for it (one brain).
CLUSTER_AUTOSCALER: Final = replace(
    AUTOSCALER_ALONE, build=partial(AutoscalerComponent, requests_ahead=WebhookRequestsAhead)
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
