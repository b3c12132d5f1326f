"""Reading the ``workloads`` of a scenario: kinds, containers, requests/limits, usage models.

Rules taken from Kubernetes' own validation where they apply: a container's limit may not be
below its request (``ValidateResourceRequirements``: "must be less than or equal to ... limit"),
container names are unique within a pod, a Job's ``completions``/``parallelism``/
``backoffLimit`` are non-negative. Simulator rules: a Job needs ``duration`` (how long each of
its pods runs before it succeeds); ``replicas`` means nothing for a DaemonSet (one pod per
eligible node) and a Job (``parallelism``) and is refused there.
"""

from __future__ import annotations

from collections.abc import Set
from pathlib import Path
from typing import Any, Final

from kubescale.objects.quantities import Quantity

from .scenario_fields import Problems, field_path
from .scenario_format import WORKLOAD_KINDS, ContainerSpec, ResourceList, WorkloadSpec
from .usage_specs import parse_usage

__all__ = ["DEFAULT_IMAGE", "allocatable_resources", "container_resources", "workload"]

DEFAULT_IMAGE: Final = "registry.k8s.io/pause:3.10"
POD_SPEC_FIELDS: Final = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "priority",
    "terminationGracePeriodSeconds",
    "topologySpreadConstraints",
    "schedulerName",
    "restartPolicy",
)
_COMMON: Final = ("kind", "name", "namespace", "labels", "podSpec", "containers")
_BY_KIND: Final = {
    "Deployment": (*_COMMON, "replicas"),
    "StatefulSet": (*_COMMON, "replicas"),
    "DaemonSet": _COMMON,
    "Job": (*_COMMON, "parallelism", "completions", "backoffLimit", "duration"),
}


def _resources(
    p: Problems, value: object, path: str, *, allowed: tuple[str, ...], required: tuple[str, ...]
) -> ResourceList:
    raw = p.mapping(value if value is not None else {}, path, allowed=allowed, required=required)
    if raw is None:
        return ResourceList()
    text: dict[str, str] = {}
    for key in allowed:
        quantity = p.quantity(raw.get(key), field_path(path, key))
        if quantity is not None:
            text[key] = str(quantity)
    return ResourceList(cpu=text.get("cpu"), memory=text.get("memory"), pods=text.get("pods"))


def allocatable_resources(p: Problems, value: object, path: str) -> ResourceList:
    """A node's allocatable cpu and memory (required) and pods (default 110, the kubelet's)."""
    found = _resources(
        p, value, path, allowed=("cpu", "memory", "pods"), required=("cpu", "memory")
    )
    if found.pods is None:
        return ResourceList(cpu=found.cpu, memory=found.memory, pods="110")
    return found


def container_resources(p: Problems, value: object, path: str) -> tuple[ResourceList, ResourceList]:
    """A container's ``requests`` and ``limits`` (cpu, memory) from ``resources`` fields."""
    requests = _resources(
        p,
        value.get("requests") if isinstance(value, dict) else None,
        field_path(path, "requests"),
        allowed=("cpu", "memory"),
        required=(),
    )
    limits = _resources(
        p,
        value.get("limits") if isinstance(value, dict) else None,
        field_path(path, "limits"),
        allowed=("cpu", "memory"),
        required=(),
    )
    for resource in ("cpu", "memory"):
        request, limit = getattr(requests, resource), getattr(limits, resource)
        if (
            request is not None
            and limit is not None
            and Quantity.parse(request) > Quantity.parse(limit)
        ):
            p.add(
                field_path(field_path(path, "requests"), resource),
                f"must be less than or equal to {resource} limit of {limit}",
            )
    return requests, limits


def _container(p: Problems, value: object, path: str, *, base_dir: Path) -> ContainerSpec | None:
    raw = p.mapping(
        value,
        path,
        allowed=("name", "image", "requests", "limits", "usage"),
        required=("name", "usage"),
    )
    if raw is None:
        return None
    name = p.string(raw.get("name"), field_path(path, "name"))
    image = p.string(raw.get("image"), field_path(path, "image"), default=DEFAULT_IMAGE)
    requests, limits = container_resources(p, raw, path)
    usage = parse_usage(p, raw.get("usage"), field_path(path, "usage"), base_dir=base_dir)
    if name is None or image is None or usage is None:
        return None
    return ContainerSpec(name=name, image=image, requests=requests, limits=limits, usage=usage)


def _pod_spec(p: Problems, value: object, path: str, *, kind: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    raw = p.mapping(value, path, allowed=POD_SPEC_FIELDS)
    if raw is None:
        return {}
    policy = raw.get("restartPolicy")
    if policy is not None:
        # upstream: a Job's pods restart Never or OnFailure, other controllers' pods Always
        allowed = ("Never", "OnFailure") if kind == "Job" else ("Always",)
        p.choice(policy, field_path(path, "restartPolicy"), what="restart policy", choices=allowed)
    return {key: raw[key] for key in sorted(raw) if key in POD_SPEC_FIELDS}


def workload(
    p: Problems, value: object, path: str, *, known_ns: Set[str], base_dir: Path
) -> WorkloadSpec | None:
    """One ``workloads[i]`` entry."""
    if not isinstance(value, dict):
        p.mapping(value, path, allowed=())
        return None
    kind = p.choice(
        value.get("kind"), field_path(path, "kind"), what="workload kind", choices=WORKLOAD_KINDS
    )
    allowed = _BY_KIND.get(kind or "", _BY_KIND["Job"] + ("replicas",))
    raw = p.mapping(value, path, allowed=allowed, required=("name", "containers"))
    if raw is None:
        return None
    name = p.string(raw.get("name"), field_path(path, "name"))
    namespace = p.string(raw.get("namespace"), field_path(path, "namespace"), default="default")
    if namespace is not None and namespace not in known_ns:
        p.add(field_path(path, "namespace"), f"namespace {namespace!r} is not in namespaces")
    count_key = "parallelism" if kind == "Job" else "replicas"
    replicas = p.integer(raw.get(count_key), field_path(path, count_key), default=1, minimum=0)
    labels = p.labels(raw.get("labels"), field_path(path, "labels"))
    pod_spec = _pod_spec(p, raw.get("podSpec"), field_path(path, "podSpec"), kind=kind)
    containers_path = field_path(path, "containers")
    containers = p.each(
        raw.get("containers"),
        containers_path,
        lambda v, item_path: _container(p, v, item_path, base_dir=base_dir),
    )
    if raw.get("containers") == []:
        p.add(containers_path, "a pod needs at least one container")
    seen: set[str] = set()
    for container in containers:
        if container.name in seen:
            p.add(containers_path, f"container name {container.name!r} is used twice")
        seen.add(container.name)
    completions = p.integer(raw.get("completions"), field_path(path, "completions"), minimum=0)
    backoff = p.integer(raw.get("backoffLimit"), field_path(path, "backoffLimit"), minimum=0)
    run = p.duration(raw.get("duration"), field_path(path, "duration"), positive=True)
    if kind == "Job" and raw.get("duration") is None:
        p.add(field_path(path, "duration"), "required (how long each pod of the Job runs)")
    if kind is None or name is None or namespace is None or replicas is None:
        return None
    return WorkloadSpec(
        kind=kind,
        name=name,
        namespace=namespace,
        replicas=replicas,
        containers=containers,
        labels=labels,
        pod_spec=pod_spec,
        completions=completions,
        backoff_limit=backoff,
        run_duration=run,
    )
