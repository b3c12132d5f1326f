"""Nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.objects.node import Node
from kubescale.sim.cluster.node_templates import NodeTemplate, build_node
from tests.builders.meta import manifest, metadata, typed_builder


def ready_condition(
    status: str = "True", *, last_transition_time: str | None = None
) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "Ready", "status": status}
    if last_transition_time is not None:
        condition["lastTransitionTime"] = last_transition_time
    return condition


def node(
    *,
    name: str = "n1",
    uid: str | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    creation_timestamp: str | None = None,
    provider_id: str | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    unschedulable: bool | None = None,
    spec: Mapping[str, Any] | None = None,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = "v1",
) -> dict[str, Any]:
    """A Node. ``spec`` is present when one of its fields is given (``spec={}`` for an empty
    one), ``status`` likewise (``capacity``, ``allocatable``, ``conditions``, ``status``)."""
    spec_body: dict[str, Any] | None = None
    if provider_id is not None or taints is not None or unschedulable is not None or spec:
        spec_body = {}
    if spec is not None:
        spec_body = {}
    if spec_body is not None:
        if provider_id is not None:
            spec_body["providerID"] = provider_id
        if taints is not None:
            spec_body["taints"] = [dict(t) for t in taints]
        if unschedulable is not None:
            spec_body["unschedulable"] = unschedulable
        spec_body.update(spec or {})
    status_body: dict[str, Any] | None = None
    if capacity is not None or allocatable is not None or conditions is not None or status:
        status_body = {}
    if status is not None:
        status_body = {}
    if status_body is not None:
        if capacity is not None:
            status_body["capacity"] = dict(capacity)
        if allocatable is not None:
            status_body["allocatable"] = dict(allocatable)
        if conditions is not None:
            status_body["conditions"] = [dict(c) for c in conditions]
        status_body.update(status or {})
    meta = metadata(
        name=name,
        uid=uid,
        resource_version=resource_version,
        labels=labels,
        annotations=annotations,
        creation_timestamp=creation_timestamp,
    )
    return manifest(api_version, "Node", meta, spec=spec_body, status=status_body)


typed_node = typed_builder(node, Node)
"""``node()`` typed as :class:`kubescale.objects.node.Node`."""


def sim_node(
    *,
    name: str = "n1",
    instance_type: str = "test",
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    zone: str = "zone-a",
    unschedulable: bool = False,
    ready_since: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    """The Node the simulated cloud's kubelet registers for a machine of this instance type
    (:func:`kubescale.sim.cluster.node_templates.build_node`: capacity = allocatable, zone and
    instance-type labels, Ready since ``ready_since``), provider ID ``sim://<name>``, address
    ``10.0.0.1``; ``unschedulable`` cordons it."""
    template = NodeTemplate(
        instance_type=instance_type, cpu=cpu, memory=memory, pods=pods, taints=tuple(taints)
    )
    body = build_node(
        name=name,
        template=template,
        zone=zone,
        provider_id=f"sim://{name}",
        address="10.0.0.1",
        labels=labels,
        ready_since=ready_since,
    )
    if unschedulable:
        body["spec"]["unschedulable"] = True
    return body
