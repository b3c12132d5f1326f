"""Cluster API objects: MachineDeployment, MachineSet, Machine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.objects.machine_set import MachineSet
from tests.builders.meta import manifest, metadata, typed_builder

CAPI_API_VERSION = "cluster.x-k8s.io/v1beta1"


def _capi(
    kind: str,
    *,
    name: str,
    namespace: str | None,
    uid: str | None,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    owner_references: Sequence[Mapping[str, Any]] | None,
    creation_timestamp: str | None,
    spec: Mapping[str, Any] | None,
    status: Mapping[str, Any] | None,
    api_version: str | None,
) -> dict[str, Any]:
    meta = metadata(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        owner_references=owner_references,
        creation_timestamp=creation_timestamp,
    )
    return manifest(
        api_version,
        kind,
        meta,
        spec=dict(spec) if spec is not None else None,
        status=dict(status) if status is not None else None,
    )


def machine_deployment(
    *,
    name: str = "md",
    namespace: str | None = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    creation_timestamp: str | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = CAPI_API_VERSION,
) -> dict[str, Any]:
    """A MachineDeployment; ``spec``/``status`` are given whole (left out when ``None``)."""
    return _capi(
        "MachineDeployment",
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        owner_references=owner_references,
        creation_timestamp=creation_timestamp,
        spec=spec,
        status=status,
        api_version=api_version,
    )


def machine_set(
    *,
    name: str = "ms",
    namespace: str | None = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    creation_timestamp: str | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = CAPI_API_VERSION,
) -> dict[str, Any]:
    """A MachineSet; ``spec``/``status`` are given whole (left out when ``None``)."""
    return _capi(
        "MachineSet",
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        owner_references=owner_references,
        creation_timestamp=creation_timestamp,
        spec=spec,
        status=status,
        api_version=api_version,
    )


def machine(
    *,
    name: str = "m",
    namespace: str | None = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    creation_timestamp: str | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = CAPI_API_VERSION,
) -> dict[str, Any]:
    """A Machine; ``spec``/``status`` are given whole (left out when ``None``)."""
    return _capi(
        "Machine",
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        owner_references=owner_references,
        creation_timestamp=creation_timestamp,
        spec=spec,
        status=status,
        api_version=api_version,
    )


typed_machine_set = typed_builder(machine_set, MachineSet)
"""``machine_set()`` typed as :class:`kubescale.objects.machine_set.MachineSet`."""
