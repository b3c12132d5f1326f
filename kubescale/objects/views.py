"""Thin read-only views of API objects: what every part of kubescale reads from an object.

kubescale keeps API objects as the JSON dicts the API server sent (typed by the TypedDicts of
:mod:`kubescale.objects`, and exactly what was written); these views read the few fields
everyone needs without each module re-deriving them — and re-deriving the edge cases (a missing
``metadata``, a non-string name, an owner reference without ``controller``) slightly
differently.

* :func:`mapping` / :func:`optional_mapping` / :func:`text` — a nested value as a mapping /
  string, or empty (or ``None``);
* :class:`Meta` — ``metadata``: name, namespace, uid, labels, annotations, resourceVersion,
  generation, creation and deletion times, owner references and the controller reference;
* :class:`OwnerRef` — one ``ownerReferences`` entry;
* :func:`list_meta` — a list's ``metadata`` (``resourceVersion``, ``continue``);
* :func:`spec_of` / :func:`status_of` — ``spec`` / ``status`` as a mapping (missing or
  malformed: empty); of a typed object (a :class:`HasSpec` / :class:`HasStatus`: ``Pod``,
  ``Node``, …) it is the kind's spec/status TypedDict, so mypy checks the fields read from it;
  :func:`optional_spec_of` / :func:`optional_status_of` — the same, ``None`` when missing or
  malformed (where absent and empty differ);
* :func:`raw_metadata` / :func:`raw_spec` / :func:`raw_status` — the field exactly as sent
  (``None`` when absent), typed ``object`` so the caller must check its type: for code that keeps
  a malformed value as it is (the admission memo's key, a status written back unchanged);
* :class:`ObjectRef` — a namespaced reference by ``apiVersion``/``kind``/``name`` (a VPA's
  ``targetRef``, an HPA's ``scaleTargetRef``, a pod's controller), the key controllers are
  looked up by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypedDict, TypeVar, cast, overload

from kubescale.base.times import parse_time
from kubescale.objects.meta import ListMeta, ObjectMeta, OwnerReference

__all__ = [
    "HasSpec",
    "HasStatus",
    "Meta",
    "ObjectRef",
    "OwnerRef",
    "list_meta",
    "mapping",
    "meta",
    "optional_mapping",
    "optional_spec_of",
    "optional_status_of",
    "raw_metadata",
    "raw_spec",
    "raw_status",
    "spec_of",
    "status_of",
    "text",
]


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping (a JSON object), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def optional_mapping(value: object) -> Mapping[str, Any] | None:
    """``value`` when it is a mapping, else ``None`` (for fields where absent and empty
    differ)."""
    return value if isinstance(value, Mapping) else None


def list_meta(obj: Mapping[str, Any]) -> ListMeta:
    """A list's ``metadata`` (``resourceVersion``, ``continue``); empty when missing."""
    return cast(ListMeta, mapping(obj.get("metadata")))


SpecT = TypeVar("SpecT", bound=Mapping[str, object])
StatusT = TypeVar("StatusT", bound=Mapping[str, object])


class HasSpec(TypedDict, Generic[SpecT], total=False):
    """Any typed kind with a ``spec`` (``Pod`` is a ``HasSpec[PodSpec]``): :func:`spec_of` of a
    typed object is its kind's spec TypedDict, so ``mypy --strict`` checks the field names read
    from it."""

    spec: SpecT


class HasStatus(TypedDict, Generic[StatusT], total=False):
    """Any typed kind with a ``status`` (``Node`` is a ``HasStatus[NodeStatus]``)."""

    status: StatusT


@overload
def spec_of(obj: HasSpec[SpecT]) -> SpecT: ...
@overload
def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]: ...
def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj["spec"]`` as a mapping; empty when missing, ``null`` or not an object (typed: the
    kind's spec TypedDict)."""
    return mapping(obj.get("spec"))


@overload
def status_of(obj: HasStatus[StatusT]) -> StatusT: ...
@overload
def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]: ...
def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj["status"]`` as a mapping; empty when missing, ``null`` or not an object (typed: the
    kind's status TypedDict)."""
    return mapping(obj.get("status"))


@overload
def optional_spec_of(obj: HasSpec[SpecT]) -> SpecT | None: ...
@overload
def optional_spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None: ...
def optional_spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``obj["spec"]`` when it is a mapping, else ``None`` (missing, ``null``, malformed)."""
    return optional_mapping(obj.get("spec"))


@overload
def optional_status_of(obj: HasStatus[StatusT]) -> StatusT | None: ...
@overload
def optional_status_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None: ...
def optional_status_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``obj["status"]`` when it is a mapping, else ``None`` (missing, ``null``, malformed)."""
    return optional_mapping(obj.get("status"))


def raw_metadata(obj: Mapping[str, Any]) -> object:
    """``obj["metadata"]`` as sent, unchecked (``None`` when absent)."""
    return obj.get("metadata")


def raw_spec(obj: Mapping[str, Any]) -> object:
    """``obj["spec"]`` as sent, unchecked (``None`` when absent)."""
    return obj.get("spec")


def raw_status(obj: Mapping[str, Any]) -> object:
    """``obj["status"]`` as sent, unchecked (``None`` when absent)."""
    return obj.get("status")


def text(value: object) -> str:
    """``value`` when it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class OwnerRef:
    """One entry of ``metadata.ownerReferences`` (:class:`kubescale.objects.meta.OwnerReference`),
    every field read."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool

    @classmethod
    def of(cls, raw: OwnerReference | Mapping[str, Any]) -> OwnerRef:
        return cls(
            api_version=text(raw.get("apiVersion")),
            kind=text(raw.get("kind")),
            name=text(raw.get("name")),
            uid=text(raw.get("uid")),
            controller=raw.get("controller") is True,
        )


@dataclass(frozen=True)
class ObjectRef:
    """A namespaced object by ``apiVersion``/``kind``/``name``
    (upstream VPA's ``controllerfetcher.ControllerKeyWithAPIVersion``)."""

    api_version: str
    kind: str
    name: str
    namespace: str

    @property
    def group(self) -> str:
        """The API group of ``api_version`` (``""`` for the core group)."""
        group, _, _ = self.api_version.rpartition("/")
        return group


class Meta:
    """A read-only view of an object's ``metadata`` (missing or malformed fields read empty)."""

    __slots__ = ("_raw",)

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self._raw: ObjectMeta = cast(ObjectMeta, mapping(obj.get("metadata")))

    @property
    def raw(self) -> ObjectMeta:
        return self._raw

    @property
    def name(self) -> str:
        return text(self._raw.get("name"))

    @property
    def namespace(self) -> str:
        return text(self._raw.get("namespace"))

    @property
    def uid(self) -> str:
        return text(self._raw.get("uid"))

    @property
    def resource_version(self) -> str:
        return text(self._raw.get("resourceVersion"))

    @property
    def generation(self) -> int:
        value = self._raw.get("generation")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @property
    def labels(self) -> Mapping[str, str]:
        return mapping(self._raw.get("labels"))

    @property
    def annotations(self) -> Mapping[str, str]:
        return mapping(self._raw.get("annotations"))

    @property
    def creation_timestamp(self) -> datetime | None:
        return parse_time(self._raw.get("creationTimestamp"))

    @property
    def deletion_timestamp(self) -> datetime | None:
        return parse_time(self._raw.get("deletionTimestamp"))

    @property
    def deleting(self) -> bool:
        """Whether ``deletionTimestamp`` is set (the object is being deleted)."""
        return bool(self._raw.get("deletionTimestamp"))

    @property
    def owner_references(self) -> tuple[OwnerRef, ...]:
        refs: object = self._raw.get("ownerReferences")  # malformed JSON reads empty
        if not isinstance(refs, list):
            return ()
        return tuple(OwnerRef.of(ref) for ref in refs if isinstance(ref, Mapping))

    @property
    def controller(self) -> OwnerRef | None:
        """``metav1.GetControllerOf``: the first owner reference with ``controller: true``
        (only that one is read: every informer indexes every object by it)."""
        refs: object = self._raw.get("ownerReferences")
        if not isinstance(refs, list):
            return None
        for ref in refs:
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                return OwnerRef.of(ref)
        return None

    @property
    def key(self) -> str:
        """``namespace/name`` (``name`` for cluster-scoped objects), client-go's cache key."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def identity(self) -> str:
        """The key of facts kept per object across iterations: its ``uid`` (a re-created
        object is another one), ``namespace/name`` without one."""
        return self.uid or f"{self.namespace}/{self.name}"


def meta(obj: Mapping[str, Any]) -> Meta:
    """The :class:`Meta` view of ``obj``."""
    return Meta(obj)
