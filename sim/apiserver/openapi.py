"""A minimal OpenAPI v3 publication: enough for kubectl to use server-side field validation.

kubectl (``--validate``, on by default) asks ``/openapi/v3`` whether the server understands the
``fieldValidation`` query parameter: it looks, in the group-version document, for the PATCH
operation tagged with the kind's ``x-kubernetes-group-version-kind`` and for a
``fieldValidation`` query parameter on it (``resource.QueryParamVerifierV3``). If found, it
sends ``fieldValidation=Strict`` and leaves validation to the server; otherwise it downloads
``/openapi/v2`` to validate on the client, which fails when there is none.

So each group-version document lists the real paths of every served kind with their operations,
GVK extensions and parameters, but no schemas (``components.schemas`` is empty): kubectl then
computes ``apply`` patches from its compiled-in types, as it does for servers without OpenAPI.
The server accepts ``fieldValidation`` and does not act on it (it keeps unknown fields, like
``fieldValidation=Ignore``), because it has no schemas to check against.
``/openapi/v2`` stays 404, which kubectl tolerates once v3 answers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from kube.resources import ResourceType

from .discovery import KUBERNETES_VERSION
from .registry import ResourceRegistry

__all__ = ["group_version_document", "openapi_index"]

_QUERY_PARAMETERS: Final = ("dryRun", "fieldManager", "fieldValidation", "pretty")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_index(registry: ResourceRegistry) -> dict[str, Any]:
    """``/openapi/v3``: one entry per served group-version, with a content hash."""
    paths: dict[str, Any] = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            document = group_version_document(registry, group, version)
            digest = hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()
            path = _gv_path(group, version)
            paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest.upper()}"}
    return {"paths": paths}


def _operation(rt: ResourceType, action: str, *, kind: str | None = None) -> dict[str, Any]:
    group, version, kind_name = rt.group, rt.version, kind or rt.kind
    return {
        "operationId": f"{action}{kind_name}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind_name},
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _QUERY_PARAMETERS
        ],
        "responses": {"200": {"description": "OK"}},
    }


def _paths(rt: ResourceType) -> dict[str, Any]:
    base = "/" + _gv_path(rt.group, rt.version)
    collection = (
        f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    )
    item = f"{collection}/{{name}}"
    paths: dict[str, Any] = {
        collection: {
            "get": _operation(rt, "list"),
            "post": _operation(rt, "post"),
            "delete": _operation(rt, "deletecollection"),
        },
        item: {
            "get": _operation(rt, "get"),
            "put": _operation(rt, "put"),
            "patch": _operation(rt, "patch"),
            "delete": _operation(rt, "delete"),
        },
    }
    for sub in sorted(rt.subresources & {"status", "scale", "resize"}):
        kind = "Scale" if sub == "scale" else None
        paths[f"{item}/{sub}"] = {
            "get": _operation(rt, "get", kind=kind),
            "put": _operation(rt, "put", kind=kind),
            "patch": _operation(rt, "patch", kind=kind),
        }
    return paths


def group_version_document(
    registry: ResourceRegistry, group: str, version: str
) -> dict[str, Any] | None:
    """``/openapi/v3/apis/<g>/<v>`` (or ``api/v1``); ``None`` when nothing is served there."""
    types = [rt for rt in registry.types() if rt.group == group and rt.version == version]
    if not types:
        return None
    paths: dict[str, Any] = {}
    for rt in types:
        paths.update(_paths(rt))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }
