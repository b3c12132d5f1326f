"""The executor's ConfigMap write (:class:`~.intents.WriteConfigMap`).

Upstream cluster autoscaler's ``WriteStatusConfigMap``: GET the ConfigMap; when it is there,
update it (PUT, conditional on the version read) with the intent's data and annotations merged
over its own; when it is not (404), create it with just those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import CONFIG_MAPS
from kubescale.objects.views import meta
from kubescale.plans.intents import WriteConfigMap

__all__ = ["config_map_body", "write_config_map"]


def config_map_body(intent: WriteConfigMap, existing: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ConfigMap to write: ``existing`` with the intent's data and annotations merged
    over its own, or a new one with just those."""
    if existing is None:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": intent.name,
                "namespace": intent.namespace,
                "annotations": dict(intent.annotations),
            },
            "data": dict(intent.data),
        }
    metadata: dict[str, Any] = dict(meta(existing).raw)
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **intent.annotations}
    data = existing.get("data") or {}
    return {**existing, "metadata": metadata, "data": {**data, **intent.data}}


async def write_config_map(client: KubeClient, intent: WriteConfigMap) -> dict[str, Any]:
    """Apply ``intent`` (module docstring); the ConfigMap as stored."""
    try:
        existing: dict[str, Any] | None = await client.get(
            CONFIG_MAPS, intent.name, namespace=intent.namespace
        )
    except KubeApiError as err:
        if not err.not_found:
            raise
        existing = None
    body = config_map_body(intent, existing)
    if existing is None:
        return await client.create(CONFIG_MAPS, body)
    return await client.update(CONFIG_MAPS, body)
