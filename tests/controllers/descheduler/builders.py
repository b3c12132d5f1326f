"""Nodes, pods and policies for the descheduler's table tests, and a cycle driver.

Quantities are written as the API writes them; the expected values in the tests are worked out
from upstream's rules in /work/shared/reference/descheduler-and-extender.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from kubescale.controllers.descheduler.descheduling_cycle import (
    CycleReport,
    descheduling_cycle,
    run_cycle,
)
from kubescale.controllers.descheduler.framework.eviction import EvictionRequest
from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.scheduling.cycle_view import CycleView, cycle_nodes
from kubescale.scheduling.policy.policy_loading import (
    DeschedulerPolicy,
    parse_policy,
)
from tests import builders

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
Obj = dict[str, Any]


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def cycle_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool | None = True,
    extra: Mapping[str, str] | None = None,
) -> Node:
    """A Node (hostname label, allocatable = capacity, Ready ``ready`` unless ``None``) over
    :func:`tests.builders.nodes.typed_node`."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return builders.nodes.typed_node(
        name=name,
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        taints=taints or None,
        unschedulable=True if unschedulable else None,
        spec={},
        allocatable=allocatable,
        capacity=allocatable,
        conditions=[] if ready is None else [{"type": "Ready", "status": str(ready)}],
    )


def owner(kind: str = "ReplicaSet", name: str = "web", uid: str | None = None) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": uid or f"uid-{kind}-{name}",
        "controller": True,
    }


def cycle_pod(
    name: str,
    node_name: str | None = "n1",
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    owners: Sequence[Obj] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
    phase: str = "Running",
    created: datetime | None = None,
    image: str = "nginx",
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    limits: Mapping[str, str] | None = None,
) -> Pod:
    """A pod; ``owners`` defaults to one ReplicaSet ``web`` (so the evictor lets it go)."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = dict(limits)
    return builders.pods.typed_pod(
        name=name,
        namespace=namespace,
        uid=f"uid-pod-{namespace}-{name}",
        creation_timestamp=stamp(created or NOW - timedelta(hours=2)),
        labels=labels or {},
        annotations=annotations or None,
        owner_references=owners if owners is not None else [owner()],
        containers=[builders.pods.container("app", image=image, resources=resources)],
        node_name=node_name or None,
        spec={**({"priority": priority} if priority is not None else {}), **(spec or {})},
        status={"phase": phase, **(status or {})},
    )


def policy(
    *plugins: tuple[str, str, Mapping[str, Any] | None],
    evictor: Any = None,
    **top: Any,
) -> DeschedulerPolicy:
    """A one-profile policy; ``plugins`` are (extension point, name, args)."""
    config: list[Obj] = []
    if evictor is not None:
        config.append({"name": "DefaultEvictor", "args": dict(evictor)})
    enabled: dict[str, list[str]] = {}
    for point, name, args in plugins:
        if args is not None:
            config.append({"name": name, "args": dict(args)})
        enabled.setdefault(point, []).append(name)
    document: Obj = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        **top,
        "profiles": [
            {
                "name": "default",
                "pluginConfig": config,
                "plugins": {point: {"enabled": names} for point, names in enabled.items()},
            }
        ],
    }
    return parse_policy(yaml.safe_load(yaml.safe_dump(document)))


def view(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    the_policy: DeschedulerPolicy | None = None,
    now: datetime = NOW,
    **extra: Any,
) -> CycleView:
    selector = the_policy.node_selector_parsed if the_policy is not None else None
    return CycleView(
        now=now, nodes=cycle_nodes(nodes, selector), pods=pods, all_nodes=nodes, **extra
    )


def run(
    the_policy: DeschedulerPolicy,
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    answer: Callable[[EvictionRequest], bool] | None = None,
    **extra: Any,
) -> CycleReport:
    """One cycle on this cluster; every eviction succeeds unless ``answer`` says otherwise."""
    cycle_view = view(nodes, pods, the_policy=the_policy, **extra)
    return run_cycle(
        descheduling_cycle(policy=the_policy, view=cycle_view),
        answer or (lambda request: True),
    )


def evicted(report: CycleReport) -> list[str]:
    """Names of the pods evicted, in order."""
    return [record.pod.split("/", 1)[1] for record in report.evicted]
