"""Small builders of nodes, pods and provider snapshots for the autoscaler's table tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    Instance,
    InstanceState,
    NodeGroup,
    ProviderSnapshot,
)
from kubescale.controllers.autoscaler.config.autoscaler_config import NodeGroupDefaults
from kubescale.objects.meta import ObjectMeta
from kubescale.objects.node import Node, NodeSpec, Taint
from kubescale.objects.pod import Pod, PodSpec, PodStatus, Toleration, Volume

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
GI = 1024**3


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node(
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
    created = created or NOW - timedelta(hours=1)
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    meta: ObjectMeta = {
        "name": name,
        "creationTimestamp": stamp(created),
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: NodeSpec = {"providerID": provider_id or f"sim://{name}"}
    if taints:
        spec["taints"] = [t.copy() for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": {
            "capacity": dict(capacity or allocatable),
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": stamp(created),
                }
            ],
        },
    }


def pod(
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
    created = created or NOW - timedelta(minutes=30)
    meta: ObjectMeta = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": stamp(created),
        "labels": dict(labels or {"app": "web"}),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": f"uid-{owner[0]}-{owner[1]}",
                "controller": True,
            }
        ]
    if annotations:
        meta["annotations"] = dict(annotations)
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    spec: PodSpec = {
        "containers": [{"name": "app", "resources": {"requests": requests}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [t.copy() for t in tolerations]
    if volumes:
        spec["volumes"] = [v.copy() for v in volumes]
    if extra_spec:
        spec.update(extra_spec)
    status: PodStatus = {"phase": phase if node_name else "Pending"}
    if unschedulable:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


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
