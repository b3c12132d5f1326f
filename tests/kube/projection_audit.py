"""Which fields do a system's readers read, and would the projected cache still hold them?

:func:`audit_projection` makes every informer of a projected kind cache the *whole* object, in
dicts that record each field read against the kind's declared projection
(:data:`kubescale.objects.projection.PROJECTIONS`): a ``get``/``[]``/``in`` of a field the
projection would drop (or of an annotation it drops) is a *dropped read* — with a projected
cache that reader would see the field missing. Run a system's scenario under the audit and
assert :attr:`ProjectionAudit.dropped` is empty: that test fails as soon as a field the system
reads is taken out of the projection (or a reader starts reading a field nobody declared).

Reads are recorded on the cached objects and on deep copies of them; a reader that copies an
object with ``dict(...)``/``{**obj}`` keeps reading through the (still recording) nested dicts.
Iterating over an object's fields (``for k in spec``) is not a dropped read: only named fields
are.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubescale.kube import informer as informer_module
from kubescale.objects.projection import KEEP, PROJECTIONS, UNREAD_ANNOTATIONS, Projection

Path = tuple[str, ...]
"""``("Pod", "spec", "containers", "[]", "resources")``: a field read, list items as ``[]``,
keys of a ``dict[str, T]`` (labels, annotations) as themselves."""

DECLARED: Mapping[str, Projection] = {kind: p for (_, kind), p in PROJECTIONS.items()}
"""The declared projections by kind (kinds are unique among them)."""


@dataclass
class ProjectionAudit:
    """Every field the readers read from projected kinds' caches (``Kind``-first paths)."""

    read: set[Path] = field(default_factory=set)
    _noted: dict[Path, set[object]] = field(default_factory=dict, repr=False)
    """The names read so far under each path: a read already recorded costs one set lookup,
    not a new tuple hashed into :attr:`read` (readers read the same fields over and over)."""

    def noted(self, path: Path) -> set[object]:
        """The names recorded so far under ``path`` (one set per path, shared by every object
        wrapped at that path)."""
        return self._noted.setdefault(path, set())

    def dropped(self, projections: Mapping[str, Projection] = DECLARED) -> set[Path]:
        """The reads ``projections`` would not serve (module docstring)."""
        return {path for path in self.read if not _served(path, projections)}

    def check(self) -> None:
        dropped = sorted(".".join(path) for path in self.dropped())
        assert not dropped, f"reads of fields the projected cache drops: {dropped}"

    def of(self, kind: str) -> set[Path]:
        """The paths read of ``kind``, without the kind."""
        return {path[1:] for path in self.read if path[0] == kind}


def _served(path: Path, projections: Mapping[str, Projection]) -> bool:
    node = projections.get(path[0])
    if node is None:
        return True  # a kind cached whole
    for step in path[1:]:
        if node is KEEP:
            return True
        if step == "[]":
            node = node.items or KEEP
        elif node.fields is not None:
            if step not in node.fields:
                return False
            node = node.fields[step]
        elif node.values is not None:
            if node.annotations and step in UNREAD_ANNOTATIONS:
                return False
            node = node.values
        else:
            return True
    return True


class _Traced(dict[str, Any]):
    """A cached object (or a nested object of it) that records reads by name."""

    __slots__ = ("_audit", "_noted", "_path", "_projection")

    _audit: ProjectionAudit
    _noted: set[object]
    _path: Path
    _projection: Projection

    def _note(self, key: object) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self._audit.read.add((*self._path, str(key)))

    def __getitem__(self, key: str) -> Any:
        self._note(key)
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        self._note(key)
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return dict.__contains__(self, key)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Traced:
        plain = {k: copy.deepcopy(v, memo) for k, v in dict.items(self)}
        return _wrap_dict(plain, self._projection, self._path, self._audit)

    def __copy__(self) -> _Traced:
        return _wrap_dict(dict(dict.items(self)), self._projection, self._path, self._audit)


def _wrap_dict(
    value: dict[str, Any], projection: Projection, path: Path, audit: ProjectionAudit
) -> _Traced:
    traced = _Traced(value)
    traced._audit, traced._path, traced._projection = audit, path, projection
    traced._noted = audit.noted(path)
    return traced


def _wrap(value: Any, projection: Projection, path: Path, audit: ProjectionAudit) -> Any:
    if projection is KEEP:
        return value
    if projection.fields is not None and isinstance(value, dict):
        fields = projection.fields
        children = {k: _wrap(v, fields.get(k, KEEP), (*path, k), audit) for k, v in value.items()}
        return _wrap_dict(children, projection, path, audit)
    if projection.values is not None and isinstance(value, dict):
        children = {k: _wrap(v, projection.values, (*path, k), audit) for k, v in value.items()}
        if projection.annotations:
            return _wrap_dict(children, projection, path, audit)
        return children
    if projection.items is not None and isinstance(value, list):
        return [_wrap(item, projection.items, (*path, "[]"), audit) for item in value]
    return value


def audit_projection(monkeypatch: pytest.MonkeyPatch) -> ProjectionAudit:
    """From now on, informers of projected kinds cache whole, recording objects (module
    docstring)."""
    audit = ProjectionAudit()

    def traced(obj: dict[str, Any], projection: Projection, *, key: str = "") -> Any:
        del key
        return _wrap(obj, projection, (str(obj.get("kind") or "?"),), audit)

    monkeypatch.setattr(informer_module, "project", traced)
    return audit


def without(kind: str, path: str) -> dict[str, Projection]:
    """The declared projections, with ``kind``'s field at dotted ``path`` (``spec.nodeName``;
    list items are stepped through) left out."""
    return {**DECLARED, kind: _without(DECLARED[kind], path)}


def _without(projection: Projection, path: str) -> Projection:
    head, _, rest = path.partition(".")
    fields = dict(projection.fields or {})
    if not rest:
        del fields[head]
    else:
        child = fields[head]
        if child.items is not None:
            fields[head] = Projection(items=_without(child.items, rest), name=child.name)
        else:
            fields[head] = _without(child, rest)
    return Projection(fields=fields, name=projection.name)
