"""Small object builders for access-layer tests (valid enough for the in-process API server)."""

from __future__ import annotations

from typing import Any


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def config_map(
    name: str,
    ns: str = "default",
    *,
    data: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def pod(
    name: str,
    ns: str = "default",
    *,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    owner_uid: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    if owner_uid:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"rs-{owner_uid}",
                "uid": owner_uid,
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def deployment(name: str, ns: str = "default", *, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }


def vpa(name: str, ns: str = "default", *, target: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target}},
    }
