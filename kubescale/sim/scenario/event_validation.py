"""Reading a scenario's ``objects``, ``events``, ``extenders`` and ``kubescale`` sections.

Objects are raw Kubernetes manifests: they need ``apiVersion``, ``kind`` of a type the simulated
API server serves (or of a CustomResourceDefinition listed before them), and
``metadata.name``; a namespaced object without a namespace goes to ``default`` as with kubectl.
Extender entries are checked against the field names and types of a KubeSchedulerConfiguration
``extenders`` entry (``urlPrefix`` required; ``weight`` positive, as upstream's validation
requires when ``prioritizeVerb`` is set) and kept as written.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Set
from pathlib import Path
from typing import Any, Final

from kubescale.sim.apiserver.faults import VERBS
from kubescale.sim.apiserver.served_kinds import served_kind

from .scenario_components import component_names, validate_flags
from .scenario_fields import Problems, field_path
from .scenario_format import (
    ApplyEvent,
    DeleteEvent,
    FaultEvent,
    ScenarioEvent,
    SetLoadEvent,
    SetMetricEvent,
)
from .usage_specs import parse_usage

__all__ = ["extender", "kubescale_components", "manifest", "scenario_event"]

EVENT_ACTIONS: Final = ("apply", "delete", "setLoad", "setMetric", "fault")
METRIC_TYPES: Final = ("External", "Pods")
FAULTS: Final = ("apiError", "dropWatches", "expireHistory", "clear")
_EVENT_FIELDS: Final = {
    "apply": ("at", "action", "object"),
    "delete": ("at", "action", "apiVersion", "kind", "name", "namespace"),
    "setLoad": ("at", "action", "workload", "container", "usage"),
    "setMetric": ("at", "action", "type", "namespace", "name", "value", "selector", "labels"),
    "fault": (
        "at",
        "action",
        "fault",
        "verb",
        "resource",
        "status",
        "count",
        "retryAfter",
        "delay",
    ),
}
_EXTENDER_FIELDS: Final = (
    "urlPrefix",
    "filterVerb",
    "prioritizeVerb",
    "preemptVerb",
    "bindVerb",
    "weight",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
)
_TLS_FIELDS: Final = (
    "insecure",
    "serverName",
    "certFile",
    "keyFile",
    "caFile",
    "certData",
    "keyData",
    "caData",
)


def _kind_is_known(api_version: str, kind: str, crd_kinds: Set[tuple[str, str]]) -> bool:
    return served_kind(api_version, kind) is not None or (api_version, kind) in crd_kinds


def _crd_kinds(obj: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(apiVersion, kind) pairs a CustomResourceDefinition manifest serves."""
    if obj.get("kind") != "CustomResourceDefinition":
        return set()
    spec = obj.get("spec") or {}
    kind = (spec.get("names") or {}).get("kind")
    return {
        (f"{spec.get('group')}/{version.get('name')}", str(kind))
        for version in spec.get("versions") or []
        if isinstance(version, dict)
    }


def manifest(
    p: Problems,
    value: object,
    path: str,
    *,
    known_ns: Set[str],
    crd_kinds: set[tuple[str, str]] | None = None,
) -> dict[str, Any] | None:
    """A raw manifest (a copy, with ``metadata.namespace`` filled for namespaced kinds)."""
    if not isinstance(value, dict):
        p.mapping(value, path, allowed=())
        return None
    kinds = crd_kinds if crd_kinds is not None else set()
    api_version = p.string(value.get("apiVersion"), field_path(path, "apiVersion"))
    kind = p.string(value.get("kind"), field_path(path, "kind"))
    if value.get("apiVersion") is None:
        p.add(field_path(path, "apiVersion"), "required")
    if value.get("kind") is None:
        p.add(field_path(path, "kind"), "required")
    metadata = value.get("metadata")
    meta_path = field_path(path, "metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        p.add(field_path(meta_path, "name"), "required")
        return None
    if api_version is None or kind is None:
        return None
    if not _kind_is_known(api_version, kind, kinds):
        p.add(
            field_path(path, "kind"),
            f'unknown kind "{kind}" of apiVersion "{api_version}" (not served by the simulated '
            "API server; a CustomResourceDefinition listed earlier in objects adds its kinds)",
        )
        return None
    obj = copy.deepcopy(value)
    kinds |= _crd_kinds(obj)
    resource = served_kind(api_version, kind)
    if resource is None or resource.namespaced:
        namespace = obj["metadata"].setdefault("namespace", "default")
        if namespace not in known_ns:
            p.add(
                field_path(meta_path, "namespace"), f"namespace {namespace!r} is not in namespaces"
            )
    return obj


def _apply(
    p: Problems,
    raw: Mapping[str, Any],
    path: str,
    *,
    at: float,
    known_ns: Set[str],
    crd_kinds: set[tuple[str, str]],
) -> ApplyEvent | None:
    obj = manifest(
        p, raw.get("object"), field_path(path, "object"), known_ns=known_ns, crd_kinds=crd_kinds
    )
    return ApplyEvent(at=at, object=obj) if obj is not None else None


def _delete(p: Problems, raw: Mapping[str, Any], path: str, *, at: float) -> DeleteEvent | None:
    api_version = p.string(raw.get("apiVersion"), field_path(path, "apiVersion"))
    kind = p.string(raw.get("kind"), field_path(path, "kind"))
    name = p.string(raw.get("name"), field_path(path, "name"))
    namespace = p.string(raw.get("namespace"), field_path(path, "namespace"))
    if api_version is None or kind is None or name is None:
        return None
    resource = served_kind(api_version, kind)
    if resource is None:
        p.add(field_path(path, "kind"), f'unknown kind "{kind}" of apiVersion "{api_version}"')
        return None
    if resource.namespaced and namespace is None:
        namespace = "default"
    return DeleteEvent(
        at=at,
        api_version=api_version,
        kind=kind,
        name=name,
        namespace=namespace if resource.namespaced else None,
    )


def _set_load(
    p: Problems,
    raw: Mapping[str, Any],
    path: str,
    *,
    at: float,
    containers: Set[tuple[str, str]],
    base_dir: Path,
) -> SetLoadEvent | None:
    workload = p.string(raw.get("workload"), field_path(path, "workload"))
    container = p.string(raw.get("container"), field_path(path, "container"))
    if workload is not None and container is not None and (workload, container) not in containers:
        p.add(path, f"workload {workload!r} has no container {container!r}")
    usage = parse_usage(p, raw.get("usage"), field_path(path, "usage"), base_dir=base_dir)
    if workload is None or container is None or usage is None:
        return None
    return SetLoadEvent(at=at, workload=workload, container=container, usage=usage)


def _string_map(p: Problems, value: object, path: str) -> dict[str, str] | None:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        p.add(path, "want a map of label names to string values")
        return None
    return dict(value)


def _set_metric(
    p: Problems, raw: Mapping[str, Any], path: str, *, at: float, known_ns: Set[str]
) -> SetMetricEvent | None:
    kind = p.choice(
        raw.get("type"), field_path(path, "type"), what="metric type", choices=METRIC_TYPES
    )
    namespace = p.string(raw.get("namespace"), field_path(path, "namespace"))
    if namespace is not None and namespace not in known_ns:
        p.add(field_path(path, "namespace"), f"namespace {namespace!r} is not declared")
    name = p.string(raw.get("name"), field_path(path, "name"))
    value = p.quantity(raw.get("value"), field_path(path, "value"))
    if raw.get("value") is None:
        p.add(field_path(path, "value"), "required")
    selector = _string_map(p, raw.get("selector"), field_path(path, "selector"))
    labels = _string_map(p, raw.get("labels"), field_path(path, "labels"))
    if kind == "Pods" and not selector:
        p.add(field_path(path, "selector"), "a Pods metric needs the pods' labels")
    if (
        kind is None
        or namespace is None
        or name is None
        or value is None
        or selector is None
        or labels is None
    ):
        return None
    return SetMetricEvent(
        at=at,
        type=kind,
        namespace=namespace,
        name=name,
        value=value.to_json(),
        selector=selector,
        labels=labels,
    )


def _fault(p: Problems, raw: Mapping[str, Any], path: str, *, at: float) -> FaultEvent | None:
    fault = p.choice(raw.get("fault"), field_path(path, "fault"), what="fault", choices=FAULTS)
    verb = None
    if raw.get("verb") is not None:
        verb = p.choice(raw["verb"], field_path(path, "verb"), what="verb", choices=sorted(VERBS))
    resource = p.string(raw.get("resource"), field_path(path, "resource"))
    status = p.integer(raw.get("status"), field_path(path, "status"), default=500, minimum=0)
    if status is not None and status != 0 and not 400 <= status <= 599:
        p.add(field_path(path, "status"), f"want 0 (delay only) or 400-599, got {status}")
    count = p.integer(raw.get("count"), field_path(path, "count"), default=1, minimum=0)
    retry_after = p.duration(raw.get("retryAfter"), field_path(path, "retryAfter"))
    delay = p.duration(raw.get("delay"), field_path(path, "delay"), default=0.0)
    if fault is None or status is None or count is None or delay is None:
        return None
    return FaultEvent(
        at=at,
        fault=fault,
        verb=verb,
        resource=resource,
        status=status,
        count=count or None,
        retry_after=retry_after,
        delay=delay,
    )


def scenario_event(
    p: Problems,
    value: object,
    path: str,
    *,
    known_ns: Set[str],
    containers: Set[tuple[str, str]],
    base_dir: Path,
    crd_kinds: set[tuple[str, str]],
    end: float | None,
) -> ScenarioEvent | None:
    """One ``events[i]`` entry (``end``: the scenario's duration, when valid)."""
    if not isinstance(value, dict):
        p.mapping(value, path, allowed=())
        return None
    action = p.choice(
        value.get("action"), field_path(path, "action"), what="event action", choices=EVENT_ACTIONS
    )
    allowed = _EVENT_FIELDS.get(action or "", ("at", "action"))
    raw = p.mapping(value, path, allowed=allowed if action else list(value), required=("at",))
    at = p.duration(value.get("at"), field_path(path, "at"))
    if at is not None and end is not None and at >= end:
        p.add(field_path(path, "at"), f"{at:g}s is not before the end of the run ({end:g}s)")
        at = None
    if raw is None or action is None:
        return None
    # The action's fields are checked even when ``at`` is wrong, so every problem shows.
    when = at if at is not None else 0.0
    event: ScenarioEvent | None
    if action == "apply":
        event = _apply(p, raw, path, at=when, known_ns=known_ns, crd_kinds=crd_kinds)
    elif action == "delete":
        event = _delete(p, raw, path, at=when)
    elif action == "setLoad":
        event = _set_load(p, raw, path, at=when, containers=containers, base_dir=base_dir)
    elif action == "setMetric":
        event = _set_metric(p, raw, path, at=when, known_ns=known_ns)
    else:
        event = _fault(p, raw, path, at=when)
    return event if at is not None else None


def extender(p: Problems, value: object, path: str) -> dict[str, Any] | None:
    """One KubeSchedulerConfiguration ``extenders`` entry, checked, as written."""
    raw = p.mapping(value, path, allowed=_EXTENDER_FIELDS, required=("urlPrefix",))
    if raw is None:
        return None
    url = p.string(raw.get("urlPrefix"), field_path(path, "urlPrefix"))
    if url is not None and not url.startswith(("http://", "https://")):
        p.add(field_path(path, "urlPrefix"), f"want an http:// or https:// URL, got {url!r}")
    for verb in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb"):
        p.string(raw.get(verb), field_path(path, verb))
    weight = p.integer(raw.get("weight"), field_path(path, "weight"), default=0)
    if raw.get("prioritizeVerb") and weight is not None and weight <= 0:
        # upstream validateExtenders, when a prioritizeVerb is set
        p.add(field_path(path, "weight"), "must have a positive weight applied to it")
    for flag in ("enableHTTPS", "nodeCacheCapable", "ignorable"):
        p.boolean(raw.get(flag), field_path(path, flag), default=False)
    p.duration(raw.get("httpTimeout"), field_path(path, "httpTimeout"))
    tls_path = field_path(path, "tlsConfig")
    if raw.get("tlsConfig") is not None:
        tls = p.mapping(raw["tlsConfig"], tls_path, allowed=_TLS_FIELDS) or {}
        p.boolean(tls.get("insecure"), field_path(tls_path, "insecure"), default=False)
        for key in _TLS_FIELDS[1:]:
            p.string(tls.get(key), field_path(tls_path, key))
    for item_path, item in p.items(
        raw.get("managedResources"), field_path(path, "managedResources")
    ):
        resource = p.mapping(
            item, item_path, allowed=("name", "ignoredByScheduler"), required=("name",)
        )
        if resource is not None:
            p.string(resource.get("name"), field_path(item_path, "name"))
            p.boolean(
                resource.get("ignoredByScheduler"),
                field_path(item_path, "ignoredByScheduler"),
                default=False,
            )
    return copy.deepcopy(dict(raw))


def kubescale_components(p: Problems, value: object) -> dict[str, dict[str, Any]]:
    """The ``kubescale`` section: component name → its flags (``true``/``{}``: defaults)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        p.add("kubescale", f"want a mapping of component names to their flags, got {value!r}")
        return {}
    enabled: dict[str, dict[str, Any]] = {}
    for name in sorted(value, key=str):
        path = field_path("kubescale", str(name))
        flags = value[name]
        if str(name) not in component_names():
            known = f"want one of: {', '.join(component_names())}"
            p.add(path, f'unknown kubescale component "{name}" ({known})')
            continue
        if flags is False:
            continue
        if flags is True or flags is None:
            flags = {}
        if not isinstance(flags, dict):
            p.add(path, "want a mapping of flags, true or false")
            continue
        for problem in validate_flags(str(name), flags, path=path):
            p.messages.append(problem)
        enabled[str(name)] = copy.deepcopy(flags)
    return enabled
