"""The ``scale``, ``eviction``, ``binding`` and ``resize`` subresources.

``status`` needs no code of its own: it is the object with the status split of
:meth:`~.store.ObjectStore.prepare_update`. The others follow their upstream REST storage:

* scale (``pkg/registry/apps/deployment/storage`` ``ScaleREST``, the CRD scale subresource):
  an ``autoscaling/v1`` Scale with ``spec.replicas``, ``status.replicas`` and
  ``status.selector``; PUT/PATCH change only the parent's ``spec.replicas``. The Scale's
  resourceVersion is the parent's, so it works as a precondition. For CRD kinds (Cluster API)
  ``status.selector`` is read from the parent's ``status.selector`` (their CRDs'
  ``labelSelectorPath``), falling back to ``spec.selector``.
* eviction (:mod:`.eviction`).
* binding (``pod/storage.BindingREST``): sets ``spec.nodeName`` and the PodScheduled
  condition; 409 when the pod is already assigned or being deleted.
* resize (``podResizeStrategy``): only ``resources`` and ``resizePolicy`` of containers change;
  the QoS class may not.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kubescale.kube.resources import ResourceType
from kubescale.objects.selectors import (
    SelectorError,
    label_selector_from_dict,
    label_selector_from_set,
)

from . import errors, eviction
from .http_bodies import (
    APPLY_PATCH,
    JSON_PATCH,
    Patcher,
    json_response,
    patch_error,
    patcher,
    read_json,
)
from .json_copy import json_copy
from .patching import PatchError, apply_json_patch, apply_merge_patch
from .registry import BUILTIN_GROUPS
from .routing import Target
from .store import PreparedUpdate, format_time
from .strategy import pod_qos_class
from .writes import ApiContext, admit, update_object

__all__ = ["scale_of", "serve"]

SCALE_API_VERSION = "autoscaling/v1"


async def serve(
    ctx: ApiContext, request: web.Request, *, target: Target, verb: str
) -> web.StreamResponse:
    """Serve ``target`` (a subresource other than status)."""
    assert target.name is not None
    sub = target.subresource
    if sub == "scale" and verb in {"get", "update", "patch"}:
        if verb == "get":
            parent = ctx.store.get(target.rt, target.name, target.namespace)
            return json_response(scale_of(target.rt, parent))
        body = await read_json(request)
        scale = await _write_scale(ctx, request, target, verb=verb, body=body)
        return json_response(scale)
    if sub == "eviction" and verb == "create":
        body = await read_json(request)
        status = await eviction.evict(ctx, target=target, body=body, dry_run=_dry_run(request))
        return json_response(status, status=201)
    if sub == "binding" and verb == "create":
        body = await read_json(request)
        status = await _bind(ctx, target=target, body=body, dry_run=_dry_run(request))
        return json_response(status, status=201)
    if sub == "resize" and verb in {"get", "update", "patch"}:
        if verb == "get":
            return json_response(ctx.store.get(target.rt, target.name, target.namespace))
        body = await read_json(request)
        pod = await _resize(ctx, request, target, verb=verb, body=body)
        return json_response(pod)
    raise errors.method_not_allowed()


def _dry_run(request: web.Request) -> bool:
    return "All" in request.query.getall("dryRun", [])


def _selector_text(rt: ResourceType, parent: dict[str, Any]) -> str:
    if rt.group not in BUILTIN_GROUPS:
        selector = (parent.get("status") or {}).get("selector")
        if isinstance(selector, str) and selector:
            return selector
    raw = (parent.get("spec") or {}).get("selector")
    try:
        if rt.kind == "ReplicationController":  # a plain label map, not a LabelSelector
            return str(label_selector_from_set(raw)) if isinstance(raw, dict) else ""
        return str(label_selector_from_dict(raw)) if raw is not None else ""
    except SelectorError:
        return ""


def scale_of(rt: ResourceType, parent: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale view of a workload."""
    meta = parent["metadata"]
    scale_meta = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    status: dict[str, Any] = {"replicas": int((parent.get("status") or {}).get("replicas") or 0)}
    selector = _selector_text(rt, parent)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": scale_meta,
        "spec": {"replicas": int((parent.get("spec") or {}).get("replicas") or 0)},
        "status": status,
    }


def _requested(kind: str, body: Any, apply: Patcher | None, current: dict[str, Any]) -> Any:
    """What a PUT or PATCH of a subresource asks for: the PUT body (400 unless a ``kind``
    object), or ``apply`` (the PATCH) run on a copy of ``current`` (422 if it does not apply)."""
    if apply is None:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a {kind} object")
        return body
    try:
        return apply(json_copy(current))
    except PatchError as exc:
        raise patch_error(exc) from None


def _scale_replicas(rt: ResourceType, name: str, scale: Any) -> int:
    if not isinstance(scale, dict):
        raise errors.bad_request("the body of the request must be a Scale object")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise errors.bad_request("spec.replicas must be an integer")
    if replicas < 0:
        raise errors.invalid(
            ResourceType(
                group="autoscaling", version="v1", kind="Scale", plural="scale", namespaced=True
            ),
            name,
            [
                (
                    "FieldValueInvalid",
                    "spec.replicas",
                    f"Invalid value: {replicas}: must be greater than or equal to 0",
                )
            ],
        )
    return replicas


async def _write_scale(
    ctx: ApiContext, request: web.Request, target: Target, *, verb: str, body: Any
) -> dict[str, Any]:
    rt, name = target.rt, target.name
    assert name is not None
    content_type = request.content_type

    def apply_scale_patch(current_scale: dict[str, Any]) -> Any:
        if content_type == JSON_PATCH:
            return apply_json_patch(current_scale, body)
        # merge and strategic merge agree on Scale (no lists)
        return apply_merge_patch(current_scale, body)

    current = ctx.store.get(rt, name, target.namespace)
    old_scale = scale_of(rt, current)
    wanted = _requested("Scale", body, None if verb == "update" else apply_scale_patch, old_scale)
    if not isinstance(wanted, dict):
        raise errors.bad_request("the patched Scale is not a JSON object")
    wanted_rv = (wanted.get("metadata") or {}).get("resourceVersion") or ""
    if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
        raise errors.conflict(rt, name)
    replicas = _scale_replicas(rt, name, wanted)
    admitted = await admit(
        ctx,
        operation="UPDATE",
        rt=rt,
        subresource="scale",
        obj={**json_copy(old_scale), "spec": {"replicas": replicas}},
        old_obj=old_scale,
        namespace=target.namespace,
        dry_run=_dry_run(request),
    )
    replicas = _scale_replicas(rt, name, admitted)

    def with_replicas(parent: dict[str, Any] | None) -> dict[str, Any]:
        if parent is None:
            raise errors.not_found(rt, name)
        if wanted_rv and parent["metadata"]["resourceVersion"] != wanted_rv:
            raise errors.conflict(rt, name)
        parent.setdefault("spec", {})["replicas"] = replicas
        return parent

    parent, _ = await update_object(
        ctx,
        rt,
        name=name,
        namespace=target.namespace,
        new_body=with_replicas,
        subresource="scale",
        dry_run=_dry_run(request),
        admit_subresource=False,
    )
    return scale_of(rt, parent)


async def _bind(ctx: ApiContext, *, target: Target, body: Any, dry_run: bool) -> dict[str, Any]:
    rt, name = target.rt, target.name
    assert name is not None
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a Binding object")
    body_name = (body.get("metadata") or {}).get("name")
    if body_name and body_name != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    node = (body.get("target") or {}).get("name") or ""
    if not node:
        raise errors.invalid(
            ResourceType(
                group="", version="v1", kind="Binding", plural="bindings", namespaced=True
            ),
            name,
            [("FieldValueRequired", "target.name", "Required value")],
        )
    binding_rt = ResourceType(
        group="", version="v1", kind="Binding", plural="pods/binding", namespaced=True
    )
    await admit(
        ctx,
        operation="CREATE",
        rt=rt,
        subresource="binding",
        obj=json_copy(body),
        old_obj=None,
        namespace=target.namespace,
        dry_run=dry_run,
    )
    store = ctx.store
    pod = store.get(rt, name, target.namespace)
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(
            binding_rt, name, f"pod {name} is being deleted, cannot be assigned to a host"
        )
    assigned = (pod.get("spec") or {}).get("nodeName")
    if assigned:
        raise errors.conflict(
            binding_rt, name, f'pod {name} is already assigned to node "{assigned}"'
        )
    pod.setdefault("spec", {})["nodeName"] = node
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    if annotations:
        pod["metadata"].setdefault("annotations", {}).update(annotations)
    _set_condition(
        pod, {"type": "PodScheduled", "status": "True"}, now=format_time(store.clock.now())
    )
    old = store.peek(rt, name, target.namespace)
    store.commit_update(
        rt, PreparedUpdate(old=old, new=pod), dry_run=dry_run, bump_generation=False
    )
    return errors.success_status(code=201)


def _set_condition(pod: dict[str, Any], condition: dict[str, Any], *, now: str) -> None:
    """podutil.UpdatePodCondition: the condition of that type is replaced whole (an earlier
    ``Unschedulable`` reason and message do not survive); only ``lastTransitionTime`` is kept,
    when the status did not change."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    replacement = {**condition, "lastProbeTime": None, "lastTransitionTime": now}
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition["type"]:
            if existing.get("status") == condition.get("status"):
                replacement["lastTransitionTime"] = existing.get("lastTransitionTime", now)
            conditions[index] = replacement
            return
    conditions.append(replacement)


def _resize_merge(old: dict[str, Any], requested: dict[str, Any]) -> dict[str, Any]:
    """``dropNonResizeUpdates``: the old pod with only container resources taken from the new."""
    result = json_copy(old)
    new_spec = requested.get("spec") or {}
    for list_name in ("containers", "initContainers"):
        wanted = {c.get("name"): c for c in new_spec.get(list_name) or [] if isinstance(c, dict)}
        for container in (result.get("spec") or {}).get(list_name) or []:
            source = wanted.get(container.get("name"))
            if source is None:
                continue
            for key in ("resources", "resizePolicy"):
                if key in source:
                    container[key] = json_copy(source[key])
                else:
                    container.pop(key, None)
    meta_rv = (requested.get("metadata") or {}).get("resourceVersion")
    if meta_rv:
        result["metadata"]["resourceVersion"] = meta_rv
    return result


async def _resize(
    ctx: ApiContext, request: web.Request, target: Target, *, verb: str, body: Any
) -> dict[str, Any]:
    rt, name = target.rt, target.name
    assert name is not None
    apply = None if verb == "update" else patcher(rt, request.content_type, body)
    if request.content_type == APPLY_PATCH:
        raise errors.unsupported_media_type("application/json-patch+json")

    def resized(current: dict[str, Any] | None) -> dict[str, Any]:
        if current is None:
            raise errors.not_found(rt, name)
        new = _resize_merge(current, _requested("Pod", body, apply, current))
        if pod_qos_class(new) != pod_qos_class(current):
            raise errors.invalid(
                rt,
                name,
                [
                    (
                        "FieldValueForbidden",
                        "spec",
                        "Forbidden: Pod QOS Class may not change as a result of resizing",
                    )
                ],
            )
        return new

    pod, _ = await update_object(
        ctx,
        rt,
        name=name,
        namespace=target.namespace,
        new_body=resized,
        subresource="resize",
        dry_run=_dry_run(request),
    )
    return pod
