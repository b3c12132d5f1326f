"""Request and response bodies: JSON in and out, dryRun, and the PATCH content types.

Every answer is JSON (``application/json``), errors included (a metav1.Status). PATCH accepts
``application/json-patch+json``, ``application/merge-patch+json`` and, for built-in kinds only,
``application/strategic-merge-patch+json``; anything else (server-side apply's
``application/apply-patch+yaml`` included) is 415 Unsupported Media Type, as kube-apiserver
answers an SMP for a custom resource.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web

from kubescale.kube.resources import ResourceType

from . import errors
from .patching import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    supports_strategic_merge,
)

__all__ = [
    "APPLY_PATCH",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_PATCH",
    "Patcher",
    "bytes_response",
    "dry_run",
    "error_response",
    "json_response",
    "patch_error",
    "patcher",
    "read_json",
]

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

Patcher = Callable[[dict[str, Any]], Any]


def json_response(
    body: dict[str, Any], *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def bytes_response(body: bytes, *, status: int = 200) -> web.Response:
    """An already encoded JSON body (a LIST page joined from its items' stored encodings)."""
    return web.Response(body=body, status=status, content_type="application/json")


def error_response(error: errors.ApiError) -> web.Response:
    return json_response(error.status, status=error.code, headers=error.headers or None)


async def read_json(request: web.Request) -> Any:
    """The decoded JSON body (400 BadRequest when it is not JSON)."""
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None


def dry_run(request: web.Request, options: dict[str, Any] | None = None) -> bool:
    values = list(request.query.getall("dryRun", []))
    if options and isinstance(options.get("dryRun"), list):
        values += [str(v) for v in options["dryRun"]]
    for value in values:
        if value != "All":
            raise errors.bad_request(
                f'dryRun: Unsupported value: "{value}": supported values: "All"'
            )
    return bool(values)


def patcher(rt: ResourceType, content_type: str, patch: Any) -> Patcher:
    """The function applying this PATCH body to the current object (415 for unknown types)."""
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise errors.bad_request(
                "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
            )
        return lambda current: apply_json_patch(current, patch)
    if content_type == MERGE_PATCH:
        return lambda current: apply_merge_patch(current, patch)
    if content_type == STRATEGIC_PATCH and supports_strategic_merge(rt.group_version, rt.kind):
        if not isinstance(patch, dict):
            raise errors.bad_request("the strategic merge patch must be a JSON object")
        return lambda current: apply_strategic_merge_patch(
            current, patch, api_version=rt.group_version, kind=rt.kind
        )
    accepted = [JSON_PATCH, MERGE_PATCH]
    if supports_strategic_merge(rt.group_version, rt.kind):
        accepted.append(STRATEGIC_PATCH)
    raise errors.unsupported_media_type(", ".join(accepted))


def patch_error(exc: PatchError) -> errors.ApiError:
    """A patch that does not apply: 422 Invalid with the patch library's message."""
    return errors.status_error(code=422, reason="Invalid", message=str(exc))
