"""Small builders of nodes, pods and provider snapshots for the autoscaler's table tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    Instance,
    InstanceState,
    NodeGroup,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import NodeGroupDefaults
from kubescale.objects.node import Node, Taint
from kubescale.objects.pod import Pod, PodSpec, Toleration, Volume
from tests import builders

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
GI = 1024**3


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def ca_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: int = 110,
    ready: bool = True,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    created: datetime | None = None,
    unschedulable: bool = False,
    annotations: Mapping[str, str] | None = None,
    provider_id: str | None = None,
    capacity: Mapping[str, str] | None = None,
) -> Node:
    """A Node of the sim cloud (hostname label, provider ID ``sim://<name>``, Ready since
    ``created``) over :func:`tests.builders.nodes.typed_node`."""
    created = created or NOW - timedelta(hours=1)
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return builders.nodes.typed_node(
        name=name,
        creation_timestamp=stamp(created),
        labels={"kubernetes.io/hostname": name, **(labels or {})},
        annotations=dict(annotations) if annotations else None,
        provider_id=provider_id or f"sim://{name}",
        taints=[t.copy() for t in taints] or None,
        unschedulable=True if unschedulable else None,
        capacity=dict(capacity or allocatable),
        allocatable=allocatable,
        conditions=[
            builders.nodes.ready_condition(
                "True" if ready else "False", last_transition_time=stamp(created)
            )
        ],
    )


def ca_pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "100Mi",
    node_name: str | None = None,
    namespace: str = "default",
    owner: tuple[str, str] | None = ("ReplicaSet", "web"),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
    created: datetime | None = None,
    unschedulable: bool = False,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Toleration] = (),
    volumes: Sequence[Volume] = (),
    phase: str = "Running",
    extra_spec: PodSpec | None = None,
) -> Pod:
    """A pod owned by ``owner`` (kind, name), Pending unless ``node_name`` is given, over
    :func:`tests.builders.pods.typed_pod`."""
    created = created or NOW - timedelta(minutes=30)
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    spec: dict[str, Any] = {}
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [t.copy() for t in tolerations]
    if volumes:
        spec["volumes"] = [v.copy() for v in volumes]
    spec.update(extra_spec or {})
    status: dict[str, Any] = {"phase": phase if node_name else "Pending"}
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return builders.pods.typed_pod(
        name=name,
        namespace=namespace,
        uid=f"uid-{namespace}-{name}",
        creation_timestamp=stamp(created),
        labels=labels or {"app": "web"},
        annotations=dict(annotations) if annotations else None,
        owner_references=(
            None if owner is None else [builders.meta.owner_reference(kind=owner[0], name=owner[1])]
        ),
        containers=[builders.pods.container("app", requests=requests)],
        node_name=node_name or None,
        spec=spec,
        status=status,
    )


def group(
    name: str,
    *,
    min_size: int = 0,
    max_size: int = 10,
    target: int | None = None,
    nodes: Sequence[Node] = (),
    extra_instances: Sequence[Instance] = (),
    template: Node | None = None,
    price: float | None = None,
    options: NodeGroupDefaults | None = None,
) -> NodeGroup:
    instances = tuple(
        Instance(id=str(n["spec"]["providerID"]), state=InstanceState.RUNNING) for n in nodes
    ) + tuple(extra_instances)
    return NodeGroup(
        id=name,
        min_size=min_size,
        max_size=max_size,
        target_size=len(instances) if target is None else target,
        instances=instances,
        template=template,
        options=options or NodeGroupDefaults(),
        price_per_hour=price,
    )


def snapshot(*groups: NodeGroup) -> ProviderSnapshot:
    by_instance = {i.id: g.id for g in groups for i in g.instances}
    return ProviderSnapshot(groups={g.id: g for g in groups}, group_by_instance=by_instance)
