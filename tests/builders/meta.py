"""``metadata`` and owner references, shared by every kind's builder."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, cast

P = ParamSpec("P")
T = TypeVar("T")


def owner_reference(
    *,
    kind: str = "ReplicaSet",
    name: str = "web",
    api_version: str = "apps/v1",
    uid: str | None = None,
    controller: bool | None = True,
) -> dict[str, Any]:
    """A controller reference; ``uid`` defaults to ``uid-<kind>-<name>``."""
    ref: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid if uid is not None else f"uid-{kind}-{name}",
    }
    if controller is not None:
        ref["controller"] = controller
    return ref


def metadata(
    *,
    name: str | None,
    namespace: str | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    creation_timestamp: str | None = None,
    deletion_timestamp: str | None = None,
    generation: int | None = None,
    resource_version: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An object's ``metadata``: only the fields given (``None`` leaves a field out)."""
    meta: dict[str, Any] = {}
    for key, value in (
        ("name", name),
        ("namespace", namespace),
        ("uid", uid),
        ("resourceVersion", resource_version),
        ("generation", generation),
        ("creationTimestamp", creation_timestamp),
        ("deletionTimestamp", deletion_timestamp),
    ):
        if value is not None:
            meta[key] = value
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if owner_references is not None:
        meta["ownerReferences"] = [dict(o) for o in owner_references]
    meta.update(extra or {})
    return meta


def manifest(
    api_version: str | None,
    kind: str,
    meta: Mapping[str, Any] | None,
    **sections: Any,
) -> dict[str, Any]:
    """``{apiVersion, kind, metadata, <sections>}``; ``api_version=None`` leaves out the type
    fields (as an object inside a list or an informer's cache has them), a ``None`` section is
    left out. The kinds' builders leave out an empty ``spec`` unless it is given (``spec={}``)."""
    body: dict[str, Any] = {}
    if api_version is not None:
        body["apiVersion"] = api_version
        body["kind"] = kind
    if meta is not None:
        body["metadata"] = dict(meta)
    for key, value in sections.items():
        if value is not None:
            body[key] = value
    return body


def namespace(
    *,
    name: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    metadata_extra: Mapping[str, Any] | None = None,
    api_version: str | None = "v1",
) -> dict[str, Any]:
    """A Namespace."""
    meta = metadata(name=name, labels=labels, annotations=annotations, extra=metadata_extra)
    return manifest(api_version, "Namespace", meta)


def json_body(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A typed object (``Pod``, ``Node``, … of :mod:`kubescale.objects`) as the plain JSON dict
    a request body or the simulated API server's store takes: a shallow copy."""
    return dict(obj)


def stored_as(obj: Mapping[str, Any], kind: type[T]) -> T:
    """``obj`` as read back from the simulated API server (its store's or the client's JSON)
    typed as ``kind``, its :mod:`kubescale.objects` TypedDict: the tests' transport boundary,
    as the informer is the product's."""
    return cast(T, obj)


def typed_builder(build: Callable[P, dict[str, Any]], kind: type[T]) -> Callable[P, T]:
    """``build`` (a builder returning the plain dict) as a builder of ``kind``, the
    :mod:`kubescale.objects` TypedDict of the object it builds, with the same parameters: the
    one place a built dict becomes a typed object (the builders' own return types stay plain
    dicts while the tests of systems not typed yet mutate and store them as such)."""

    def typed(*args: P.args, **kwargs: P.kwargs) -> T:
        return cast(T, build(*args, **kwargs))  # the builder's one exit: an object of ``kind``

    typed.__name__ = typed.__qualname__ = f"typed_{kind.__name__.lower()}"
    return typed
