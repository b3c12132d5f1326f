"""Objects for access-layer tests (valid enough for the in-process API server): pods of the pause
image (:mod:`tests.builders` with this module's defaults), config maps."""

from __future__ import annotations

import functools
from typing import Any

from tests import builders

PAUSE = "registry.k8s.io/pause:3.9"
PAUSE_POD = functools.partial(builders.pods.pod, containers=[builders.pods.container(image=PAUSE)])
TYPED_PAUSE_POD = functools.partial(
    builders.pods.typed_pod, containers=[builders.pods.container(image=PAUSE)]
)


def config_map(
    name: str,
    ns: str = "default",
    *,
    data: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}
