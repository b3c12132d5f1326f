"""The object store: kube-apiserver's generic registry over :class:`~.storage.Storage`.

The rules of ``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go``:

* every committed write takes the next server-wide resourceVersion and is a watch event; a
  write that changes nothing (a no-op update) takes no resourceVersion and records nothing;
* create fills ``uid``, ``creationTimestamp`` (from the injected clock), ``generation: 1`` and a
  ``generateName`` suffix, checks the name and that the namespace exists;
* update keeps the server-owned metadata, treats a non-empty ``resourceVersion`` as a
  precondition (409 Conflict), bumps ``generation`` when anything outside metadata and status
  changes, honours the status subresource split and the kind's update rules (see
  :mod:`.strategy`); PUT without a resourceVersion is unconditional where the kind allows it;
* delete: see :mod:`.deletion` (graceful pods, finalizers, namespace termination).

Two-phase writes (``prepare_*`` then ``commit_*``) let the REST layer run admission between the
two; ``commit_*`` re-checks what may have changed in between. The one-call methods
(:meth:`ObjectStore.create`, :meth:`update`, :meth:`update_status`, :meth:`delete`) are the
in-process API for seeding and for the simulator; they raise :class:`~.errors.ApiError` exactly
where a client would get the matching Status. Stored dicts are never mutated after a commit, so
snapshots in the history can be shared; everything handed out is a deep copy.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubescale.base.clock import Clock
from kubescale.kube.resources import NAMESPACES, ResourceType

from . import errors, strategy
from .deletion import DeleteOutcome, delete_object, finish_namespace
from .json_copy import json_copy
from .listing import Selection
from .registry import ResourceRegistry
from .storage import Storage, format_time

__all__ = ["DeleteOutcome", "ObjectStore", "PreparedUpdate", "format_time"]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""``utilrand.String``'s alphabet (no vowels, no confusable characters)."""
_GENERATE_SUFFIX = 5
_GENERATE_MAX_PREFIX = 63 - _GENERATE_SUFFIX
_SERVER_OWNED = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


@dataclass(frozen=True, kw_only=True)
class PreparedUpdate:
    """An update computed against ``old`` (``None``: PUT creates the object)."""

    old: dict[str, Any] | None
    new: dict[str, Any]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


class ObjectStore(Storage):
    """The generic registry over :class:`~.storage.Storage`: create, update, delete rules."""

    def __init__(
        self,
        *,
        clock: Clock,
        registry: ResourceRegistry,
        history_window: int,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(clock=clock, registry=registry, history_window=history_window)
        self._rng = rng if rng is not None else random.Random()
        self.validators: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {}
        """Kind-specific validation of an object about to be created or updated (raises
        :class:`~.errors.ApiError`)."""

    def after_remove(self, rt: ResourceType, namespace: str) -> None:
        if namespace and rt.key != NAMESPACES.key:
            finish_namespace(self, namespace)

    def delete(
        self,
        rt: ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> DeleteOutcome:
        """DELETE as ``Store.Delete`` does (see :mod:`.deletion`)."""
        return delete_object(
            self,
            rt,
            name,
            namespace,
            grace_period_seconds=grace_period_seconds,
            preconditions=preconditions,
            dry_run=dry_run,
        )

    # ----------------------------------------------------------------------------- reading

    def type_of(self, obj: dict[str, Any]) -> ResourceType:
        """The served type of a body from its ``apiVersion`` and ``kind``."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        rt = self.registry.by_kind(str(api_version), str(kind))
        if rt is None:
            raise errors.bad_request(f"no kind {kind!r} is registered for version {api_version!r}")
        return rt

    def list(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> list[dict[str, Any]]:
        """Copies of the current objects matching the selectors (as a LIST would return)."""
        rt = self.served(rt)
        selection = Selection.parse(
            rt, label_selector=label_selector, field_selector=field_selector
        )
        ns = namespace if rt.namespaced else None
        return [json_copy(o) for o in self.snapshots(rt, ns) if selection.matches(o)]

    # ------------------------------------------------------------------------------ create

    def _new_uid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _check_kind(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """Fill a missing apiVersion/kind; reject a body of another kind (400, as decoding does)."""
        api_version = obj.setdefault("apiVersion", rt.group_version)
        kind = obj.setdefault("kind", rt.kind)
        if api_version != rt.group_version or kind != rt.kind:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.group_version})"
                if api_version != rt.group_version
                else f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )

    def _check_namespace(
        self, rt: ResourceType, meta: dict[str, Any], namespace: str | None
    ) -> str:
        """Set ``metadata.namespace`` from the request; 400 when the body names another."""
        if not rt.namespaced:
            meta.pop("namespace", None)
            return ""
        body_ns = meta.get("namespace") or ""
        ns = namespace or body_ns
        if not ns:
            raise errors.bad_request("the namespace of the object is required")
        if body_ns and body_ns != ns:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        meta["namespace"] = ns
        return str(ns)

    def _body_object(
        self, rt: ResourceType, body: Any, namespace: str | None
    ) -> tuple[dict[str, Any], dict[str, Any], str]:
        """A copy of a write's body as the object to store, with its metadata and namespace.

        400 unless the body is a JSON object of ``rt``'s kind whose namespace agrees with the
        request's (:meth:`_check_kind`, :meth:`_check_namespace`).
        """
        obj = json_copy(body)
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request is not a JSON object")
        self._check_kind(rt, obj)
        meta = _meta(obj)
        return obj, meta, self._check_namespace(rt, meta, namespace)

    def require_namespace(self, rt: ResourceType, namespace: str) -> dict[str, Any] | None:
        """The namespace object of a namespaced write: 404 when missing, 403 when terminating."""
        if not rt.namespaced:
            return None
        ns_obj = self.peek(NAMESPACES, namespace)
        if ns_obj is None:
            raise errors.not_found(NAMESPACES, namespace)
        if (ns_obj.get("status") or {}).get("phase") == "Terminating":
            raise errors.status_error(
                code=403,
                reason="Forbidden",
                message=f"{rt.plural} is forbidden: unable to create new content in namespace "
                f"{namespace} because it is being terminated",
                details={"name": namespace, "kind": rt.plural, "group": rt.group}
                if rt.group
                else {"name": namespace, "kind": rt.plural},
            )
        return ns_obj

    def prepare_create(
        self, rt: ResourceType, body: dict[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """BeforeCreate: the object as it would be stored (no resourceVersion yet)."""
        rt = self.served(rt)
        obj, meta, ns = self._body_object(rt, body, namespace)
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            prefix = str(meta["generateName"])[:_GENERATE_MAX_PREFIX]
            suffix = "".join(self._rng.choice(_GENERATE_ALPHABET) for _ in range(_GENERATE_SUFFIX))
            name = meta["name"] = prefix + suffix
        if not name:
            raise errors.invalid(
                rt,
                "",
                [
                    (
                        "FieldValueRequired",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )
                ],
            )
        causes = (
            strategy.validate_name(rt, str(name))
            + strategy.validate_labels(obj)
            + strategy.validate_annotations_size(obj)
        )
        if causes:
            raise errors.invalid(rt, str(name), causes)
        if meta.get("resourceVersion"):
            raise errors.internal_error(
                "resourceVersion should not be set on objects to be created"
            )
        for field in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
        ):
            meta.pop(field, None)
        meta["uid"] = self._new_uid()
        meta["creationTimestamp"] = format_time(self.clock.now())
        meta["generation"] = 1
        strategy.apply_defaults(rt, obj)
        strategy.reset_status_on_create(rt, obj)
        strategy.fill_status_zero_values(rt, obj)
        self.require_namespace(rt, ns)
        if (ns, name) in self.bucket(rt):
            raise errors.already_exists(rt, str(name))
        self._validate(rt, obj)
        return obj

    def _validate(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        validator = self.validators.get(rt.key)
        if validator is not None:
            validator(obj)

    def commit_create(
        self, rt: ResourceType, obj: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Store a prepared object: 409 AlreadyExists if one appeared meanwhile."""
        rt = self.served(rt)
        meta = _meta(obj)
        ns = self.namespace_key(rt, meta.get("namespace"))
        name = str(meta["name"])
        self.require_namespace(rt, ns)
        if (ns, name) in self.bucket(rt):
            raise errors.already_exists(rt, name)
        if dry_run:
            return json_copy(obj)
        stored = json_copy(obj)
        self.write(rt, ns=ns, name=name, event_type="ADDED", obj=stored, previous=None)
        return json_copy(stored)

    def create(
        self, obj: dict[str, Any], *, namespace: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """Create ``obj`` (its type from apiVersion/kind) as POST would, without admission."""
        rt = self.type_of(obj)
        return self.commit_create(
            rt, self.prepare_create(rt, obj, namespace=namespace), dry_run=dry_run
        )

    def load(self, objects: Iterable[dict[str, Any]]) -> int:
        """Put trusted, complete objects straight into storage, as an etcd restore would.

        The bulk path of benchmarks that need a cluster of 150,000 pods without 150,000 POSTs
        (``bench/scale_cluster.py``): no admission, defaulting or validation, no status reset
        (a pod arrives bound and ``Running``), no watch events and no copies — each object
        takes the next resourceVersion and, when missing, a uid and the clock's
        creationTimestamp, and the change log is expired, so a watch from before the load gets
        ``410 Gone`` and re-lists. The object's namespace must exist (loaded earlier in
        ``objects`` or before). The number of objects stored.
        """
        loaded = 0
        for obj in objects:
            rt = self.type_of(obj)
            meta = _meta(obj)
            ns = self.namespace_key(rt, meta.get("namespace"))
            name = str(meta.get("name") or "")
            if not name:
                raise errors.bad_request("bulk load: an object has no metadata.name")
            self.require_namespace(rt, ns)
            bucket = self.bucket(rt)
            if (ns, name) in bucket:
                raise errors.already_exists(rt, name)
            meta.setdefault("uid", self._new_uid())
            meta.setdefault("creationTimestamp", format_time(self.clock.now()))
            meta.setdefault("generation", 1)
            self.bump_resource_version()
            meta["resourceVersion"] = str(self.resource_version)
            bucket[(ns, name)] = obj
            loaded += 1
        self.expire_history()
        return loaded

    # ------------------------------------------------------------------------------ update

    def prepare_update(
        self,
        rt: ResourceType,
        body: dict[str, Any],
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str = "",
    ) -> PreparedUpdate:
        """The object a PUT of ``body`` would store, with its preconditions checked."""
        rt = self.served(rt)
        obj, meta, ns = self._body_object(rt, body, namespace)
        body_name = meta.get("name") or ""
        name = name or body_name
        if not name:
            raise errors.bad_request("name is required")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        meta["name"] = name
        old = self.peek(rt, name, ns)
        if old is None:
            if subresource or not strategy.allow_create_on_update(rt):
                raise errors.not_found(rt, name)
            meta.pop("resourceVersion", None)
            return PreparedUpdate(old=None, new=self.prepare_create(rt, obj, namespace=ns))
        old_meta = old["metadata"]
        wanted_rv = meta.get("resourceVersion") or ""
        if not wanted_rv and not strategy.allow_unconditional_update(rt):
            raise errors.invalid(
                rt,
                name,
                [
                    (
                        "FieldValueInvalid",
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
                kind=rt.plural,
            )
        if wanted_rv and wanted_rv != old_meta["resourceVersion"]:
            raise errors.conflict(rt, name)
        body_uid = meta.get("uid") or ""
        if body_uid and body_uid != old_meta["uid"]:
            raise errors.conflict(
                rt,
                name,
                f"Precondition failed: UID in precondition: {body_uid}, UID in object meta: "
                f"{old_meta['uid']}",
            )
        if subresource == "status":
            # ResetObjectMetaForStatus + "newObj.Spec = oldObj.Spec": only status changes.
            new = json_copy(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            strategy.fill_status_zero_values(rt, new)
            return PreparedUpdate(old=old, new=new)
        strategy.apply_defaults(rt, obj)
        for field in _SERVER_OWNED:
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["generation"] = old_meta.get("generation", 1)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta.pop("selfLink", None)
        meta.pop("managedFields", None)
        if "status" in rt.subresources:
            # The main resource ignores status changes when a status subresource exists.
            if "status" in old:
                obj["status"] = json_copy(old["status"])
            else:
                obj.pop("status", None)
        if old_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise errors.invalid(
                    rt,
                    name,
                    [
                        (
                            "FieldValueForbidden",
                            "metadata.finalizers",
                            "Forbidden: no new finalizers can be added if the object is being "
                            "deleted, found new finalizers " + _go_string_list(sorted(added)),
                        )
                    ],
                )
        causes = strategy.validate_update(rt, old, obj, subresource=subresource)
        causes += strategy.validate_labels(obj) + strategy.validate_annotations_size(obj)
        if causes:
            raise errors.invalid(rt, name, causes)
        strategy.fill_status_zero_values(rt, obj)
        if subresource != "status":  # a status strategy validates the status only
            self._validate(rt, obj)
        return PreparedUpdate(old=old, new=obj)

    def commit_update(
        self,
        rt: ResourceType,
        update: PreparedUpdate,
        *,
        dry_run: bool = False,
        bump_generation: bool = True,
    ) -> dict[str, Any]:
        """Store a prepared update; 409 Conflict if the object changed since it was prepared."""
        rt = self.served(rt)
        if update.old is None:
            return self.commit_create(rt, update.new, dry_run=dry_run)
        old = update.old
        meta = _meta(update.new)
        ns = self.namespace_key(rt, meta.get("namespace"))
        name = str(meta["name"])
        current = self.peek(rt, name, ns)
        if current is None:
            raise errors.not_found(rt, name)
        if current is not old:
            raise errors.conflict(rt, name)
        new = json_copy(update.new)
        new_meta = _meta(new)
        if bump_generation and strategy.spec_changed(old, new):
            new_meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        new_meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return json_copy(old)  # a no-op update writes nothing
        old_meta = old["metadata"]
        if (
            not new_meta.get("finalizers")
            and old_meta.get("deletionTimestamp")
            and not old_meta.get("deletionGracePeriodSeconds")
        ):
            # Store.shouldDeleteDuringUpdate: the last finalizer is gone, the grace is over.
            if not dry_run:
                self.remove(rt, ns, name)
            return new
        if dry_run:
            return new
        self.write(rt, ns=ns, name=name, event_type="MODIFIED", obj=new, previous=old)
        return json_copy(new)

    def update(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """PUT ``obj`` (resourceVersion set: conditional, else unconditional), without admission."""
        rt = self.type_of(obj)
        meta = obj.get("metadata") or {}
        prepared = self.prepare_update(
            rt, obj, name=meta.get("name"), namespace=meta.get("namespace")
        )
        return self.commit_update(rt, prepared, dry_run=dry_run)

    def update_status(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """PUT ``obj`` to its ``/status`` subresource: only the status is taken."""
        rt = self.type_of(obj)
        meta = obj.get("metadata") or {}
        prepared = self.prepare_update(
            rt, obj, name=meta.get("name"), namespace=meta.get("namespace"), subresource="status"
        )
        return self.commit_update(rt, prepared, dry_run=dry_run)


def _go_string_list(items: list[str]) -> str:
    """``[]string`` as Go's %v prints it: ``[a b]``."""
    return "[" + " ".join(items) + "]"
