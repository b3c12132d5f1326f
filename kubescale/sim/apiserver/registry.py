"""The resource types the server currently serves: the built-in catalogue plus registered CRDs.

The built-in kinds (:data:`~.served_kinds.SERVED`) are fixed at import time; a
CustomResourceDefinition created at run time (``kubectl apply -f crd.yaml``) adds a type, and
deleting it removes the type again. Lookups go through here, never through
``kubescale.kube.resources.by_plural``, so CRD kinds resolve like built-ins. One version per
(group, plural): a CRD is served at its storage version only.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubescale.kube.resources import ResourceType

from .served_kinds import SERVED

__all__ = ["BUILTIN_GROUPS", "ResourceRegistry"]

BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "scheduling.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
    }
)
"""Groups compiled into kube-apiserver; every other group is served from a CRD."""


class ResourceRegistry:
    """Mutable catalogue keyed by ``(group, plural)``; iteration order is insertion order."""

    def __init__(self, types: Iterable[ResourceType] = SERVED) -> None:
        self._by_key: dict[tuple[str, str], ResourceType] = {rt.key: rt for rt in types}

    def add(self, rt: ResourceType) -> None:
        """Serve ``rt`` (replacing a CRD-defined type with the same group and plural)."""
        if rt.group in BUILTIN_GROUPS:
            raise ValueError(f"{rt.plural}.{rt.group} is a built-in resource")
        self._by_key[rt.key] = rt

    def remove(self, key: tuple[str, str]) -> ResourceType | None:
        if key[0] in BUILTIN_GROUPS:
            return None
        return self._by_key.pop(key, None)

    @staticmethod
    def is_builtin(rt: ResourceType) -> bool:
        """Whether kube-apiserver compiles the kind in (else a CRD serves it)."""
        return rt.group in BUILTIN_GROUPS

    def by_plural(self, group: str, plural: str) -> ResourceType | None:
        return self._by_key.get((group, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self._by_key.values():
            if rt.group_version == api_version and rt.kind == kind:
                return rt
        return None

    def resolve(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``/apis/<group>/<version>/<plural>`` (or ``/api/v1/<plural>``)."""
        rt = self._by_key.get((group, plural))
        if rt is None or rt.version != version:
            return None
        return rt

    def types(self) -> list[ResourceType]:
        return list(self._by_key.values())

    def group_versions(self) -> dict[str, list[str]]:
        """``{group: [versions]}`` in first-seen order; the core group is ``""``."""
        result: dict[str, list[str]] = {}
        for rt in self._by_key.values():
            versions = result.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return result
