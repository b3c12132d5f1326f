"""CustomResourceDefinitions: serving a CRD's kind while the CRD object exists.

Creating (or updating) an ``apiextensions.k8s.io/v1`` CustomResourceDefinition — through the
API (``kubectl apply -f crd.yaml``), the in-process store, or the YAML files of ``crd_dirs`` at
start-up — serves its kind at the storage version, with the ``status``/``scale``
subresources the version declares, and marks the CRD ``NamesAccepted`` and ``Established``
(what the apiextensions controllers do within moments in a real cluster). Deleting the CRD
deletes its objects (the ``customresourcecleanup`` finalizer's work) and stops serving the kind.

Validation mirrors the apiextensions rules the tests can hit: the name must be
``<plural>.<group>``, exactly one version must be the storage version, and the group must not be
one of kube-apiserver's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from kubescale.base.logs import component_logger
from kubescale.kube.resources import ResourceType

from . import errors
from .history import StoredEvent
from .json_copy import json_copy
from .registry import BUILTIN_GROUPS
from .served_kinds import CUSTOM_RESOURCE_DEFINITIONS
from .store import ObjectStore, PreparedUpdate, format_time

__all__ = ["CrdController", "load_crd_files", "resource_type_from_crd"]

log = component_logger("apiserver.crds")


def _invalid(name: str, field: str, message: str) -> errors.ApiError:
    return errors.invalid(
        CUSTOM_RESOURCE_DEFINITIONS, name, [("FieldValueInvalid", field, message)]
    )


def resource_type_from_crd(crd: dict[str, Any]) -> ResourceType:
    """The served type of a CRD (its storage version); 422 Invalid for a malformed CRD."""
    name = str((crd.get("metadata") or {}).get("name") or "")
    spec = crd.get("spec") or {}
    group = str(spec.get("group") or "")
    names = spec.get("names") or {}
    plural, kind = str(names.get("plural") or ""), str(names.get("kind") or "")
    if not group:
        raise errors.invalid(
            CUSTOM_RESOURCE_DEFINITIONS,
            name,
            [("FieldValueRequired", "spec.group", "Required value")],
        )
    if group in BUILTIN_GROUPS or "." not in group:
        raise _invalid(
            name,
            "spec.group",
            f'Invalid value: "{group}": should be a domain with at least one dot',
        )
    if not plural or not kind:
        raise errors.invalid(
            CUSTOM_RESOURCE_DEFINITIONS,
            name,
            [
                (
                    "FieldValueRequired",
                    "spec.names.plural" if not plural else "spec.names.kind",
                    "Required value",
                )
            ],
        )
    if name != f"{plural}.{group}":
        raise _invalid(
            name,
            "metadata.name",
            f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
        )
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    storage = [v for v in versions if v.get("storage")]
    if len(storage) != 1:
        raise _invalid(
            name,
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        )
    version = storage[0]
    subresources = version.get("subresources") or spec.get("subresources") or {}
    scope = spec.get("scope", "Namespaced")
    return ResourceType(
        group=group,
        version=str(version.get("name") or ""),
        kind=kind,
        plural=plural,
        namespaced=scope != "Cluster",
        subresources=frozenset(k for k in ("status", "scale") if k in subresources),
        short_names=tuple(str(s) for s in names.get("shortNames") or ()),
    )


class CrdController:
    """Keeps the registry in step with the CRD objects of the store."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        store.listeners.append(self._on_event)
        store.validators[CUSTOM_RESOURCE_DEFINITIONS.key] = validate_crd

    def _on_event(self, event: StoredEvent) -> None:
        if event.resource != CUSTOM_RESOURCE_DEFINITIONS.key:
            return
        if event.type == "DELETED":
            self._unserve(event.obj)
            return
        rt = resource_type_from_crd(event.obj)
        self._store.registry.add(rt)
        self._establish(event.obj, rt)

    def _establish(self, crd: dict[str, Any], rt: ResourceType) -> None:
        store = self._store
        current = store.peek(CUSTOM_RESOURCE_DEFINITIONS, crd["metadata"]["name"])
        if current is None:
            return
        names = json_copy((current.get("spec") or {}).get("names") or {})
        names.setdefault("singular", rt.kind.lower())
        names.setdefault("listKind", rt.list_kind)
        old_status = current.get("status") or {}
        old_conditions = {c.get("type"): c for c in old_status.get("conditions") or []}
        now = format_time(store.clock.now())
        conditions = []
        for kind, reason, message in (
            ("NamesAccepted", "NoConflicts", "no conflicts found"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ):
            previous = old_conditions.get(kind) or {}
            conditions.append(
                {
                    "type": kind,
                    "status": "True",
                    "lastTransitionTime": previous.get("lastTransitionTime", now),
                    "reason": reason,
                    "message": message,
                }
            )
        stored_versions = list(old_status.get("storedVersions") or [])
        if rt.version not in stored_versions:
            stored_versions.append(rt.version)
        status = {
            "conditions": conditions,
            "acceptedNames": names,
            "storedVersions": stored_versions,
        }
        if old_status == status:
            return
        updated = json_copy(current)
        updated["status"] = status
        store.commit_update(
            CUSTOM_RESOURCE_DEFINITIONS,
            PreparedUpdate(old=current, new=updated),
            bump_generation=False,
        )

    def _unserve(self, crd: dict[str, Any]) -> None:
        try:
            rt = resource_type_from_crd(crd)
        except errors.ApiError:
            return
        served = self._store.registry.by_plural(rt.group, rt.plural)
        if served is None:
            return
        for obj in list(self._store.snapshots(served)):
            meta = obj["metadata"]
            self._store.purge(served, meta["name"], meta.get("namespace"))
        self._store.registry.remove(served.key)


def validate_crd(crd: dict[str, Any]) -> None:
    """Reject a CRD the apiextensions validation would (raises ApiError)."""
    resource_type_from_crd(crd)


_parsed: dict[tuple[Path, int, int], list[dict[str, Any]]] = {}
"""CRD documents by (file, mtime, size): tests start many servers, YAML parsing is slow."""


def _documents(paths: Iterable[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        stat = path.stat()
        key = (path.resolve(), stat.st_mtime_ns, stat.st_size)
        if key not in _parsed:
            with path.open(encoding="utf-8") as handle:
                _parsed[key] = [
                    doc
                    for doc in yaml.safe_load_all(handle)
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
                ]
        docs.extend(json_copy(_parsed[key]))
    return docs


def load_crd_files(store: ObjectStore, dirs: Sequence[Path]) -> list[str]:
    """Create (or replace) every CRD found in ``*.yaml``/``*.yml`` files of ``dirs``."""
    files: list[Path] = []
    for directory in dirs:
        if directory.is_dir():
            files.extend(sorted(p for p in directory.iterdir() if p.suffix in {".yaml", ".yml"}))
    loaded = []
    for doc in _documents(files):
        name = str((doc.get("metadata") or {}).get("name") or "")
        existing = store.peek(CUSTOM_RESOURCE_DEFINITIONS, name)
        if existing is None:
            store.create(doc)
        else:
            replacement = json_copy(doc)
            replacement.setdefault("metadata", {})["resourceVersion"] = existing["metadata"][
                "resourceVersion"
            ]
            store.update(replacement)
        loaded.append(name)
        log.info("serving CRD", extra={"fields": {"crd": name}})
    return loaded
