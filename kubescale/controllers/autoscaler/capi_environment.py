"""The cluster autoscaler's settings completed by its environment: upstream's clusterapi provider
reads ``CAPI_GROUP`` and ``CAPI_VERSION`` there. Part of its declaration (the registry's
settings step, :mod:`kubescale.components`), apart from the component so that a process not
running the autoscaler does not import it (issue 29)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kubescale.controllers.autoscaler.cloudprovider.clusterapi_versions import (
    CapiVersionError,
    validated_group_version,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    AutoscalerConfigError,
    AutoscalerSettings,
)

__all__ = ["with_capi_environment"]


def with_capi_environment(
    settings: AutoscalerSettings, environ: Mapping[str, str]
) -> AutoscalerSettings:
    """Upstream's clusterapi provider reads ``CAPI_GROUP`` and ``CAPI_VERSION`` from its
    environment (:mod:`.clusterapi_versions`); a value that cannot be one is a one-line
    :class:`~.autoscaler_settings.AutoscalerConfigError` naming the variable."""
    try:
        group, version = validated_group_version(environ)
    except CapiVersionError as err:
        raise AutoscalerConfigError(str(err)) from None
    return replace(settings, capi_group=group, capi_version=version)
