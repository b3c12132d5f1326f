"""Writes through admission: the create and update pipelines of kube-apiserver's handlers.

CREATE: prepare (BeforeCreate: name, uid, defaults) → admission (mutating webhooks, then
validating) → commit. UPDATE (PUT and every PATCH): read the current object → compute the new
one (the body, or the patch applied to the current object) → prepare (preconditions, server-owned
metadata, status split) → admission → commit. A commit that finds the object changed while
admission ran is retried from the read, like ``GuaranteedUpdate``; the retry turns into a 409
when the request carried its own resourceVersion precondition, because that precondition no
longer holds. Status-only writes skip admission (the brief's contract with the admission
chain); other subresources go through it with their subresource name.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubescale.kube.resources import MUTATING_WEBHOOK_CONFIGURATIONS, NAMESPACES, ResourceType

from . import errors, in_tree_admission
from .json_copy import json_copy
from .request_log import RequestLog, RequestRecord
from .served_kinds import VALIDATING_WEBHOOK_CONFIGURATIONS
from .store import ObjectStore, PreparedUpdate

__all__ = [
    "Admitter",
    "ApiContext",
    "Outcome",
    "admit",
    "create_object",
    "request_warnings",
    "update_object",
]

_UPDATE_ATTEMPTS = 8
_SERVER_OWNED = ("name", "namespace", "uid", "creationTimestamp", "generation", "resourceVersion")


class Outcome(Protocol):
    """What :class:`Admitter` returns (``kubescale.sim.apiserver.admission.AdmissionOutcome``)."""

    @property
    def allowed(self) -> bool: ...
    @property
    def object(self) -> dict[str, Any] | None: ...
    @property
    def status(self) -> dict[str, Any] | None: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...


class Admitter(Protocol):
    """The admission chain (``kubescale.sim.apiserver.admission.AdmissionChain``)."""

    async def admit(
        self,
        *,
        operation: str,
        resource: ResourceType,
        subresource: str,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        mutating: Sequence[dict[str, Any]],
        validating: Sequence[dict[str, Any]],
        dry_run: bool = False,
        between: Callable[[dict[str, Any]], None] | None = None,
    ) -> Outcome: ...


@dataclass
class ApiContext:
    """Everything a request handler needs; one per server."""

    store: ObjectStore
    admission: Admitter | None
    bookmark_interval: float
    tokens: list[str] = field(default_factory=list)
    """Distinct bearer tokens seen, in first-seen order (authentication accepts any)."""
    requests: RequestLog = field(default_factory=RequestLog)
    """Every resource request answered (:mod:`.request_log`)."""
    observers: list[Callable[[RequestRecord], None]] = field(default_factory=list)
    """Called with each resource request as it arrives, before it is served (tests watch what
    a client does at the moment it does it)."""


request_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "request_warnings", default=None
)
"""Admission warnings of the request being served (each request runs in its own task)."""


async def admit(
    ctx: ApiContext,
    *,
    operation: str,
    rt: ResourceType,
    subresource: str,
    obj: dict[str, Any],
    old_obj: dict[str, Any] | None,
    namespace: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    """Run admission; the (possibly mutated) object, or the denial as an :class:`ApiError`.

    In-tree steps (:mod:`.in_tree_admission`) surround the webhooks: LimitRanger's defaults
    before the mutating webhooks, pod validation and LimitRanger's checks after them.
    """
    store = ctx.store
    obj = in_tree_admission.mutate(
        store, operation=operation, rt=rt, subresource=subresource, obj=obj
    )

    def between(mutated: dict[str, Any]) -> None:
        in_tree_admission.validate(
            store, operation=operation, rt=rt, subresource=subresource, obj=mutated
        )

    if ctx.admission is None:
        between(obj)
        return obj
    namespace_obj = store.peek(NAMESPACES, namespace) if namespace and rt.namespaced else None
    outcome = await ctx.admission.admit(
        operation=operation,
        resource=rt,
        subresource=subresource,
        obj=obj,
        old_obj=old_obj,
        namespace_obj=json_copy(namespace_obj),
        mutating=[json_copy(o) for o in store.snapshots(MUTATING_WEBHOOK_CONFIGURATIONS)],
        validating=[json_copy(o) for o in store.snapshots(VALIDATING_WEBHOOK_CONFIGURATIONS)],
        dry_run=dry_run,
        between=between,
    )
    collected = request_warnings.get()
    if collected is not None:
        collected.extend(outcome.warnings)
    if not outcome.allowed:
        status = outcome.status or errors.internal_error("admission denied the request").status
        raise errors.ApiError(status)
    return outcome.object if outcome.object is not None else obj


def _keep_server_fields(prepared: dict[str, Any], mutated: dict[str, Any]) -> dict[str, Any]:
    """Webhooks may not change identity or server-owned metadata."""
    result = json_copy(mutated)
    meta = result.setdefault("metadata", {})
    for key in _SERVER_OWNED:
        if key in prepared.get("metadata", {}):
            meta[key] = prepared["metadata"][key]
        else:
            meta.pop(key, None)
    result["apiVersion"] = prepared.get("apiVersion")
    result["kind"] = prepared.get("kind")
    return result


async def create_object(
    ctx: ApiContext,
    rt: ResourceType,
    body: dict[str, Any],
    *,
    namespace: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    """POST a new object."""
    store = ctx.store
    prepared = store.prepare_create(rt, body, namespace=namespace)
    mutated = await admit(
        ctx,
        operation="CREATE",
        rt=rt,
        subresource="",
        obj=json_copy(prepared),
        old_obj=None,
        namespace=prepared["metadata"].get("namespace"),
        dry_run=dry_run,
    )
    if mutated != prepared:
        final = _keep_server_fields(prepared, mutated)
        # Re-run the create rules on what the webhooks produced (name/uid kept).
        final_meta = final["metadata"]
        again = store.prepare_create(
            rt,
            {**final, "metadata": {k: v for k, v in final_meta.items() if k != "resourceVersion"}},
            namespace=namespace,
        )
        again["metadata"]["uid"] = prepared["metadata"]["uid"]
        again["metadata"]["creationTimestamp"] = prepared["metadata"]["creationTimestamp"]
        prepared = again
    return store.commit_create(rt, prepared, dry_run=dry_run)


async def update_object(
    ctx: ApiContext,
    rt: ResourceType,
    *,
    name: str,
    namespace: str | None,
    new_body: Callable[[dict[str, Any] | None], dict[str, Any]],
    subresource: str = "",
    dry_run: bool = False,
    admit_subresource: bool = True,
) -> tuple[dict[str, Any], bool]:
    """PUT/PATCH: ``new_body(current)`` gives the requested object. Returns (object, created)."""
    store = ctx.store
    last_error: errors.ApiError | None = None
    for _ in range(_UPDATE_ATTEMPTS):
        current = store.peek(rt, name, namespace)
        body = new_body(json_copy(current) if current is not None else None)
        prepared = store.prepare_update(
            rt, body, name=name, namespace=namespace, subresource=subresource
        )
        run_admission = subresource != "status" and (admit_subresource or not subresource)
        if run_admission:
            operation = "CREATE" if prepared.old is None else "UPDATE"
            mutated = await admit(
                ctx,
                operation=operation,
                rt=rt,
                subresource=subresource,
                obj=json_copy(prepared.new),
                old_obj=json_copy(prepared.old),
                namespace=namespace,
                dry_run=dry_run,
            )
            if mutated != prepared.new:
                final = _keep_server_fields(prepared.new, mutated)
                if prepared.old is None:
                    prepared = PreparedUpdate(old=None, new=final)
                else:
                    prepared = store.prepare_update(
                        rt, final, name=name, namespace=namespace, subresource=subresource
                    )
                    if prepared.old is not current:
                        continue
        try:
            result = store.commit_update(rt, prepared, dry_run=dry_run)
        except errors.ApiError as exc:
            if exc.reason not in ("Conflict", "AlreadyExists"):
                raise
            last_error = exc
            continue
        return result, prepared.old is None
    assert last_error is not None
    raise last_error
