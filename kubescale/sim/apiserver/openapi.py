"""A minimal OpenAPI publication: enough for kubectl to validate and patch against this server.

kubectl (``--validate``, on by default) asks ``/openapi/v3`` whether the server understands the
``fieldValidation`` query parameter: it looks, in the group-version document, for the PATCH
operation tagged with the kind's ``x-kubernetes-group-version-kind`` and for a
``fieldValidation`` query parameter on it (``resource.QueryParamVerifierV3``). If found, it
sends ``fieldValidation=Strict`` and leaves validation to the server
(:mod:`kubescale.sim.apiserver.field_validation`).

So each group-version document lists the real paths of every served kind with their operations,
GVK extensions and parameters, but no schemas (``components.schemas`` is empty): kubectl then
computes ``apply`` patches from its compiled-in types, as it does for servers without OpenAPI.

kubectl before 1.27 (Debian's 1.20 among them) validates on the client instead, against the
protobuf OpenAPI v2 document (``/openapi/v2`` with ``Accept:
application/com.github.proto-openapi.spec.v2@v1.0+protobuf``) and fails when there is none.
:func:`openapi_v2_protobuf` gives it a valid document with no definitions; kubectl skips
client-side checks for kinds it finds no schema for (``validateResource``: "resource is not
present, let's just skip validation"), and the server still validates.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from kubescale.kube.resources import ResourceType

from .discovery import KUBERNETES_VERSION
from .registry import ResourceRegistry

__all__ = [
    "group_version_document",
    "openapi_index",
    "openapi_v2_json",
    "openapi_v2_protobuf",
]

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


def openapi_v2_json() -> dict[str, Any]:
    """``/openapi/v2`` as JSON: a Swagger 2.0 document with no paths or definitions."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": {},
        "definitions": {},
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def openapi_v2_protobuf() -> bytes:
    """The same document as gnostic's ``openapi.v2.Document`` protobuf, as kubectl < 1.27 reads it.

    Field numbers from gnostic's OpenAPIv2.proto: Document.swagger = 1, Document.info = 2,
    Document.paths = 8; Info.title = 1, Info.version = 2.
    """
    info = _length_delimited(1, b"Kubernetes") + _length_delimited(2, KUBERNETES_VERSION.encode())
    return _length_delimited(1, b"2.0") + _length_delimited(2, info) + _length_delimited(8, b"")
