"""Reading a scenario document into a :class:`~.scenario_format.Scenario`, checking every field.

Every problem is collected (with its field path, e.g.
``workloads[2].containers[0].usage.type: unknown usage model "sine" (want one of: constant,
...)``) and raised together as one :class:`~.scenario_format.ScenarioError`, so a scenario is
fixed in one pass. Cross-field rules checked here: names unique per kind (workload names across
namespaces too, because the simulated pods carry the workload name only), namespaces of
workloads and objects exist (declared, or one every cluster has), node group
``min ≤ replicas ≤ max``, limits not below requests, ``step ≤ duration``, events inside the run
and naming known workloads/containers, kubescale components known.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import yaml

from kubescale.base.coordination import (
    COORDINATION_VALUES,
    DEFAULT_COORDINATION,
    Coordination,
    parse_coordination,
)

from .event_validation import extender, kubescale_components, manifest, scenario_event
from .scenario_fields import Problems, field_path
from .scenario_format import (
    DEFAULT_START,
    NodeGroupSpec,
    Scenario,
    ScenarioError,
    ScenarioEvent,
    SetLoadEvent,
    StaticNodeSpec,
    UsageSpec,
    WorkloadSpec,
)
from .trace_cluster import expand_trace
from .usage_specs import build_usage_model, load_traces
from .workload_validation import allocatable_resources, workload

__all__ = ["build_scenario", "load_scenario", "parse_scenario"]

_TOP: Final = (
    "name",
    "seed",
    "start",
    "duration",
    "step",
    "nodes",
    "nodeGroups",
    "namespaces",
    "workloads",
    "objects",
    "kubescale",
    "events",
    "extenders",
    "compare",
    "coordination",
    "trace",
)
_BUILTIN_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")


def load_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file (:class:`ScenarioError` lists every problem)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError([f"cannot read {path}: {exc.strerror or exc}"]) from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError([f"{path} is not valid YAML: {exc}"]) from exc
    return parse_scenario(document, base_dir=path.resolve().parent)


def parse_scenario(document: object, *, base_dir: Path) -> Scenario:
    """A validated scenario from a parsed YAML/JSON document."""
    return build_scenario(document, base_dir=base_dir)


def build_scenario(document: object, *, base_dir: Path) -> Scenario:
    if isinstance(document, dict) and "trace" in document:
        # a cluster built from a usage trace (trace_cluster.py), then checked as written
        document = expand_trace(document, base_dir=base_dir)
    p = Problems()
    raw = p.mapping(document, "", allowed=_TOP, required=("name", "duration"))
    if raw is None:
        raise ScenarioError(p.messages)
    name = p.string(raw.get("name"), "name")
    seed = p.integer(raw.get("seed"), "seed", default=1, minimum=0)
    start = _start(p, raw.get("start"))
    duration = p.duration(raw.get("duration"), "duration", positive=True)
    step = p.duration(raw.get("step"), "step", default=60.0, positive=True)
    if duration is not None and step is not None and step > duration:
        p.add("step", f"{step:g}s is longer than the duration ({duration:g}s)")
    namespaces = _namespaces(p, raw.get("namespaces"))
    known_ns = set(namespaces) | set(_BUILTIN_NAMESPACES)
    nodes = p.each(raw.get("nodes"), "nodes", lambda v, path: _static_node(p, v, path))
    groups = p.each(raw.get("nodeGroups"), "nodeGroups", lambda v, path: _node_group(p, v, path))
    _unique(p, [n.name for n in nodes] + [g.name for g in groups], "nodes", "node or node group")
    workloads = p.each(
        raw.get("workloads"),
        "workloads",
        lambda v, path: workload(p, v, path, known_ns=known_ns, base_dir=base_dir),
    )
    _unique(p, [w.name for w in workloads], "workloads", "workload")
    crd_kinds: set[tuple[str, str]] = set()  # kinds added by CRDs among the objects
    objects = p.each(
        raw.get("objects"),
        "objects",
        lambda v, path: manifest(p, v, path, known_ns=known_ns, crd_kinds=crd_kinds),
    )
    kubescale = kubescale_components(p, raw.get("kubescale"))
    coordination = _coordination(p, raw.get("coordination"))
    containers = _named_containers(raw.get("workloads"))

    def one_event(value: object, path: str) -> ScenarioEvent | None:
        return scenario_event(
            p,
            value,
            path,
            known_ns=known_ns,
            containers=containers,
            base_dir=base_dir,
            crd_kinds=crd_kinds,
            end=duration,
        )

    events: tuple[ScenarioEvent, ...] = p.each(raw.get("events"), "events", one_event)
    extenders = p.each(raw.get("extenders"), "extenders", lambda v, path: extender(p, v, path))
    compare = p.boolean(raw.get("compare"), "compare", default=False)
    if not p:
        _check_usage_models(p, workloads, events)
    if p or name is None or seed is None or duration is None or step is None:
        raise ScenarioError(p.messages)
    return Scenario(
        name=name,
        seed=seed,
        start=start,
        duration=duration,
        step=step,
        nodes=nodes,
        node_groups=groups,
        namespaces=namespaces,
        workloads=workloads,
        objects=objects,
        kubescale=kubescale,
        events=tuple(sorted(events, key=lambda e: e.at)),
        extenders=extenders,
        compare=compare,
        base_dir=base_dir,
        coordination=coordination,
    )


def _check_usage_models(
    p: Problems, workloads: tuple[WorkloadSpec, ...], events: tuple[ScenarioEvent, ...]
) -> None:
    """Load the replayed traces and build every usage model once, reporting what fails.

    Runs only on an otherwise valid document, so list indexes are those of the file.
    """
    specs: list[tuple[str, UsageSpec]] = [
        (f"workloads[{i}].containers[{j}].usage", container.usage)
        for i, workload_spec in enumerate(workloads)
        for j, container in enumerate(workload_spec.containers)
    ]
    specs += [
        (f"events[{k}].usage", event.usage)
        for k, event in enumerate(events)
        if isinstance(event, SetLoadEvent)
    ]
    try:
        traces = load_traces(spec for _, spec in specs)
    except (OSError, ValueError) as exc:
        p.add("", f"cannot load a replayed trace: {exc}")
        return
    for path, spec in specs:
        try:
            build_usage_model(spec, traces=traces)
        except (KeyError, ValueError) as exc:
            message = exc.args[0] if exc.args else str(exc)
            p.add(path, str(message))


def _named_containers(value: object) -> set[tuple[str, str]]:
    """(workload, container) names as written, even of entries with problems elsewhere, so an
    event naming them is not reported again."""
    names: set[tuple[str, str]] = set()
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        containers = item.get("containers")
        for container in containers if isinstance(containers, list) else []:
            if isinstance(container, dict):
                names.add((str(item.get("name")), str(container.get("name"))))
    return names


def _unique(p: Problems, names: list[str], path: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            p.add(path, f"{what} name {name!r} is used twice")
        seen.add(name)


def _start(p: Problems, value: object) -> datetime:
    if value is None:
        return DEFAULT_START
    if isinstance(value, datetime):  # YAML reads an unquoted timestamp itself
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    p.add("start", f'want an RFC 3339 time like "2026-01-01T00:00:00Z", got {value!r}')
    return DEFAULT_START


def _namespaces(p: Problems, value: object) -> tuple[str, ...]:
    names: list[str] = []
    for path, item in p.items(value, "namespaces"):
        name = p.string(item, path)
        if name is not None:
            names.append(name)
    _unique(p, names, "namespaces", "namespace")
    return tuple(names)


def _zones(p: Problems, value: object, path: str) -> tuple[str, ...]:
    parsed = (p.string(item, item_path) for item_path, item in p.items(value, path))
    return tuple(zone for zone in parsed if zone is not None)


def _static_node(p: Problems, value: object, path: str) -> StaticNodeSpec | None:
    allowed = (
        "name",
        "count",
        "allocatable",
        "labels",
        "taints",
        "pricePerHour",
        "instanceType",
        "zones",
    )
    raw = p.mapping(value, path, allowed=allowed, required=("name", "allocatable"))
    if raw is None:
        return None
    name = p.string(raw.get("name"), field_path(path, "name"))
    count = p.integer(raw.get("count"), field_path(path, "count"), default=1, minimum=1)
    allocatable = allocatable_resources(p, raw.get("allocatable"), field_path(path, "allocatable"))
    labels = p.labels(raw.get("labels"), field_path(path, "labels"))
    taints = p.taints(raw.get("taints"), field_path(path, "taints"))
    price = p.number(raw.get("pricePerHour"), field_path(path, "pricePerHour"), default=0.0)
    instance_type = p.string(raw.get("instanceType"), field_path(path, "instanceType"))
    zones = _zones(p, raw.get("zones"), field_path(path, "zones"))
    if name is None or price is None or count is None:
        return None
    return StaticNodeSpec(
        name=name,
        count=count,
        allocatable=allocatable,
        labels=labels,
        taints=taints,
        price_per_hour=price,
        instance_type=instance_type,
        zones=zones,
    )


def _node_group(p: Problems, value: object, path: str) -> NodeGroupSpec | None:
    allowed = (
        "name",
        "min",
        "max",
        "replicas",
        "template",
        "pricePerHour",
        "provisioningDelay",
        "deprovisioningDelay",
    )
    raw = p.mapping(value, path, allowed=allowed, required=("name", "max", "template"))
    if raw is None:
        return None
    name = p.string(raw.get("name"), field_path(path, "name"))
    low = p.integer(raw.get("min"), field_path(path, "min"), default=0, minimum=0)
    high = p.integer(raw.get("max"), field_path(path, "max"), minimum=0)
    replicas = p.integer(raw.get("replicas"), field_path(path, "replicas"), default=low, minimum=0)
    if low is not None and high is not None and replicas is not None:
        if low > high:
            p.add(field_path(path, "min"), f"min ({low}) is greater than max ({high})")
        elif not low <= replicas <= high:
            p.add(
                field_path(path, "replicas"), f"{replicas} is outside [min, max] = [{low}, {high}]"
            )
    template_path = field_path(path, "template")
    template = p.mapping(
        raw.get("template"),
        template_path,
        allowed=("allocatable", "labels", "taints", "instanceType", "zones"),
        required=("allocatable",),
    )
    template = template or {}
    allocatable = allocatable_resources(
        p, template.get("allocatable"), field_path(template_path, "allocatable")
    )
    labels = p.labels(template.get("labels"), field_path(template_path, "labels"))
    taints = p.taints(template.get("taints"), field_path(template_path, "taints"))
    instance_type = p.string(
        template.get("instanceType"), field_path(template_path, "instanceType")
    )
    zones = _zones(p, template.get("zones"), field_path(template_path, "zones"))
    price = p.number(raw.get("pricePerHour"), field_path(path, "pricePerHour"), default=0.0)
    up = p.duration(
        raw.get("provisioningDelay"), field_path(path, "provisioningDelay"), default=0.0
    )
    down = p.duration(
        raw.get("deprovisioningDelay"), field_path(path, "deprovisioningDelay"), default=0.0
    )
    if (
        name is None
        or low is None
        or high is None
        or replicas is None
        or price is None
        or up is None
        or down is None
    ):
        return None
    return NodeGroupSpec(
        name=name,
        min_size=low,
        max_size=high,
        replicas=replicas,
        allocatable=allocatable,
        labels=labels,
        taints=taints,
        price_per_hour=price,
        provisioning_delay=up,
        deprovisioning_delay=down,
        instance_type=instance_type,
        zones=zones,
    )


def _coordination(p: Problems, value: object) -> Coordination:
    """``coordination: one-brain | separate`` (default one-brain)."""
    if value is None:
        return DEFAULT_COORDINATION
    if not isinstance(value, str):
        p.add("coordination", f"must be one of: {', '.join(COORDINATION_VALUES)}")
        return DEFAULT_COORDINATION
    try:
        return parse_coordination(value)
    except argparse.ArgumentTypeError as exc:
        p.add("coordination", str(exc))
        return DEFAULT_COORDINATION
