"""Workload controllers: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
ReplicationController, and the pod template they share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.objects.replica_set import ReplicaSet
from tests.builders.meta import manifest, metadata, typed_builder


def pod_template(
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    containers: Sequence[Mapping[str, Any]] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``spec.template``: ``metadata`` when labels or annotations are given; ``containers``
    default to one ``{"name": "app", "image": "nginx"}``; ``spec`` adds pod spec fields."""
    template: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if meta:
        template["metadata"] = meta
    body: dict[str, Any] = {
        "containers": (
            [dict(c) for c in containers]
            if containers is not None
            else [{"name": "app", "image": "nginx"}]
        )
    }
    body.update(spec or {})
    template["spec"] = body
    return template


def workload(
    kind: str,
    *,
    name: str = "web",
    namespace: str | None = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    creation_timestamp: str | None = None,
    generation: int | None = None,
    replicas: int | None = None,
    match_labels: Mapping[str, str] | None = None,
    template: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = "apps/v1",
) -> dict[str, Any]:
    """A workload of ``kind``: ``spec`` = ``replicas``, ``selector.matchLabels``, ``template``
    (each when given), then ``spec``'s further fields."""
    body: dict[str, Any] = {}
    if replicas is not None:
        body["replicas"] = replicas
    if match_labels is not None:
        body["selector"] = {"matchLabels": dict(match_labels)}
    if template is not None:
        body["template"] = dict(template)
    body.update(spec or {})
    meta = metadata(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        owner_references=owner_references,
        creation_timestamp=creation_timestamp,
        generation=generation,
    )
    return manifest(
        api_version,
        kind,
        meta,
        spec=body if body or spec is not None else None,
        status=dict(status) if status is not None else None,
    )


def deployment(**fields: Any) -> dict[str, Any]:
    """A Deployment (:func:`workload`'s keywords)."""
    return workload("Deployment", **fields)


def replica_set(**fields: Any) -> dict[str, Any]:
    """A ReplicaSet (:func:`workload`'s keywords)."""
    return workload("ReplicaSet", **fields)


typed_replica_set = typed_builder(replica_set, ReplicaSet)


def stateful_set(**fields: Any) -> dict[str, Any]:
    """A StatefulSet (:func:`workload`'s keywords)."""
    return workload("StatefulSet", **fields)


def daemon_set(**fields: Any) -> dict[str, Any]:
    """A DaemonSet (:func:`workload`'s keywords)."""
    return workload("DaemonSet", **fields)


def job(**fields: Any) -> dict[str, Any]:
    """A Job (:func:`workload`'s keywords; ``api_version`` defaults to ``batch/v1``)."""
    return workload("Job", **{"api_version": "batch/v1", **fields})
