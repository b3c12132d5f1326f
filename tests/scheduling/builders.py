"""Nodes and pods for the shared fit's table tests (``st.MakeNode``/``st.MakePod`` of
kube-scheduler's tests, as JSON objects)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from tests import builders

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def fit_node(
    name: str,
    labels: Mapping[str, str] | None = None,
    *,
    taints: Sequence[Mapping[str, Any]] = (),
    cpu: str = "32",
    memory: str = "64Gi",
    pods: int = 110,
) -> Node:
    """``st.MakeNode().Name(name).Label(…).Taints(…).Capacity(…)``: labels (always present),
    taints when given, allocatable cpu/memory/pods, over :func:`tests.builders.nodes.node`."""
    return builders.nodes.typed_node(
        name=name,
        labels=labels or {},
        taints=taints or None,
        spec={},
        allocatable={"cpu": cpu, "memory": memory, "pods": str(pods)},
        api_version=None,
    )


def spread(
    max_skew: int,
    key: str,
    selector: Mapping[str, Any] | None = FOO,
    *,
    when: str = "DoNotSchedule",
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """``SpreadConstraint(maxSkew, key, when, selector, minDomains, nodeAffinityPolicy,
    nodeTaintsPolicy, matchLabelKeys)``."""
    raw: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        raw["labelSelector"] = dict(selector)
    if min_domains is not None:
        raw["minDomains"] = min_domains
    if affinity_policy is not None:
        raw["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        raw["nodeTaintsPolicy"] = taints_policy
    if match_label_keys:
        raw["matchLabelKeys"] = list(match_label_keys)
    return raw


def fit_pod(
    name: str,
    *,
    node: str | None = None,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    terminating: bool = False,
    constraints: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    affinity_in: tuple[str, Sequence[str]] | None = None,
    affinity_not_in: tuple[str, Sequence[str]] | None = None,
    ports: Sequence[str] = (),
    sidecar_ports: Sequence[str] = (),
    init_ports: Sequence[str] = (),
    cpu: str = "100m",
    tolerations: Sequence[Mapping[str, Any]] = (),
    affinity: Mapping[str, Any] | None = None,
) -> Pod:
    """``st.MakePod()``: a Running pod of one container ``c`` requesting ``cpu``; ``ports`` are
    upstream's ``"PROTOCOL/hostIP/hostPort"`` strings (``newPod``); ``affinity`` is further
    ``spec.affinity`` (pod affinity, anti-affinity), merged with ``affinity_in``/``_not_in``;
    over :func:`tests.builders.pods.pod`."""
    container_fields: dict[str, Any] = {}
    if ports:
        container_fields["ports"] = [_port(p) for p in ports]
    init: list[dict[str, Any]] = []
    if sidecar_ports:
        init.append(
            builders.pods.container(
                "side", restartPolicy="Always", ports=[_port(p) for p in sidecar_ports]
            )
        )
    if init_ports:
        init.append(builders.pods.container("init", ports=[_port(p) for p in init_ports]))
    spec: dict[str, Any] = {}
    if constraints:
        spec["topologySpreadConstraints"] = [dict(c) for c in constraints]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    for operator, term in (("In", affinity_in), ("NotIn", affinity_not_in)):
        if term is not None:
            key, values = term
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": key, "operator": operator, "values": list(values)}
                                ]
                            }
                        ]
                    }
                }
            }
    if affinity is not None:
        spec["affinity"] = {**spec.get("affinity", {}), **affinity}
    return builders.pods.typed_pod(
        name=name,
        namespace=namespace,
        labels=labels or {},
        deletion_timestamp="2026-01-01T00:00:00Z" if terminating else None,
        containers=[builders.pods.container("c", requests={"cpu": cpu}, **container_fields)],
        init_containers=init or None,
        node_name=node,
        spec=spec,
        status={"phase": "Running"},
        api_version=None,
    )


def _port(text: str) -> dict[str, Any]:
    protocol, ip, port = text.split("/")
    entry: dict[str, Any] = {"containerPort": int(port), "hostPort": int(port)}
    if protocol:
        entry["protocol"] = protocol
    if ip:
        entry["hostIP"] = ip
    return entry
