"""Discovery: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>`` and ``/version``.

Shapes as kube-apiserver serves them (``APIVersions``, ``APIGroupList``, ``APIGroup``,
``APIResourceList`` with one entry per resource and one per subresource, e.g. ``pods/status``;
``deployments/scale`` is kind Scale of autoscaling/v1, ``pods/eviction`` kind Eviction of
policy/v1). Only the legacy (unaggregated) discovery format is served: clients that ask for
aggregated discovery (``as=APIGroupDiscoveryList``) fall back to it when the answer is a plain
``APIGroupList``, as kubectl and client-go do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from kubescale.kube.resources import ResourceType

from .registry import ResourceRegistry

__all__ = [
    "KUBERNETES_VERSION",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "version_info",
]

KUBERNETES_VERSION: Final = "v1.31.0"
_SUBRESOURCE_VERBS: Final = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "resize": ("get", "patch", "update"),
    "eviction": ("create",),
    "binding": ("create",),
}
_SUBRESOURCE_KIND: Final = {
    "scale": ("autoscaling", "v1", "Scale"),
    "eviction": ("policy", "v1", "Eviction"),
    "binding": ("", "", "Binding"),
}
_ALSO_SERVED: Final = {("autoscaling", "horizontalpodautoscalers"): "v1"}
"""Kinds served at another version than the stored one, converted on every request
(:mod:`.hpa_versions`); the stored version stays the preferred one."""
_CATEGORY_ALL: Final = frozenset(
    {
        ("", "pods"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("autoscaling", "horizontalpodautoscalers"),
    }
)


def version_info() -> dict[str, str]:
    """``/version`` (version.Info)."""
    return {
        "major": "1",
        "minor": "31",
        "gitVersion": KUBERNETES_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.5",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    """``/api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.key in _CATEGORY_ALL:
        entry["categories"] = ["all"]
    entries = [entry]
    for sub in sorted(rt.subresources):
        sub_entry: dict[str, Any] = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(_SUBRESOURCE_VERBS.get(sub, ("get",))),
        }
        if sub in _SUBRESOURCE_KIND:
            group, version, kind = _SUBRESOURCE_KIND[sub]
            if group:
                sub_entry["group"] = group
                sub_entry["version"] = version
            sub_entry["kind"] = kind
        entries.append(sub_entry)
    return entries


def api_resource_list(
    registry: ResourceRegistry, group: str, version: str
) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<g>/<v>``; ``None`` if nothing is served there."""
    types = [rt for rt in registry.types() if rt.group == group and rt.version == version]
    for stored, also in _ALSO_SERVED.items():
        rt = registry.by_plural(*stored)
        if rt is not None and (group, version) == (rt.group, also):
            types.append(replace(rt, version=also))
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.extend(_resource_entries(rt))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_group(registry: ResourceRegistry, group: str) -> dict[str, Any] | None:
    """``/apis/<g>`` (APIGroup), ``None`` if the group is not served."""
    versions = list(registry.group_versions().get(group) or ())
    if not group or not versions:
        return None
    for stored, also in _ALSO_SERVED.items():
        if stored[0] == group and registry.by_plural(*stored) is not None and also not in versions:
            versions.append(also)
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": dict(entries[0]),
    }


def api_group_list(
    registry: ResourceRegistry, extra_groups: list[dict[str, Any]]
) -> dict[str, Any]:
    """``/apis``: every named group (the core group is under ``/api`` only) + ``extra_groups``."""
    groups = []
    for group in registry.group_versions():
        if not group:
            continue
        document = api_group(registry, group)
        if document is not None:
            groups.append({k: v for k, v in document.items() if k not in ("kind", "apiVersion")})
    for extra in extra_groups:
        groups.append({k: v for k, v in extra.items() if k not in ("kind", "apiVersion")})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
