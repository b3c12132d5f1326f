"""The REST handlers: one aiohttp handler for every resource URL, dispatching on verb.

Verbs are kube's request-info verbs: GET → get / list / watch, POST → create, PUT → update,
PATCH → patch, DELETE → delete / deletecollection. Before a request is served the fault
injector may delay or fail it. Success codes are kube's: 201 for a create, 200 otherwise (202 for
a delete that only marked the object when ``orphanDependents: false`` was asked).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web

from kubescale.base.logs import component_logger
from kubescale.kube.resources import ResourceType

from . import errors, subresources, tables
from .deletion import RETURNS_DELETED_OBJECT, DeleteOutcome
from .faults import FaultInjector
from .field_validation import check_fields
from .hpa_versions import V1, v1_to_v2, v2_to_v1
from .http_bodies import (
    APPLY_PATCH,
    bytes_response,
    dry_run,
    error_response,
    json_response,
    patch_error,
    patcher,
    read_json,
)
from .json_copy import json_copy
from .listing import Selection, list_page, list_page_bytes
from .patching import PatchError
from .request_log import RequestRecord
from .routing import Target, parse_target
from .served_kinds import CUSTOM_RESOURCE_DEFINITIONS
from .watch import WatchRequest, serve_watch
from .writes import ApiContext, create_object, request_warnings, update_object

__all__ = ["RestHandlers"]

log = component_logger("apiserver")

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
"""strconv.ParseBool's true spellings (query parameters are parsed with it)."""


def _int_param(request: web.Request, name: str) -> int | None:
    text = request.query.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f"invalid {name}: {text!r}") from None


def _verb(method: str, target: Target, request: web.Request) -> str:
    if method == "GET":
        if target.name is None:
            return "watch" if target.legacy_watch or request.query.get("watch") in _TRUE else "list"
        return "watch" if target.legacy_watch else "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name is not None else "deletecollection"
    raise errors.method_not_allowed()


def _bearer_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


class RestHandlers:
    """Handlers bound to one server's context."""

    def __init__(self, *, ctx: ApiContext, faults: FaultInjector, rng: random.Random) -> None:
        self.ctx = ctx
        self.faults = faults
        self.rng = rng

    async def core(self, request: web.Request) -> web.StreamResponse:
        """``/api/v1/...``."""
        parts = request.match_info["tail"].split("/")
        return await self._serve(request, group="", version="v1", parts=parts)

    async def grouped(self, request: web.Request) -> web.StreamResponse:
        """``/apis/<group>/<version>/...``."""
        info = request.match_info
        parts = info["tail"].split("/")
        if (info["group"], info["version"]) == ("autoscaling", "v1") and (
            "horizontalpodautoscalers" in parts[:4]
        ):
            return await self._serve_hpa_v1(request, parts)
        return await self._serve(request, group=info["group"], version=info["version"], parts=parts)

    async def _serve_hpa_v1(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        """HorizontalPodAutoscalers at ``autoscaling/v1``: the stored v2 objects converted on
        the way in and out (:mod:`.hpa_versions`), as kube-apiserver serves both versions."""
        try:
            target = parse_target(
                self.ctx.store.registry, group="autoscaling", version="v2", parts=parts
            )
            verb = _verb(request.method, target, request)
            if verb == "watch":
                return await self._watch(request, target, transform=v2_to_v1)
            response: web.StreamResponse
            if verb == "create":
                response = await self._create(
                    request, target, body=_v2_body(await read_json(request))
                )
            elif verb == "update":
                response = await self._update(
                    request, target, body=_v2_body(await read_json(request))
                )
            elif verb == "patch":
                response = await self._patch_v1(request, target)
            else:
                response = await self._dispatch(request, target, verb)
        except errors.ApiError as exc:
            return error_response(exc)
        if not isinstance(response, web.Response) or not isinstance(response.body, bytes):
            return response
        body = json.loads(response.body)
        if isinstance(body, dict) and body.get("kind") == "Table":
            return response
        if isinstance(body, dict) and str(body.get("kind", "")).endswith("List"):
            body["apiVersion"] = V1
            body["items"] = [_v1_item(item) for item in body.get("items") or []]
        elif isinstance(body, dict):
            body = v2_to_v1(body)
        return json_response(body, status=response.status)

    async def _patch_v1(self, request: web.Request, target: Target) -> web.Response:
        """A JSON or merge patch of the v1 view, applied to the stored object converted."""
        assert target.name is not None
        patch = await read_json(request)
        apply = patcher(target.rt, request.content_type, patch)

        def patched(current: dict[str, Any] | None) -> dict[str, Any]:
            if current is None:
                raise errors.not_found(target.rt, target.name or "")
            return v1_to_v2(apply(v2_to_v1(current)))

        obj, _ = await update_object(
            self.ctx,
            target.rt,
            name=target.name,
            namespace=target.namespace,
            new_body=patched,
            subresource=target.subresource,
            dry_run=dry_run(request),
        )
        return json_response(obj)

    async def _serve(
        self, request: web.Request, *, group: str, version: str, parts: list[str]
    ) -> web.StreamResponse:
        warnings: list[str] = []
        request_warnings.set(warnings)
        try:
            target = parse_target(
                self.ctx.store.registry, group=group, version=version, parts=parts
            )
            verb = _verb(request.method, target, request)
            record = RequestRecord(
                verb=verb,
                group=target.rt.group,
                resource=target.rt.plural,
                subresource=target.subresource,
                namespace=target.namespace or "",
                name=target.name or "",
                user=_bearer_token(request),
            )
            self.ctx.requests.record(record)
            for observer in self.ctx.observers:
                observer(record)
            resource = target.rt.plural + (f"/{target.subresource}" if target.subresource else "")
            fault = self.faults.take(verb=verb, resource=resource)
            if fault is not None and not fault.after_commit:
                await fault.wait()  # the delay, then a hold until released
                if fault.error is not None:
                    raise fault.error
                if fault.body is not None:
                    return web.Response(text=fault.body, content_type="application/json")
            response = await self._dispatch(request, target, verb)
            if fault is not None and fault.after_commit:
                if fault.delay:  # stored already; the answer is late
                    await asyncio.sleep(fault.delay)
                if fault.error is not None:
                    raise fault.error  # served and stored, but the client is told it failed
        except errors.ApiError as exc:
            return error_response(exc)
        except Exception as exc:
            log.exception("request failed", extra={"fields": {"path": request.path}})
            return error_response(errors.internal_error(f"{type(exc).__name__}: {exc}"))
        if warnings and isinstance(response, web.Response):
            for text in warnings:
                # net.NewWarningHeader: code 299, agent "-", text as an escaped quoted-string
                quoted = text.replace("\\", "\\\\").replace('"', '\\"')
                response.headers.add("Warning", f'299 - "{quoted}"')
        return response

    async def _dispatch(
        self, request: web.Request, target: Target, verb: str
    ) -> web.StreamResponse:
        if target.subresource and target.subresource != "status":
            return await subresources.serve(self.ctx, request, target=target, verb=verb)
        if verb == "list":
            return self._maybe_table(request, target, self._list(request, target))
        if verb == "watch":
            return await self._watch(request, target)
        if verb == "deletecollection":
            return await self._delete_collection(request, target)
        if target.name is None:
            if verb != "create" or (target.rt.namespaced and target.namespace is None):
                raise errors.method_not_allowed()
            return await self._create(request, target)
        if verb == "get":
            obj = self.ctx.store.get(target.rt, target.name, target.namespace)
            return self._maybe_table(request, target, json_response(obj))
        if verb == "update":
            return await self._update(request, target)
        if verb == "patch":
            return await self._patch(request, target)
        if verb == "delete" and not target.subresource:
            return await self._delete(request, target)
        raise errors.method_not_allowed()

    # ------------------------------------------------------------------------------ reads

    def _maybe_table(
        self, request: web.Request, target: Target, response: web.Response
    ) -> web.Response:
        """The answer as a ``meta.k8s.io`` Table when the Accept header asks for one and the
        kind has columns (:mod:`.tables`); else unchanged."""
        version = tables.table_version(request.headers.get("Accept", ""))
        rt = target.rt
        builtin = self.ctx.store.registry.is_builtin(rt)
        if version is None or not tables.has_printer(rt, builtin=builtin):
            return response
        assert isinstance(response.body, bytes)
        crd = None
        if not builtin:
            try:
                crd = self.ctx.store.get(
                    CUSTOM_RESOURCE_DEFINITIONS, f"{rt.plural}.{rt.group}", None
                )
            except errors.ApiError:
                crd = None
        table = tables.to_table(
            rt,
            json.loads(response.body),
            version=version,
            crd=crd,
            builtin=builtin,
            now=self.ctx.store.clock.now(),
            include_object=request.query.get("includeObject", "Metadata"),
        )
        return json_response(table)

    def _selection(self, request: web.Request, target: Target) -> Selection:
        field_selector = request.query.get("fieldSelector", "")
        if target.name is not None:  # legacy /watch/.../<name>
            extra = f"metadata.name={target.name}"
            field_selector = f"{field_selector},{extra}" if field_selector else extra
        return Selection.parse(
            target.rt,
            label_selector=request.query.get("labelSelector", ""),
            field_selector=field_selector,
        )

    def _list(self, request: web.Request, target: Target) -> web.Response:
        limit = _int_param(request, "limit") or 0
        page = list_page(
            self.ctx.store,
            target.rt,
            namespace=target.namespace,
            selection=self._selection(request, target),
            limit=max(0, limit),
            continue_token=request.query.get("continue", ""),
            resource_version=request.query.get("resourceVersion", ""),
            resource_version_match=request.query.get("resourceVersionMatch", ""),
        )
        return bytes_response(list_page_bytes(self.ctx.store, target.rt, page))

    async def _watch(
        self,
        request: web.Request,
        target: Target,
        *,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> web.StreamResponse:
        rv = request.query.get("resourceVersion", "")
        if rv not in ("", "0"):
            try:
                if int(rv) < 0:
                    raise ValueError(rv)
            except ValueError:
                raise errors.bad_request(f"invalid resourceVersion: {rv!r}") from None
        timeout = _int_param(request, "timeoutSeconds")
        watch = WatchRequest(
            rt=target.rt,
            namespace=target.namespace,
            selection=self._selection(request, target),
            resource_version=rv,
            allow_bookmarks=request.query.get("allowWatchBookmarks", "") in _TRUE,
            timeout_seconds=float(timeout) if timeout is not None else None,
            transform=transform,
        )
        return await serve_watch(
            request,
            store=self.ctx.store,
            watch=watch,
            bookmark_interval=self.ctx.bookmark_interval,
            rng=self.rng,
        )

    # ----------------------------------------------------------------------------- writes

    @staticmethod
    def _check_fields(request: web.Request, rt: ResourceType, obj: dict[str, Any]) -> None:
        """``fieldValidation`` (default Warn): 400 for Strict, Warning headers for Warn."""
        found = check_fields(rt, obj, mode=request.query.get("fieldValidation") or "Warn")
        collected = request_warnings.get()
        if found and collected is not None:
            collected.extend(found)

    async def _create(
        self, request: web.Request, target: Target, *, body: Any = None
    ) -> web.Response:
        if body is None:
            body = await read_json(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        self._check_fields(request, target.rt, body)
        obj = await create_object(
            self.ctx,
            target.rt,
            body,
            namespace=target.namespace,
            dry_run=dry_run(request),
        )
        return json_response(obj, status=201)

    async def _update(
        self, request: web.Request, target: Target, *, body: Any = None
    ) -> web.Response:
        if body is None:
            body = await read_json(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        assert target.name is not None
        self._check_fields(request, target.rt, body)
        obj, created = await update_object(
            self.ctx,
            target.rt,
            name=target.name,
            namespace=target.namespace,
            new_body=lambda _current: body,
            subresource=target.subresource,
            dry_run=dry_run(request),
        )
        return json_response(obj, status=201 if created else 200)

    async def _patch(self, request: web.Request, target: Target) -> web.Response:
        rt, name = target.rt, target.name
        assert name is not None
        content_type = request.content_type
        patch = await read_json(request) if content_type != APPLY_PATCH else None
        apply = patcher(rt, content_type, patch)

        def patched(current: dict[str, Any] | None) -> dict[str, Any]:
            if current is None:
                raise errors.not_found(rt, name)
            try:
                result = apply(current)
            except PatchError as exc:
                raise patch_error(exc) from None
            if not isinstance(result, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            self._check_fields(request, rt, result)
            return result

        obj, _ = await update_object(
            self.ctx,
            rt,
            name=name,
            namespace=target.namespace,
            new_body=patched,
            subresource=target.subresource,
            dry_run=dry_run(request),
        )
        return json_response(obj)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await read_json(request)
        options: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        grace = _int_param(request, "gracePeriodSeconds")
        if grace is not None and options.get("gracePeriodSeconds") is None:
            options["gracePeriodSeconds"] = grace
        policy = request.query.get("propagationPolicy")
        if policy and not options.get("propagationPolicy"):
            options["propagationPolicy"] = policy
        if policy not in (None, "", "Orphan", "Background", "Foreground"):
            raise errors.bad_request(f'propagationPolicy: Unsupported value: "{policy}"')
        return options

    def _deleted_body(self, rt: ResourceType, outcome: DeleteOutcome) -> dict[str, Any]:
        if not outcome.removed or rt.key in RETURNS_DELETED_OBJECT:
            return outcome.obj
        meta = outcome.obj["metadata"]
        details: dict[str, Any] = {"name": meta["name"], "kind": rt.plural, "uid": meta["uid"]}
        if rt.group:
            details["group"] = rt.group
        return errors.success_status(details=details)

    async def _delete(self, request: web.Request, target: Target) -> web.Response:
        assert target.name is not None
        options = await self._delete_options(request)
        outcome = self.ctx.store.delete(
            target.rt,
            target.name,
            target.namespace,
            grace_period_seconds=options.get("gracePeriodSeconds"),
            preconditions=options.get("preconditions"),
            dry_run=dry_run(request, options),
        )
        status = 200
        if not outcome.removed and options.get("orphanDependents") is False:
            status = 202
        return json_response(self._deleted_body(target.rt, outcome), status=status)

    async def _delete_collection(self, request: web.Request, target: Target) -> web.Response:
        if target.rt.namespaced and target.namespace is None:
            raise errors.method_not_allowed()
        options = await self._delete_options(request)
        is_dry_run = dry_run(request, options)
        selection = self._selection(request, target)
        store = self.ctx.store
        deleted: list[dict[str, Any]] = []
        for obj in list(store.snapshots(target.rt, target.namespace)):
            if not selection.matches(obj):
                continue
            try:
                outcome = store.delete(
                    target.rt,
                    obj["metadata"]["name"],
                    target.namespace,
                    grace_period_seconds=options.get("gracePeriodSeconds"),
                    preconditions=options.get("preconditions"),
                    dry_run=is_dry_run,
                )
            except errors.ApiError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(json_copy(outcome.obj))
        body = {
            "kind": target.rt.list_kind,
            "apiVersion": target.rt.group_version,
            "metadata": {"resourceVersion": str(store.resource_version)},
            "items": deleted,
        }
        return json_response(body)


def _v1_item(item: dict[str, Any]) -> dict[str, Any]:
    """A list item at v1 (list items carry no kind or apiVersion unless the stored ones do)."""
    converted = v2_to_v1({**item, "kind": "HorizontalPodAutoscaler"})
    if "kind" not in item:
        converted.pop("kind", None)
        converted.pop("apiVersion", None)
    return converted


def _v2_body(body: Any) -> Any:
    """A v1 request body as the stored version (anything else is left for the 400)."""
    return v1_to_v2(body) if isinstance(body, dict) else body
