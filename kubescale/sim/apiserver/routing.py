"""Resource URL parsing, as kube-apiserver's installer lays the paths out.

``/api/v1/<plural>[/<name>[/<sub>]]`` and ``/apis/<group>/<version>/...`` for cluster-scoped
kinds (and cross-namespace lists of namespaced ones);
``.../namespaces/<ns>/<plural>[/<name>[/<sub>]]`` for namespaced kinds; the deprecated
``.../watch/...`` prefix. ``namespaces/<name>/status`` (and ``/finalize``) are the namespace's
own subresources, anything else after ``namespaces/<ns>/`` is a namespaced resource.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubescale.kube.resources import ResourceType

from . import errors
from .registry import ResourceRegistry

__all__ = ["Target", "parse_target"]

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a resource URL addresses."""

    rt: ResourceType
    namespace: str | None
    """``None`` for cluster-scoped kinds and for cross-namespace collections."""
    name: str | None
    subresource: str
    legacy_watch: bool


def _not_found() -> errors.ApiError:
    return errors.status_error(code=404, message="the server could not find the requested resource")


def parse_target(
    registry: ResourceRegistry, *, group: str, version: str, parts: list[str]
) -> Target:
    """Resolve the path segments after ``/api/v1`` or ``/apis/<g>/<v>``; 404 if unknown."""
    legacy_watch = bool(parts) and parts[0] == "watch"
    if legacy_watch:
        parts = parts[1:]
    if not parts or any(not p for p in parts):
        raise _not_found()
    namespace: str | None = None
    if (
        parts[0] == "namespaces"
        and len(parts) >= 3
        and not (len(parts) == 3 and parts[2] in _NAMESPACE_SUBRESOURCES)
    ):
        namespace = parts[1]
        parts = parts[2:]
        rt = registry.resolve(group, version, parts[0])
        if rt is None or not rt.namespaced:
            raise _not_found()
    else:
        rt = registry.resolve(group, version, parts[0])
        if rt is None:
            raise _not_found()
        if rt.namespaced and len(parts) > 1:
            raise _not_found()  # a namespaced object needs its namespace in the path
    if len(parts) > 3:
        raise _not_found()
    name = parts[1] if len(parts) >= 2 else None
    subresource = parts[2] if len(parts) == 3 else ""
    if subresource and subresource not in rt.subresources:
        raise _not_found()
    if legacy_watch and subresource:
        raise _not_found()
    return Target(
        rt=rt, namespace=namespace, name=name, subresource=subresource, legacy_watch=legacy_watch
    )
